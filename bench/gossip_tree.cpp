#include "gossip_tree.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <set>
#include <sstream>

#include "process_guard.h"

namespace canopy::gossip_bench {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

double mean(const std::vector<double>& v) {
  return v.empty() ? NAN : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

std::string ranks_text(const std::vector<Rank>& ranks) {
  std::string s;
  for (Rank r : ranks) s += (s.empty() ? "" : " ") + std::to_string(r);
  return s;
}

std::string config_name(GossipSchedule schedule, std::chrono::milliseconds period) {
  if (schedule == GossipSchedule::off) return "off";
  return std::string(to_string(schedule)) + ":" + std::to_string(period.count());
}

const std::string& self_directory() {
  static const std::string directory = fs::canonical("/proc/self/exe").parent_path().string();
  return directory;
}

std::unique_ptr<Network> launch_tree(const TreeSettings& s, const Topology& topology) {
  fs::create_directories(s.out);
  if (s.log) {
    fs::create_directories(s.out + "/logs");
    setenv("CANOPY_LOG_DIR", (s.out + "/logs").c_str(), 1);
    setenv("CANOPY_LOG_LEVEL", "info", 1);
  } else {
    unsetenv("CANOPY_LOG_DIR");
  }
  LaunchOptions launch;
  launch.topology = topology;
  launch.backend_argv = {self_directory() + "/canopy-gossip-backend", "--out", s.out};
  launch.commnode_exe = self_directory() + "/canopy-commnode";
  launch.startup_timeout = 60s;
  auto& fault = launch.fault_tolerance;
  if (s.suspect.count() > 0) fault.suspect = s.suspect;
  if (s.lost.count() > 0) fault.lost = s.lost;
  fault.gossip.schedule = s.schedule;
  fault.gossip.period = s.period;
  fault.gossip.max_hangup = s.max_hangup;
  fault.gossip.ping_timeout = s.ping_timeout;
  auto launched = Network::launch(std::move(launch));
  if (!launched) throw Failure("launch of " + s.topology + ": " + launched.error());
  return std::move(*launched);
}

void shut_down(Network& network) {
  if (auto r = network.shutdown(); !r) {
    std::fprintf(stderr, "canopy-gossip-detect-bench: shutdown: %s\n", r.error().c_str());
  }
}

std::map<Rank, pid_t> tree_pids() {
  std::map<Rank, pid_t> out;
  for (pid_t pid : testing::ProcessGuard::descendants()) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ");
    std::string env((std::istreambuf_iterator<char>(in)), {});
    std::istringstream vars(env);
    for (std::string var; std::getline(vars, var, '\0');) {
      if (var.rfind("CANOPY_RANK=", 0) == 0) out[static_cast<Rank>(std::strtoul(var.c_str() + 12, nullptr, 10))] = pid;
    }
  }
  return out;
}

std::vector<Rank> leaf_commnodes(const Topology& topology) {
  std::set<Rank> leaves;
  for (Rank b : topology.backends()) leaves.insert(*topology.at(b).parent);
  return {leaves.begin(), leaves.end()};
}

void FrontEvents::drain(Network& network) {
  while (auto e = network.next_event(0ms)) {
    FrontEvent f;
    f.kind = std::string(to_string(e->kind));
    f.rank = e->rank;
    f.time_us = us_of(e->time);
    f.view = e->view.id;
    f.left = e->left;
    f.detector = e->detector;
    f.silent_ms = e->silent.count();
    events_.push_back(std::move(f));
  }
}

void FrontEvents::write(const std::string& path) const {
  std::ofstream out(path);
  out << "kind,rank,time_us,view,left,detector,silent_ms\n";
  for (const auto& e : events_) {
    out << e.kind << ',' << e.rank << ',' << e.time_us << ',' << e.view << ',' << ranks_text(e.left) << ','
        << e.detector << ',' << e.silent_ms << '\n';
  }
}

std::vector<BackendEvent> read_backend_events(const std::string& dir, const std::vector<Rank>& backends) {
  std::vector<BackendEvent> out;
  for (Rank b : backends) {
    std::ifstream in(dir + "/events-" + std::to_string(b) + ".csv");
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      auto c = split(line, ',');
      if (c.size() < 7) continue;  // a line still being written
      auto rank = [](const std::string& t) { return static_cast<Rank>(std::strtoul(t.c_str(), nullptr, 10)); };
      out.push_back({rank(c[0]), c[1], rank(c[2]), std::strtoll(c[3].c_str(), nullptr, 10),
                     std::strtoull(c[4].c_str(), nullptr, 10), std::strtoll(c[6].c_str(), nullptr, 10)});
    }
  }
  return out;
}

namespace {

// se.sum_exec_runtime of one thread (ms, to the ns), from /proc/PID/task/TID/sched
// (CONFIG_SCHED_DEBUG); NaN without it.
double thread_runtime_ms(const fs::path& sched) {
  std::ifstream in(sched);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("se.sum_exec_runtime", 0) != 0) continue;
    const auto colon = line.find(':');
    return colon == std::string::npos ? NAN : std::strtod(line.c_str() + colon + 1, nullptr);
  }
  return NAN;
}

// utime + stime from /proc/PID/stat, in clock ticks (10 ms): too coarse for a tree of
// mostly idle processes, each rounded down; the fallback only.
double stat_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return NAN;
  const auto close = line.rfind(')');
  if (close == std::string::npos) return NAN;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 13 && rest >> field; ++i) {  // fields 3 (state) to 13, then utime, stime
  }
  if (!(rest >> utime >> stime)) return NAN;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

double cpu_seconds(pid_t pid) {
  const fs::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  double ms = 0;
  bool any = false;
  for (const auto& task : fs::directory_iterator(tasks, ec)) {
    const double t = thread_runtime_ms(task.path() / "sched");
    if (std::isnan(t)) return stat_seconds(pid);
    ms += t;
    any = true;
  }
  return any ? ms / 1000.0 : stat_seconds(pid);
}

std::map<pid_t, std::uint64_t> tcp_bytes_sent(const std::vector<pid_t>& pids) {
  const std::set<pid_t> wanted(pids.begin(), pids.end());
  std::map<pid_t, std::uint64_t> out;
  std::FILE* ss = popen("ss -tinpH state established 2>/dev/null", "r");
  if (!ss) throw Failure("cannot run ss (iproute2) to count the bytes sent");
  // Each socket is a line naming its process (users:(("name",pid=N,fd=F))), then an
  // indented line of TCP_INFO (..., bytes_sent:B, ...; absent while nothing was sent).
  pid_t owner = -1;
  char buffer[8192];
  std::string line;
  while (std::fgets(buffer, sizeof buffer, ss)) {
    line = buffer;
    if (!line.empty() && line[0] != '\t' && line[0] != ' ') {
      owner = -1;
      for (auto at = line.find("pid="); at != std::string::npos; at = line.find("pid=", at + 4)) {
        const auto pid = static_cast<pid_t>(std::strtol(line.c_str() + at + 4, nullptr, 10));
        if (wanted.count(pid)) {
          owner = pid;
          break;
        }
      }
      continue;
    }
    if (owner < 0) continue;
    if (auto at = line.find(" bytes_sent:"); at != std::string::npos) {
      out[owner] += std::strtoull(line.c_str() + at + 12, nullptr, 10);
    }
  }
  const int status = pclose(ss);
  if (status != 0) throw Failure("ss -tinpH failed (status " + std::to_string(status) + ")");
  return out;
}

Args::Args(int argc, char** argv, const std::vector<std::string>& flags) {
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0) throw BadArgument("unexpected argument " + a);
    if (std::find(flags.begin(), flags.end(), a) != flags.end()) {
      values_[a] = "1";
    } else if (i + 1 < argc) {
      values_[a] = argv[++i];
    } else {
      throw BadArgument(a + " needs a value");
    }
    read_[a] = false;
  }
}

std::string Args::text(const std::string& name, const std::string& fallback) {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  read_[name] = true;
  return it->second;
}

long Args::number(const std::string& name, long fallback, long low, long high) {
  const std::string t = text(name, "");
  if (t.empty()) return fallback;
  char* end = nullptr;
  const long v = std::strtol(t.c_str(), &end, 10);
  if (*end || v < low || v > high) {
    throw BadArgument(name + " " + t + ": expected a whole number from " + std::to_string(low) + " to " +
                      std::to_string(high));
  }
  return v;
}

std::chrono::milliseconds Args::ms(const std::string& name, std::chrono::milliseconds fallback) {
  return std::chrono::milliseconds(number(name, fallback.count(), 0, 3600000));
}

GossipSchedule Args::schedule(const std::string& name, GossipSchedule fallback) {
  const std::string t = text(name, "");
  if (t.empty()) return fallback;
  auto s = gossip_schedule_from(t);
  if (!s) throw BadArgument(name + " " + t + ": expected off, random, rr, brr or dbrr");
  return *s;
}

bool Args::flag(const std::string& name) { return !text(name, "").empty(); }

void Args::finish() const {
  for (const auto& [name, read] : read_) {
    if (!read) throw BadArgument("unknown option " + name);
  }
}

void print_row(const std::string& benchmark, const std::string& config, const std::string& topology,
               const std::string& metric, double value, const char* unit) {
  std::printf("%s,%s,%s,%s,%.3f,%s\n", benchmark.c_str(), config.c_str(), topology.c_str(), metric.c_str(), value,
              unit);
  std::fflush(stdout);
}

}  // namespace canopy::gossip_bench
