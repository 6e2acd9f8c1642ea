#include "stack/hydra.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <map>
#include <set>
#include <string_view>

namespace canopy::stack {
namespace {

constexpr std::string_view kProxy = "hydra_pmi_proxy";

// The contents of a /proc file, or what was read of it before an error. Not through
// an ifstream: libstdc++'s filebuf throws when read() fails, and reading a file of a
// process that exits meanwhile fails with ESRCH (canopy stack died of it once, in
// StackCli.TheLaunchFormWaitsForAnMpichJobsRanks, as a rank's copy of its proxy
// exec'd).
std::string read_all(const std::string& path) {
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

// The NUL-separated fields of /proc/PID/cmdline or /proc/PID/environ.
std::vector<std::string> fields(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\0', at), text.size());
    out.emplace_back(text, at, end - at);
    at = end + 1;
  }
  return out;
}

std::optional<std::uint32_t> number(std::string_view text) {
  std::uint32_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

bool names_proxy(const std::string& arg) { return arg.find(kProxy) != std::string::npos; }

// The words of a command line, its arguments split at blanks and unquoted: a proxy
// started through `sh -c "..."` has its options in one argument.
std::vector<std::string> words(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (const auto& arg : argv) {
    std::size_t at = 0;
    while (at < arg.size()) {
      const std::size_t begin = arg.find_first_not_of(" \t", at);
      if (begin == std::string::npos) break;
      const std::size_t end = std::min(arg.find_first_of(" \t", begin), arg.size());
      std::string word = arg.substr(begin, end - begin);
      std::erase_if(word, [](char c) { return c == '"' || c == '\''; });
      out.push_back(std::move(word));
      at = end;
    }
  }
  return out;
}

// The value of hydra_pmi_proxy's option `name` ("--control-port") in a command line.
std::string option_value(const std::vector<std::string>& argv, std::string_view name) {
  const auto w = words(argv);
  for (std::size_t i = 0; i + 1 < w.size(); ++i) {
    if (w[i] == name) return w[i + 1];
  }
  return "";
}

// The host a remote proxy's launcher process names: the argument before the one that
// runs hydra_pmi_proxy (ssh -x HOST "/usr/bin/hydra_pmi_proxy" ...), when that is a
// host and not an option; "" otherwise (srun starts it on every node of its job).
std::string remote_host(const std::vector<std::string>& argv) {
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if (!names_proxy(argv[i])) continue;
    const std::string& before = argv[i - 1];
    return i >= 2 && !before.empty() && before[0] != '-' ? before : "";
  }
  return "";
}

// The ranks below `proxies`: their children with PMI_RANK, checked.
Result<HydraJob> ranks_below(const std::set<pid_t>& proxies, const std::vector<ProcessEntry>& processes,
                             const std::string& host, const std::string& who) {
  HydraJob job;
  std::map<std::uint32_t, const ProcessEntry*> by_rank;
  for (const auto& p : processes) {
    if (!proxies.count(p.parent) || !p.pmi_rank) continue;
    if (!p.pmi_size || *p.pmi_size == 0) {
      return Error{"rank process " + std::to_string(p.pid) + " of " + who + " has PMI_RANK but no PMI_SIZE"};
    }
    if (job.size == 0) job.size = *p.pmi_size;
    if (*p.pmi_size != job.size) {
      return Error{"the ranks of " + who + " disagree on PMI_SIZE (" + std::to_string(job.size) + " and " +
                   std::to_string(*p.pmi_size) + ")"};
    }
    if (*p.pmi_rank >= job.size) {
      return Error{"rank process " + std::to_string(p.pid) + " of " + who + " has PMI_RANK " +
                   std::to_string(*p.pmi_rank) + ", outside 0.." + std::to_string(job.size - 1)};
    }
    if (auto [it, fresh] = by_rank.emplace(*p.pmi_rank, &p); !fresh) {
      return Error{"processes " + std::to_string(it->second->pid) + " and " + std::to_string(p.pid) + " of " + who +
                   " both have PMI_RANK " + std::to_string(*p.pmi_rank)};
    }
  }
  for (const auto& [rank, p] : by_rank) {
    job.ranks.push_back({rank, host, p->executable.empty() ? (p->argv.empty() ? p->name : p->argv[0]) : p->executable,
                         p->pid});
  }
  return job;
}

}  // namespace

std::vector<ProcessEntry> list_processes() {
  std::vector<ProcessEntry> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    const auto pid = number(e->d_name);
    if (!pid || *pid == 0) continue;
    const std::string dir = "/proc/" + std::string(e->d_name);
    const std::string stat = read_all(dir + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos || close + 4 > stat.size()) continue;  // gone meanwhile
    ProcessEntry p;
    p.pid = static_cast<pid_t>(*pid);
    p.parent = static_cast<pid_t>(std::strtol(stat.c_str() + close + 4, nullptr, 10));  // ") S PPID"
    p.name = read_all(dir + "/comm");
    if (!p.name.empty() && p.name.back() == '\n') p.name.pop_back();
    p.argv = fields(read_all(dir + "/cmdline"));
    out.push_back(std::move(p));
  }
  closedir(proc);
  std::set<pid_t> proxies;
  for (const auto& p : out) {
    if (p.name == kProxy) proxies.insert(p.pid);
  }
  for (auto& p : out) {
    if (!proxies.count(p.parent)) continue;
    const std::string dir = "/proc/" + std::to_string(p.pid);
    char exe[4096] = {};
    const ssize_t n = readlink((dir + "/exe").c_str(), exe, sizeof exe - 1);
    if (n > 0) p.executable.assign(exe, static_cast<std::size_t>(n));
    for (const auto& entry : fields(read_all(dir + "/environ"))) {
      const std::string_view v(entry);
      if (v.starts_with("PMI_RANK=")) p.pmi_rank = number(v.substr(9));
      if (v.starts_with("PMI_SIZE=")) p.pmi_size = number(v.substr(9));
    }
  }
  return out;
}

bool leads_hydra_proxies(pid_t launcher, const std::vector<ProcessEntry>& processes) {
  return std::any_of(processes.begin(), processes.end(), [&](const ProcessEntry& p) {
    return p.parent == launcher && (p.name == kProxy || std::any_of(p.argv.begin(), p.argv.end(), names_proxy));
  });
}

Result<HydraJob> hydra_ranks(pid_t launcher, const std::vector<ProcessEntry>& processes, const std::string& this_host) {
  std::set<pid_t> local_proxies;
  std::vector<RemoteProxy> remote;
  for (const auto& p : processes) {
    if (p.parent != launcher) continue;
    if (p.name == kProxy) {
      local_proxies.insert(p.pid);
    } else if (std::any_of(p.argv.begin(), p.argv.end(), names_proxy)) {
      remote.push_back({p.pid, remote_host(p.argv), p.name, option_value(p.argv, "--control-port"),
                        option_value(p.argv, "--proxy-id")});
    }
  }
  const std::string who = "process " + std::to_string(launcher);
  if (local_proxies.empty() && remote.empty()) {
    return Error{who + " has no hydra_pmi_proxy child", ErrorKind::invalid_input};
  }
  auto job = ranks_below(local_proxies, processes, this_host, who);
  if (!job) return job;
  if (job->ranks.empty() && !local_proxies.empty()) {
    return Error{who + "'s hydra_pmi_proxy has no rank with PMI_RANK yet: the ranks have not started; try again in "
                       "a moment, or start the job with --mpirun-cmd, which waits for its ranks"};
  }
  job->remote = std::move(remote);
  return job;
}

Result<HydraJob> proxy_ranks(const std::string& control_port, const std::string& proxy_id,
                             const std::vector<ProcessEntry>& processes, const std::string& host) {
  std::set<pid_t> proxies;
  for (const auto& p : processes) {
    if (p.name == kProxy && option_value(p.argv, "--control-port") == control_port &&
        option_value(p.argv, "--proxy-id") == proxy_id) {
      proxies.insert(p.pid);
    }
  }
  const std::string who = "hydra_pmi_proxy " + proxy_id + " of " + control_port + " on " + host;
  if (proxies.empty()) return Error{"no " + who, ErrorKind::invalid_input};
  return ranks_below(proxies, processes, host, who);
}

}  // namespace canopy::stack
