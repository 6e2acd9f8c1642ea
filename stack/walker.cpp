#include "stack/walker.h"

#include <cxxabi.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <signal.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <utility>

#include "stack/proc_dwfl.h"
#include "stack/stopped_process.h"

namespace canopy::stack {
namespace {

// Field 22 of /proc/PID/stat, the start time in clock ticks since boot: with the pid
// it names one process, so a cached Dwfl is never used for a new process that reused
// the pid. 0 if unreadable.
unsigned long long start_time(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  auto close = line.rfind(')');
  if (close == std::string::npos) return 0;
  // Fields after the command: state is field 3; start time is field 22.
  std::size_t at = close + 2;
  for (int field = 3; field < 22 && at != std::string::npos; ++field) at = line.find(' ', at) + 1;
  if (at == 0 || at >= line.size()) return 0;
  return std::strtoull(line.c_str() + at, nullptr, 10);
}

std::string hex(Dwarf_Addr addr) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(addr));
  return text;
}

std::string basename_of(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

// A symbol's name as people read it: demangled, without its symbol version
// ("__libc_start_main@@GLIBC_2.34" is __libc_start_main).
std::string demangle(const char* versioned) {
  std::string name(versioned);
  if (auto at = name.find('@'); at != std::string::npos && at > 0) name.resize(at);
  if (!name.starts_with("_Z")) return name;
  int status = 0;
  char* plain = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || plain == nullptr) return name;
  std::string out(plain);
  std::free(plain);
  return out;
}

// What one thread's unwinding collected while the process was stopped: the
// addresses to look up (already adjusted into the calling instruction), innermost first.
struct RawStack {
  pid_t tid = 0;
  std::vector<Dwarf_Addr> pcs;
  std::string truncated;
};

// Whether a frame of `stacks` lies outside every module `dwfl` knows (one mapped
// since the modules were listed).
bool has_unknown_frame(Dwfl* dwfl, const std::vector<RawStack>& stacks) {
  for (const RawStack& stack : stacks) {
    for (Dwarf_Addr pc : stack.pcs) {
      if (dwfl_addrmodule(dwfl, pc) == nullptr) return true;
    }
  }
  return false;
}

struct FrameCollector {
  RawStack* stack;
  std::size_t max_frames;
};

int collect_frame(Dwfl_Frame* state, void* arg) {
  auto* collector = static_cast<FrameCollector*>(arg);
  Dwarf_Addr pc = 0;
  bool activation = false;
  if (!dwfl_frame_pc(state, &pc, &activation)) return DWARF_CB_ABORT;
  // A return address points after the call; pc - 1 is inside the call instruction, so
  // the lookup names the caller's function and line even when the call was the last
  // instruction of a function (noreturn calls). The innermost frame (and a frame
  // interrupted by a signal) is an activation: its pc is the instruction itself.
  collector->stack->pcs.push_back(activation || pc == 0 ? pc : pc - 1);
  if (collector->stack->pcs.size() >= collector->max_frames) {
    collector->stack->truncated = "cut at " + std::to_string(collector->max_frames) + " frames";
    return DWARF_CB_ABORT;
  }
  return DWARF_CB_OK;
}

// The source file and line of pc in module, or {nullptr, 0}. libdw (0.188, Debian
// 12's) finds a module's compile unit for an address only through .debug_aranges,
// which clang writes only when asked (-gdwarf-aranges): where the module has none,
// the units are searched for the one whose ranges hold pc, and its line table read.
std::pair<const char*, int> source_line(Dwfl_Module* module, Dwarf_Addr pc) {
  int line = 0;
  if (Dwfl_Line* source = dwfl_module_getsrc(module, pc)) {
    const char* file = dwfl_lineinfo(source, nullptr, &line, nullptr, nullptr, nullptr);
    return {file, line};
  }
  Dwarf_Addr bias = 0;
  Dwarf* dwarf = dwfl_module_getdwarf(module, &bias);
  Dwarf_Aranges* aranges = nullptr;
  std::size_t indexed = 0;
  if (dwarf == nullptr || (dwarf_getaranges(dwarf, &aranges, &indexed) == 0 && indexed > 0)) return {nullptr, 0};
  Dwarf_CU* unit = nullptr;
  Dwarf_Die unit_die;
  std::uint8_t unit_type = 0;
  while (dwarf_get_units(dwarf, unit, &unit, nullptr, &unit_type, &unit_die, nullptr) == 0) {
    if (dwarf_haspc(&unit_die, pc - bias) <= 0) continue;
    Dwarf_Line* source = dwarf_getsrc_die(&unit_die, pc - bias);
    if (source == nullptr || dwarf_lineno(source, &line) != 0) return {nullptr, 0};
    return {dwarf_linesrc(source, nullptr, nullptr), line};
  }
  return {nullptr, 0};
}

}  // namespace

std::string frame_name(Dwfl* dwfl, std::uint64_t pc, bool lines) {
  Dwfl_Module* module = dwfl_addrmodule(dwfl, pc);
  if (module == nullptr) return hex(pc) + " ??";
  GElf_Off offset = 0;
  GElf_Sym symbol;
  const char* name = dwfl_module_addrinfo(module, pc, &offset, &symbol, nullptr, nullptr, nullptr);
  std::string frame;
  if (name != nullptr) {
    frame = demangle(name);
  } else {
    // No symbol: the module and the offset in it, which are the same in every
    // process that maps the module (the address is not, with ASLR), so that
    // ranks stopped at the same place merge.
    Dwarf_Addr start = 0;
    const char* module_name = dwfl_module_info(module, nullptr, &start, nullptr, nullptr, nullptr,
                                               nullptr, nullptr);
    frame = basename_of(module_name != nullptr ? module_name : "??") + "+" + hex(pc - start);
  }
  if (lines) {
    auto [file, line] = source_line(module, pc);
    if (file != nullptr && line > 0) frame += " (" + basename_of(file) + ":" + std::to_string(line) + ")";
  }
  return frame;
}

struct Walker::Session {
  DwflPtr dwfl;
  unsigned long long started = 0;
};

Walker::Walker(WalkOptions options) : options_(options) {}
Walker::~Walker() = default;

Walker::Session* Walker::session_for(pid_t pid, std::string* error) {
  unsigned long long started = start_time(pid);
  auto cached = sessions_.find(pid);
  if (cached != sessions_.end() && cached->second->started == started && started != 0) {
    if (auto ok = rereport_process(cached->second->dwfl.get(), pid); !ok) {
      *error = ok.error();
      sessions_.erase(cached);
      return nullptr;
    }
    return cached->second.get();
  }
  if (cached != sessions_.end()) sessions_.erase(cached);
  auto dwfl = report_process(pid);
  if (!dwfl) {
    *error = dwfl.error();
    return nullptr;
  }
  // assume_ptrace_stopped: the threads are ours (StoppedProcess), so libdwfl neither
  // attaches nor detaches them, and this Dwfl stays usable for later samples.
  int rc = dwfl_linux_proc_attach(dwfl->get(), pid, true);
  if (rc != 0) {
    *error = "libdwfl cannot attach to process " + std::to_string(pid) + ": " +
             (rc > 0 ? std::strerror(rc) : dwfl_error_text());
    return nullptr;
  }
  auto session = std::make_unique<Session>();
  session->dwfl = std::move(*dwfl);
  session->started = started;
  return (sessions_[pid] = std::move(session)).get();
}

std::vector<Result<std::vector<ThreadStack>>> Walker::sample(const std::vector<pid_t>& pids) {
  // Forget processes that are gone, so a long-lived Walker does not hold their Dwfl.
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    it = (kill(it->first, 0) != 0 && errno == ESRCH) ? sessions_.erase(it) : std::next(it);
  }

  std::vector<std::optional<Error>> errors(pids.size());
  std::vector<std::optional<StoppedProcess>> stopped(pids.size());
  std::vector<Session*> sessions(pids.size(), nullptr);
  std::map<pid_t, std::size_t> first_index;  // a pid listed twice is sampled once
  // Each process's modules are listed and opened before any is stopped (the costly
  // part of a first sample), so that a process is held only while its stacks are
  // read. A module mapped between this and the stop is not known by name.
  for (std::size_t i = 0; i < pids.size(); ++i) {
    if (!first_index.emplace(pids[i], i).second) continue;
    std::string why;
    sessions[i] = session_for(pids[i], &why);
    if (sessions[i] == nullptr) {
      // Say why as stopping it would (no such process, no permission), if it would.
      auto process = StoppedProcess::stop(pids[i]);
      errors[i] = process ? Error{why} : Error{process.error(), process.error_kind()};
    }
  }
  // Stop them all before walking any, so that the stacks are one snapshot.
  const auto stop_began = std::chrono::steady_clock::now();
  std::vector<pid_t> to_stop;
  std::vector<std::size_t> index_of;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    if (sessions[i] == nullptr || first_index.at(pids[i]) != i) continue;
    to_stop.push_back(pids[i]);
    index_of.push_back(i);
  }
  auto stops = StoppedProcess::stop_all(
      to_stop, options_.all_threads ? StoppedProcess::Threads::all : StoppedProcess::Threads::main);
  for (std::size_t k = 0; k < stops.size(); ++k) {
    const std::size_t i = index_of[k];
    if (stops[k]) {
      stopped[i].emplace(std::move(*stops[k]));
    } else {
      errors[i] = Error{stops[k].error(), stops[k].error_kind()};
      sessions[i] = nullptr;
    }
  }

  std::vector<std::vector<RawStack>> raw(pids.size());
  // Unwinds every stopped thread of process i into raw[i]. A thread whose first frame
  // cannot be read (its registers: the process was killed) makes errors[i] and drops
  // the process's Dwfl: libdwfl (0.188) then skips its per-thread cleanup and would
  // abort on the next thread of this Dwfl (an assertion in pid_set_initial_registers).
  auto walk_threads = [&](std::size_t i) {
    for (pid_t tid : stopped[i]->threads()) {
      RawStack stack;
      stack.tid = tid;
      FrameCollector collector{&stack, options_.max_frames};
      int rc = dwfl_getthread_frames(sessions[i]->dwfl.get(), tid, collect_frame, &collector);
      if (rc == -1 && stack.truncated.empty()) stack.truncated = dwfl_error_text();
      if (!stack.pcs.empty()) {
        raw[i].push_back(std::move(stack));
        continue;
      }
      bool gone = kill(pids[i], 0) != 0 && errno == ESRCH;
      errors[i] = Error{gone || status_field(pids[i], "State").starts_with("Z")
                            ? "process " + std::to_string(pids[i]) + " exited while it was being sampled"
                            : "cannot read the registers of thread " + std::to_string(tid) + " of process " +
                                  std::to_string(pids[i]) + ": " + stack.truncated};
      sessions_.erase(pids[i]);
      sessions[i] = nullptr;
      raw[i].clear();
      return;
    }
  };
  for (std::size_t i = 0; i < pids.size(); ++i) {
    if (!stopped[i]) continue;
    // A module mapped after the listing above (a rank still loading its MPI
    // components, a dlopen) leaves frames outside every known module: list the
    // modules again, now that the process is stopped, and walk it once more.
    for (int attempt = 0; attempt < 2; ++attempt) {
      walk_threads(i);
      if (errors[i] || attempt == 1 || !has_unknown_frame(sessions[i]->dwfl.get(), raw[i])) break;
      raw[i].clear();
      if (auto ok = rereport_process(sessions[i]->dwfl.get(), pids[i]); !ok) {
        errors[i] = Error{ok.error(), ok.error_kind()};
        sessions_.erase(pids[i]);
        sessions[i] = nullptr;
        break;
      }
    }
  }
  // Let them all go before the name lookups, which read only the modules' files.
  for (auto& process : stopped) {
    if (process) process->resume();
  }
  last_stop_time_ =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - stop_began);

  std::vector<Result<std::vector<ThreadStack>>> results;
  results.reserve(pids.size());
  for (std::size_t i = 0; i < pids.size(); ++i) {
    std::size_t first = first_index.at(pids[i]);
    if (first != i) {
      results.push_back(results[first]);
      continue;
    }
    if (errors[i]) {
      results.emplace_back(std::move(*errors[i]));
      continue;
    }
    Dwfl* dwfl = sessions[i]->dwfl.get();
    std::vector<ThreadStack> threads;
    for (RawStack& stack : raw[i]) {
      ThreadStack thread{stack.tid, {}, std::move(stack.truncated)};
      for (auto pc = stack.pcs.rbegin(); pc != stack.pcs.rend(); ++pc) {
        thread.frames.push_back(frame_name(dwfl, *pc, options_.lines));
      }
      threads.push_back(std::move(thread));
    }
    results.push_back(std::move(threads));
  }
  return results;
}

}  // namespace canopy::stack
