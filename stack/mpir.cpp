#include "stack/mpir.h"

#include <elfutils/libdwfl.h>
#include <signal.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string_view>
#include <thread>

#include "stack/proc_dwfl.h"
#include "stack/stopped_process.h"

namespace canopy::stack {
namespace {

constexpr int mpir_debug_spawned = 1;

// One entry of MPIR_proctable as the launcher lays it out (MPIR standard, 64-bit).
struct RemoteProcDesc {
  std::uint64_t host_name;
  std::uint64_t executable_name;
  std::int32_t pid;
  std::int32_t padding;
};
static_assert(sizeof(RemoteProcDesc) == 24);

struct MpirSymbols {
  GElf_Addr proctable = 0;  // address of the pointer MPIR_proctable
  GElf_Addr size = 0;       // address of the int MPIR_proctable_size
  GElf_Addr state = 0;      // address of the int MPIR_debug_state (0 if absent)
};

std::string who(pid_t pid) {
  return "process " + std::to_string(pid) + " (" + process_name(pid) + ")";
}

// Why the table cannot be read yet; wait_for_proctable retries while it holds.
enum class NotReady { no, no_symbol, empty };

struct Attempt {
  Result<std::vector<RankProcess>> result;
  NotReady not_ready = NotReady::no;
};

Attempt fail(std::string message, ErrorKind kind = ErrorKind::failed, NotReady not_ready = NotReady::no) {
  return {Error{std::move(message), kind}, not_ready};
}

bool process_exists(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

// The state letter of /proc/PID/stat ('R', 'S', 'T', 'Z', ...), or 0.
char process_state(pid_t pid) {
  std::FILE* in = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (in == nullptr) return 0;
  char line[512] = {};
  std::size_t n = std::fread(line, 1, sizeof line - 1, in);
  std::fclose(in);
  const char* close = std::strrchr(line, ')');
  if (n == 0 || close == nullptr || close[1] == '\0') return 0;
  return close[2];
}

// Reading /proc/PID/maps needs the same permission as tracing the process.
bool can_read_maps(pid_t pid) {
  std::FILE* maps = std::fopen(("/proc/" + std::to_string(pid) + "/maps").c_str(), "r");
  if (maps == nullptr) return errno != EACCES && errno != EPERM;
  std::fclose(maps);
  return true;
}

// The addresses of the MPIR symbols in the modules the process has mapped: the first
// module that defines MPIR_proctable wins, and the other two are taken from it.
Attempt find_symbols(pid_t pid, MpirSymbols* out) {
  if (!process_exists(pid)) return fail("no process " + std::to_string(pid), ErrorKind::invalid_input);
  if (process_state(pid) == 'Z') return fail(who(pid) + " has exited (a zombie not yet reaped by its parent)");
  auto dwfl = report_process(pid);
  if (!dwfl) {
    if (!process_exists(pid)) return fail("no process " + std::to_string(pid), ErrorKind::invalid_input);
    if (!can_read_maps(pid)) return fail(permission_message(pid), ErrorKind::invalid_input);
    // A launcher caught in the middle of its exec has no map to read yet (ENOEXEC,
    // "Exec format error"; Mpir.ReadsTheRanksOfARunningJob failed on it once under
    // ASan): a caller that waits for the table tries again.
    return fail(dwfl.error(), ErrorKind::failed, NotReady::no_symbol);
  }
  struct Search {
    MpirSymbols found;
  } search;
  auto visit = [](Dwfl_Module* mod, void**, const char*, Dwarf_Addr, void* arg) -> int {
    auto* search = static_cast<Search*>(arg);
    int count = dwfl_module_getsymtab(mod);
    MpirSymbols here;
    for (int i = 1; i < count; ++i) {
      GElf_Sym sym;
      GElf_Addr addr = 0;
      GElf_Word shndx = 0;
      const char* name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, nullptr, nullptr);
      if (name == nullptr || sym.st_shndx == SHN_UNDEF || GELF_ST_TYPE(sym.st_info) != STT_OBJECT) continue;
      if (std::strcmp(name, "MPIR_proctable") == 0) here.proctable = addr;
      else if (std::strcmp(name, "MPIR_proctable_size") == 0) here.size = addr;
      else if (std::strcmp(name, "MPIR_debug_state") == 0) here.state = addr;
    }
    if (here.proctable == 0 || here.size == 0) return DWARF_CB_OK;
    search->found = here;
    return DWARF_CB_ABORT;
  };
  dwfl_getmodules(dwfl->get(), visit, &search, 0);
  if (search.found.proctable == 0) {
    return fail(who(pid) + " is not an MPI launcher: it has no MPIR_proctable; give the PID of mpirun",
                ErrorKind::invalid_input, NotReady::no_symbol);
  }
  *out = search.found;
  return {std::vector<RankProcess>{}};
}

// Reads `len` bytes at `addr` of the process. Errors say whether it exited.
Result<void> read_remote(pid_t pid, GElf_Addr addr, void* buffer, std::size_t len, const char* what) {
  iovec local{buffer, len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (got == static_cast<ssize_t>(len)) return {};
  if (got < 0 && errno == ESRCH) {
    return Error{"process " + std::to_string(pid) + " exited while its MPIR table was being read"};
  }
  if (got < 0 && errno == EPERM) return Error{permission_message(pid), ErrorKind::invalid_input};
  std::string why = got < 0 ? std::strerror(errno) : "short read";
  return Error{"cannot read " + std::string(what) + " of process " + std::to_string(pid) + " at 0x" +
               [&] {
                 char hex[32];
                 std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(addr));
                 return std::string(hex);
               }() +
               ": " + why};
}

// A NUL-terminated string of at most max_proctable_string bytes, read in pieces that
// never cross a page boundary (the string may end just before an unmapped page).
Result<std::string> read_remote_string(pid_t pid, GElf_Addr addr, const std::string& what) {
  if (addr == 0) return Error{what + " is a null pointer: the launcher's MPIR table is corrupt"};
  constexpr GElf_Addr page = 4096;
  std::string text;
  while (text.size() < max_proctable_string) {
    std::size_t chunk = std::min<GElf_Addr>(page - addr % page, max_proctable_string - text.size());
    char buffer[page];
    if (auto ok = read_remote(pid, addr, buffer, chunk, what.c_str()); !ok) {
      return Error{ok.error(), ok.error_kind()};
    }
    if (const void* nul = std::memchr(buffer, '\0', chunk)) {
      text.append(buffer, static_cast<const char*>(nul) - buffer);
      return text;
    }
    text.append(buffer, chunk);
    addr += chunk;
  }
  return Error{what + " is longer than " + std::to_string(max_proctable_string) +
               " bytes: the launcher's MPIR table is corrupt"};
}

struct TableHead {
  std::int32_t size = 0;
  std::int32_t state = 0;
};

Result<TableHead> read_head(pid_t pid, const MpirSymbols& symbols) {
  TableHead head;
  if (auto ok = read_remote(pid, symbols.size, &head.size, sizeof head.size, "MPIR_proctable_size"); !ok) {
    return Error{ok.error(), ok.error_kind()};
  }
  head.state = mpir_debug_spawned;  // a launcher without MPIR_debug_state: the size alone decides
  if (symbols.state != 0) {
    if (auto ok = read_remote(pid, symbols.state, &head.state, sizeof head.state, "MPIR_debug_state"); !ok) {
      return Error{ok.error(), ok.error_kind()};
    }
  }
  return head;
}

Attempt not_filled(pid_t pid) {
  return fail(who(pid) + " has an empty MPIR process table: the job's processes have not all called "
                         "MPI_Init yet; try again in a moment, or start the job with --mpirun-cmd, which waits "
                         "for its ranks (a job whose program is not an MPI program keeps its table empty)",
              ErrorKind::failed, NotReady::empty);
}

// The parent of `pid` (from /proc/PID/stat), or 0.
pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  const std::string line((std::istreambuf_iterator<char>(in)), {});
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 4 > line.size()) return 0;
  // ") S PPID ..."
  return static_cast<pid_t>(std::strtol(line.c_str() + close + 4, nullptr, 10));
}

// If `pid` is a rank of an MPI job (its environment has the rank launchers give:
// Open MPI's OMPI_COMM_WORLD_RANK, PMIx's PMIX_RANK, PMI's PMI_RANK), which rank, and
// the launcher above it (the nearest ancestor named mpirun, mpiexec, orterun,
// prterun, mpiexec.hydra or mpiexec.mpich, its name when started by that link), or 0
// when none is found.
struct RankOf {
  std::string rank;
  pid_t launcher = 0;
};
std::optional<RankOf> rank_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  if (!in) return std::nullopt;
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  std::optional<RankOf> found;
  for (std::string_view name : {"OMPI_COMM_WORLD_RANK=", "PMIX_RANK=", "PMI_RANK="}) {
    std::size_t at = 0;
    while (!found && at < text.size()) {
      const std::size_t end = std::min(text.find('\0', at), text.size());
      const std::string_view entry(text.data() + at, end - at);
      if (entry.starts_with(name)) found = RankOf{std::string(entry.substr(name.size()))};
      at = end + 1;
    }
    if (found) break;
  }
  if (!found) return std::nullopt;
  pid_t up = parent_of(pid);
  for (int hops = 0; up > 1 && hops < 6; ++hops, up = parent_of(up)) {
    const std::string name = process_name(up);
    if (name == "mpirun" || name == "mpiexec" || name == "orterun" || name == "prterun" || name == "mpiexec.hydra" ||
        name == "mpiexec.mpich") {
      found->launcher = up;
      break;
    }
  }
  return found;
}

// `pid` was given as the launcher: if it is a rank, an error that says so and which
// process to give instead.
std::optional<Error> a_rank_not_a_launcher(pid_t pid) {
  auto rank = rank_of(pid);
  if (!rank) return std::nullopt;
  std::string message = who(pid) + " is rank " + rank->rank + " of an MPI job, not its launcher: ";
  message += rank->launcher != 0 ? "give the launcher, " + who(rank->launcher) + ": canopy stack --mpirun " +
                                       std::to_string(rank->launcher)
                                 : "give the PID of the job's mpirun (or mpiexec)";
  return Error{message, ErrorKind::invalid_input};
}

// Reads the table with the launcher stopped (released when `stopped` goes out of scope).
Attempt read_table(pid_t pid, const MpirSymbols& symbols) {
  auto stopped = StoppedProcess::stop(pid);
  if (!stopped) return fail(stopped.error(), stopped.error_kind());
  auto head = read_head(pid, symbols);
  if (!head) return fail(head.error(), head.error_kind());
  if (head->size == 0 || head->state != mpir_debug_spawned) return not_filled(pid);
  if (head->size < 0 || head->size > max_proctable_size) {
    return fail(who(pid) + " has MPIR_proctable_size " + std::to_string(head->size) + ", outside 1.." +
                std::to_string(max_proctable_size) + ": the launcher's MPIR table is corrupt");
  }
  std::uint64_t table = 0;
  if (auto ok = read_remote(pid, symbols.proctable, &table, sizeof table, "MPIR_proctable"); !ok) {
    return fail(ok.error(), ok.error_kind());
  }
  if (table == 0) return fail(who(pid) + " has a null MPIR_proctable of size " + std::to_string(head->size));

  std::vector<RemoteProcDesc> entries(static_cast<std::size_t>(head->size));
  if (auto ok = read_remote(pid, table, entries.data(), entries.size() * sizeof(RemoteProcDesc), "MPIR_proctable[]");
      !ok) {
    return fail(ok.error(), ok.error_kind());
  }
  std::vector<RankProcess> ranks;
  ranks.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    std::string entry = "MPIR_proctable[" + std::to_string(i) + "]";
    auto host = read_remote_string(pid, entries[i].host_name, entry + ".host_name");
    if (!host) return fail(host.error(), host.error_kind());
    auto executable = read_remote_string(pid, entries[i].executable_name, entry + ".executable_name");
    if (!executable) return fail(executable.error(), executable.error_kind());
    if (entries[i].pid <= 0) {
      return fail(entry + ".pid is " + std::to_string(entries[i].pid) + ": the launcher's MPIR table is corrupt");
    }
    ranks.push_back({static_cast<std::uint32_t>(i), std::move(*host), std::move(*executable), entries[i].pid});
  }
  return {std::move(ranks)};
}

}  // namespace

Result<std::vector<RankProcess>> read_proctable(pid_t launcher) {
  if (auto rank = a_rank_not_a_launcher(launcher)) return std::move(*rank);
  MpirSymbols symbols;
  if (Attempt found = find_symbols(launcher, &symbols); !found.result) return std::move(found.result);
  return std::move(read_table(launcher, symbols).result);
}

Result<std::vector<RankProcess>> wait_for_proctable(pid_t launcher, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto poll = std::chrono::milliseconds(50);
  std::optional<MpirSymbols> symbols;
  while (true) {
    Attempt attempt{std::vector<RankProcess>{}};
    if (!symbols) {
      MpirSymbols found;
      attempt = find_symbols(launcher, &found);
      if (attempt.result) symbols = found;
    }
    if (symbols) {
      // Poll the head without stopping the launcher; stop it only to read a filled table.
      auto head = read_head(launcher, *symbols);
      if (!head) return Error{head.error(), head.error_kind()};
      if (head->size == 0 || head->state != mpir_debug_spawned) {
        attempt = not_filled(launcher);
      } else {
        attempt = read_table(launcher, *symbols);
      }
    }
    if (attempt.result || attempt.not_ready == NotReady::no) return std::move(attempt.result);
    if (std::chrono::steady_clock::now() + poll > deadline) {
      if (attempt.not_ready == NotReady::empty) {
        return Error{attempt.result.error() + " (waited " + std::to_string(timeout.count()) + " ms)",
                     attempt.result.error_kind()};
      }
      return std::move(attempt.result);
    }
    std::this_thread::sleep_for(poll);
  }
}

}  // namespace canopy::stack
