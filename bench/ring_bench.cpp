// canopy-ring-bench: the ring-token benchmark of paper 001 §V-B on Canopy
// (docs/benchmarks.md, "Ring of tokens"). One run = one tree, one failure scenario:
//
//   canopy-ring-bench --out DIR [--scenario none|one|pairs|half|most] [--topology SPEC]
//                     [--tokens T] [--duration-ms MS] [--ring view|all] [--pings P]
//                     [--log] [--timeout-s S]
//
//   none   no failure (the fault-free ring)
//   one    back-ends killed one at a time, evenly spaced through the run, until 2 remain
//   pairs  two at a time (from two different commnodes), evenly spaced, until 2 remain
//   half   n/2 at once, half-way through
//   most   n-2 at once, half-way through (the paper's other test)
//
// Rank 0 (never killed) injects T tokens evenly over the duration; every back-end
// forwards each token to the next member of its view (canopy-ring-backend). Victims
// are taken round-robin over the leaf commnodes, so that consecutive kills (and the
// two of a pair) have different parents. Every kill is SIGKILL, timed with
// CLOCK_REALTIME just before the signal; all processes run on this host, so every
// clock is the same.
//
// After the run it computes, for every view and every back-end that got it, the
// notification latency L = (when the back-end applied the first view without f)
// - (when f was killed), for every f that left in that view, and checks it against
// the paper's bound L <= alpha0 + gamma * D:
//   gamma   per-hop latency of an isolated message: rank 0's "cold" ping-pongs with
//           its nearest back-end (one every 3 ms) before the tokens start, median
//           round trip / 2 / tree hops one way; same run. The "hot" ones (back to
//           back) and a fit over the near and far back-end are printed beside it.
//   alpha0  the time the failed back-end's parent (the detector) takes to detect the
//           failure, i.e. to declare it: with --log (every process logs at info
//           level into DIR/logs) its line "membership: reporting the failure of
//           back-end F" minus the kill; without, the front-end's failure event minus
//           the kill minus gamma * the detector's depth. (The parent sees the link
//           close first, "child F: ready -> gone", and then waits up to 300 ms for
//           the exit status before it reports; both are printed.)
//           alpha0 is the median over the run's kills; alpha0(f) that of one kill.
//   D       hops the view travels from the detector: up to the front-end (the
//           detector's depth) and down to the back-end (its depth): at most
//           2 * height - 1.
// Two checks per latency: the paper's, with the run's constants, L <= alpha0 +
// gamma * D; and per failure, L <= alpha0(f) + gamma * D, which leaves the detection
// of that failure as it happened and asks whether the notification then took no more
// than D hops.
// Writes to DIR (besides what the back-ends write there): kills.csv, frontend.csv,
// detect.csv, latency.csv, summary.csv; prints summary rows
// (benchmark,scenario,metric,value,unit) on stdout. Checks at the end that every
// process it started is gone (killing and reporting any that is not).
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "canopy/frontend.h"
#include "process_guard.h"
#include "ring_protocol.h"

#if __has_include("canopy/view.h")
#define CANOPY_RING_HAS_VIEW 1
#else
#define CANOPY_RING_HAS_VIEW 0
#endif

namespace {

using canopy::Rank;
using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;
namespace ring = canopy::ring;
using canopy::bench::quantile;
using canopy::bench::realtime_us;
using canopy::bench::us_of;
using canopy::bench::split;
namespace fs = std::filesystem;

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

double median(const std::vector<double>& v) { return quantile(v, 0.5); }

std::vector<Rank> ranks_of(const std::string& text) {
  std::vector<Rank> out;
  std::istringstream in(text);
  for (Rank r; in >> r;) out.push_back(r);
  return out;
}

std::string self_directory() { return fs::canonical("/proc/self/exe").parent_path().string(); }

struct Options {
  std::string out;
  std::string scenario = "one";
  std::string topology = "b:4^2";
  std::uint64_t tokens = 2000;
  int duration_ms = 4000;
  std::string ring = CANOPY_RING_HAS_VIEW ? "view" : "all";
  int pings = 200;
  bool log = false;
  int timeout_s = 60;
};

// ---- the tree ----

class Tree {
 public:
  explicit Tree(const canopy::Topology& t) : t_(t) {}
  int depth(Rank r) const {
    int d = 0;
    for (auto p = t_.at(r).parent; p; p = t_.at(*p).parent) ++d;
    return d;
  }
  Rank parent(Rank r) const { return *t_.at(r).parent; }
  int distance(Rank a, Rank b) const {
    std::vector<Rank> up_a{a};
    for (auto p = t_.at(a).parent; p; p = t_.at(*p).parent) up_a.push_back(*p);
    int steps_b = 0;
    for (Rank x = b;; x = *t_.at(x).parent, ++steps_b) {
      auto it = std::find(up_a.begin(), up_a.end(), x);
      if (it != up_a.end()) return static_cast<int>(it - up_a.begin()) + steps_b;
    }
  }
  // Hops a view travels to `survivor` after the failure of `failed` was noticed by
  // its parent: up to the root, then down.
  int notification_hops(Rank failed, Rank survivor) const { return depth(parent(failed)) + depth(survivor); }

 private:
  const canopy::Topology& t_;
};

// Victims: round-robin over the leaf commnodes (the back-ends' parents), from the
// last one, each time its highest rank not yet taken; rank 0 never.
std::vector<Rank> victim_order(const canopy::Topology& t) {
  std::map<Rank, std::vector<Rank>> by_parent;
  std::vector<Rank> parents;
  for (Rank b : t.backends()) {
    if (b == 0) continue;
    Rank p = *t.at(b).parent;
    if (!by_parent.count(p)) parents.push_back(p);
    by_parent[p].push_back(b);
  }
  std::reverse(parents.begin(), parents.end());
  std::vector<Rank> order;
  for (bool more = true; more;) {
    more = false;
    for (Rank p : parents) {
      auto& list = by_parent[p];
      if (list.empty()) continue;
      order.push_back(list.back());
      list.pop_back();
      more = true;
    }
  }
  return order;
}

struct KillGroup {
  double at_ms;  // after the first token
  std::vector<Rank> ranks;
};

std::vector<KillGroup> plan(const std::string& scenario, const canopy::Topology& t, int duration_ms) {
  const auto order = victim_order(t);
  const std::size_t n = t.backends().size();
  std::vector<std::vector<Rank>> groups;
  if (scenario == "one") {
    for (std::size_t i = 0; i + 2 < n; ++i) groups.push_back({order[i]});
  } else if (scenario == "pairs") {
    for (std::size_t i = 0; i + 1 < order.size() && i + 3 < n; i += 2) groups.push_back({order[i], order[i + 1]});
  } else if (scenario == "half") {
    groups.push_back(std::vector<Rank>(order.begin(), order.begin() + n / 2));
  } else if (scenario == "most") {
    groups.push_back(std::vector<Rank>(order.begin(), order.begin() + (n - 2)));
  } else if (scenario != "none") {
    throw Failure("unknown scenario " + scenario);
  }
  std::vector<KillGroup> out;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    out.push_back({duration_ms * double(g + 1) / double(groups.size() + 1), groups[g]});
  }
  return out;
}

std::map<Rank, pid_t> backend_pids() {
  std::map<Rank, pid_t> out;
  for (pid_t pid : canopy::testing::ProcessGuard::descendants()) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/environ");
    std::string env((std::istreambuf_iterator<char>(in)), {});
    std::istringstream vars(env);
    bool backend = false;
    long rank = -1;
    for (std::string var; std::getline(vars, var, '\0');) {
      if (var.rfind("CANOPY_RANK=", 0) == 0) rank = std::strtol(var.c_str() + 12, nullptr, 10);
      if (var.rfind("CANOPY_PARENT=", 0) == 0) backend = true;
    }
    std::ifstream cmdline("/proc/" + std::to_string(pid) + "/cmdline");
    std::string argv0;
    std::getline(cmdline, argv0, '\0');
    if (backend && rank >= 0 && argv0.find("canopy-ring-backend") != std::string::npos) {
      out[static_cast<Rank>(rank)] = pid;
    }
  }
  return out;
}

// ---- the run ----

struct Kill {
  std::size_t group;
  Rank rank;
  pid_t pid;
  std::int64_t at_us;
};

struct FrontEvent {
  std::string kind;
  Rank rank = 0;
  std::int64_t time_us = 0;
  std::uint64_t view = 0;
  std::vector<Rank> left;
  std::int64_t stabilise_us = 0;
};

struct RunRecord {
  std::vector<Kill> kills;
  std::vector<FrontEvent> events;
  std::int64_t start_us = 0;
  std::int64_t sent = 0, back = 0;
  std::size_t stream_errors = 0;
  std::string first_stream_error;
  bool finished = false;
  bool views_settled = true;
};

void print_row(const Options& o, const std::string& metric, double value, const char* unit) {
  std::printf("ring,%s,%s,%.3f,%s\n", o.scenario.c_str(), metric.c_str(), value, unit);
  std::fflush(stdout);
}

RunRecord run(const Options& o, const canopy::Topology& topology, const Tree& tree) {
  const auto backends = topology.backends();
  const std::size_t n = backends.size();
  if (n < 3 || backends.front() != 0) throw Failure("the ring needs back-ends 0..n-1, n >= 3");

  // Ping targets: rank 0's nearest and farthest back-ends.
  Rank near = backends[1], far = backends[1];
  for (Rank b : backends) {
    if (b == 0) continue;
    if (tree.distance(0, b) < tree.distance(0, near)) near = b;
    if (tree.distance(0, b) > tree.distance(0, far)) far = b;
  }
  const double rate = o.duration_ms > 0 ? o.tokens * 1000.0 / o.duration_ms : 0;
  char rate_text[32];
  std::snprintf(rate_text, sizeof rate_text, "%.3f", rate);

  fs::create_directories(o.out);
  if (o.log) {
    fs::create_directories(o.out + "/logs");
    setenv("CANOPY_LOG_DIR", (o.out + "/logs").c_str(), 1);
    setenv("CANOPY_LOG_LEVEL", "info", 1);
  }
  canopy::LaunchOptions launch;
  launch.topology = topology;
  launch.backend_argv = {self_directory() + "/canopy-ring-backend",
                         "--out", o.out,
                         "--backends", std::to_string(n),
                         "--ring", o.ring,
                         "--tokens", std::to_string(o.tokens),
                         "--rate", rate_text,
                         "--pings", std::to_string(o.pings),
                         "--near", std::to_string(near) + ":" + std::to_string(tree.distance(0, near)),
                         "--far", std::to_string(far) + ":" + std::to_string(tree.distance(0, far))};
  launch.commnode_exe = self_directory() + "/canopy-commnode";
  launch.startup_timeout = 30s;
  auto launched = canopy::Network::launch(std::move(launch));
  if (!launched) throw Failure("launch: " + launched.error());
  auto& net = **launched;

  auto stream = net.create_stream(
      {.backends = {0}, .upstream_filter = "concat", .sync = canopy::SyncMode::dont_wait});
  if (!stream) throw Failure("stream: " + stream.error());
  // The stream the back-ends send_to each other on (nothing goes up it).
  auto p2p = net.create_stream({.upstream_filter = "concat", .sync = canopy::SyncMode::dont_wait});
  if (!p2p) throw Failure("stream: " + p2p.error());
  const auto pids = backend_pids();
  if (pids.size() != n) throw Failure("found " + std::to_string(pids.size()) + " of " + std::to_string(n) + " back-ends");

  const auto groups = plan(o.scenario, topology, o.duration_ms);
  std::set<Rank> killed;
  RunRecord rec;
  auto record_event = [&](const canopy::Event& e) {
    FrontEvent f;
    f.kind = std::string(canopy::to_string(e.kind));
    f.rank = e.rank;
    f.time_us = us_of(e.time);
#if CANOPY_RING_HAS_VIEW
    f.view = e.view.id;
    f.left = e.left;
    f.stabilise_us = e.stabilise.count();
#endif
    rec.events.push_back(std::move(f));
  };
  // Everything the front-end has for us: events, and rank 0's messages.
  std::optional<Steady::time_point> started;
  const int fds[2] = {net.event_fd(), net.events_fd()};
  auto drain = [&] {
    while (ring::readable(fds[1])) {
      auto e = net.next_event(0ms);
      if (!e) break;
      record_event(*e);
    }
    while (ring::readable(fds[0])) {
      auto in = net.receive(0ms);
      if (!in) {
        if (in.error_kind() == canopy::ErrorKind::stopped) throw Failure("the network stopped: " + in.error());
        if (rec.stream_errors++ == 0) rec.first_stream_error = in.error();
        continue;
      }
      if (!*in) break;
      const auto& pk = (*in)->packet;
      if (pk.size() != 1 || !std::holds_alternative<std::vector<std::int64_t>>(pk[0])) continue;
      const auto& values = std::get<std::vector<std::int64_t>>(pk[0]);
      if (pk.tag() == ring::kStarted) {
        started = Steady::now();
        rec.start_us = values.at(0);
      } else if (pk.tag() == ring::kDone) {
        rec.sent = values.at(0);
        rec.back = values.at(1);
        rec.finished = true;
      }
    }
  };

  if (auto r = net.send_to(*stream, 0, canopy::Packet{ring::kStart, {std::uint32_t{*p2p}}}); !r) throw Failure("start: " + r.error());
  const auto deadline = Steady::now() + std::chrono::seconds(o.timeout_s);
  std::size_t next_group = 0;
  while (!(rec.finished && next_group == groups.size())) {
    if (Steady::now() > deadline) {
      std::fprintf(stderr, "canopy-ring-bench: %s: no end after %d s (rank 0 %s, %zu of %zu kill groups done)\n",
                   o.scenario.c_str(), o.timeout_s, rec.finished ? "done" : "not done", next_group, groups.size());
      break;
    }
    drain();
    auto wait = std::chrono::nanoseconds(20ms);
    if (started && next_group < groups.size()) {
      const auto due = *started + std::chrono::duration_cast<Steady::duration>(
                                      std::chrono::duration<double, std::milli>(groups[next_group].at_ms));
      const auto now = Steady::now();
      if (now >= due) {
        for (Rank r : groups[next_group].ranks) {
          const std::int64_t at = realtime_us();
          ::kill(pids.at(r), SIGKILL);
          rec.kills.push_back({next_group, r, pids.at(r), at});
          killed.insert(r);
        }
        ++next_group;
        continue;
      }
      wait = std::min(wait, std::chrono::nanoseconds(due - now));
    }
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    timespec ts{0, static_cast<long>(wait.count())};
    ppoll(p, 2, &ts, nullptr);
  }

#if CANOPY_RING_HAS_VIEW
  // Until the front-end's view has none of the killed back-ends (views go on after
  // rank 0 is done), then a little longer so that every back-end has written them.
  if (!killed.empty()) {
    const auto until = Steady::now() + 10s;
    auto settled = [&] {
      auto v = net.view();
      return std::none_of(killed.begin(), killed.end(), [&](Rank r) { return v.contains(r); }) && !rec.events.empty() &&
             std::any_of(rec.events.begin(), rec.events.end(),
                         [&](const FrontEvent& e) { return e.kind == "view" && e.view == v.id; });
    };
    while (!settled() && Steady::now() < until) {
      drain();
      std::this_thread::sleep_for(5ms);
    }
    rec.views_settled = settled();
    if (!rec.views_settled) std::fprintf(stderr, "canopy-ring-bench: %s: views did not settle in 10 s\n", o.scenario.c_str());
  }
#endif
  const auto linger = Steady::now() + 400ms;  // back-ends write their views within 200 ms
  while (Steady::now() < linger) {
    drain();
    std::this_thread::sleep_for(5ms);
  }
  if (auto r = net.shutdown(); !r) std::fprintf(stderr, "canopy-ring-bench: shutdown: %s\n", r.error().c_str());
  return rec;
}

// ---- the analysis ----

struct ViewSeen {
  std::uint64_t view;
  std::int64_t event_us;
  std::vector<Rank> left;
};

// What the parents logged about their children's failures (--log):
//   "2026-11-23T13:48:09.843299 W commnode-1000004 child 15: ready -> gone (connection closed by peer)"
//   "2026-11-23T13:48:09.844424 I commnode-1000004 membership: reporting the failure of back-end 15 on ..."
// The first is the detection (the link closed), the second the report going up.
// And the front-end's lines "membership: back-end 15 failed (...)" (the report
// reached it) and "membership: view 3: ..." (it sent view 3 down).
struct Logged {
  std::map<Rank, std::int64_t> gone, reported, root_learned;
  std::map<std::uint64_t, std::int64_t> view_sent;
};

std::int64_t log_time_us(const std::string& line) {
  std::tm tm{};
  long micro = 0;
  if (std::sscanf(line.c_str(), "%d-%d-%dT%d:%d:%d.%ld", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                  &tm.tm_sec, &micro) != 7) {
    return -1;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  tm.tm_isdst = -1;
  return std::int64_t{mktime(&tm)} * 1000000 + micro;  // spdlog writes local time
}

Logged detections_from_logs(const std::string& dir) {
  Logged out;
  if (!fs::exists(dir)) return out;
  auto note = [](std::map<Rank, std::int64_t>& into, Rank rank, std::int64_t us) {
    auto it = into.find(rank);
    if (us >= 0 && (it == into.end() || us < it->second)) into[rank] = us;
  };
  const std::string report = "membership: reporting the failure of back-end ";
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("backend-", 0) == 0) continue;  // back-ends have no children
    const bool root = entry.path().filename().string().rfind("frontend-", 0) == 0;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      if (root) {
        const std::string failed = "membership: back-end ", view = "membership: view ";
        if (auto at = line.find(failed); at != std::string::npos && line.find(" failed (", at) != std::string::npos) {
          note(out.root_learned, static_cast<Rank>(std::strtoul(line.c_str() + at + failed.size(), nullptr, 10)),
               log_time_us(line));
        } else if (auto at = line.find(view); at != std::string::npos) {
          const auto id = std::strtoull(line.c_str() + at + view.size(), nullptr, 10);
          if (!out.view_sent.count(id)) out.view_sent[id] = log_time_us(line);
        }
      }
      if (auto at = line.find(report); at != std::string::npos) {
        note(out.reported, static_cast<Rank>(std::strtoul(line.c_str() + at + report.size(), nullptr, 10)),
             log_time_us(line));
        continue;
      }
      auto child = line.find(" child ");
      if (child == std::string::npos || line.find(" -> gone", child) == std::string::npos) continue;
      char* end = nullptr;
      const auto rank = std::strtoul(line.c_str() + child + 7, &end, 10);
      if (end && *end == ':') note(out.gone, static_cast<Rank>(rank), log_time_us(line));
    }
  }
  return out;
}

struct Summary {
  std::size_t latencies = 0, meet = 0, meet_f = 0, missing = 0;
};

void analyse(const Options& o, const canopy::Topology& topology, const Tree& tree, const RunRecord& rec) {
  const auto backends = topology.backends();
  const std::string dir = o.out;
  print_row(o, "backends", static_cast<double>(backends.size()), "count");
  print_row(o, "tokens_planned", static_cast<double>(o.tokens), "count");
  print_row(o, "duration", o.duration_ms, "ms");
  print_row(o, "height", static_cast<double>(topology.depth()), "hops");

  // Tokens.
  std::vector<double> rtts;
  std::size_t lost = 0;
  {
    std::ifstream in(dir + "/tokens.csv");
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      auto c = split(line, ',');
      if (c.size() < 6) continue;
      const double rtt = std::strtod(c[3].c_str(), nullptr);
      if (rtt < 0) {
        ++lost;
      } else {
        rtts.push_back(rtt);
      }
    }
  }
  print_row(o, "tokens_sent", static_cast<double>(rec.sent), "count");
  print_row(o, "tokens_back", static_cast<double>(rtts.size()), "count");
  print_row(o, "tokens_lost", static_cast<double>(lost), "count");
  print_row(o, "token_rtt_median", median(rtts), "us");
  print_row(o, "token_rtt_p10", quantile(rtts, 0.1), "us");
  print_row(o, "token_rtt_p90", quantile(rtts, 0.9), "us");
  print_row(o, "point_to_point_dropped", static_cast<double>(rec.stream_errors), "count");
  if (!rec.first_stream_error.empty()) std::fprintf(stderr, "first dropped: %s\n", rec.first_stream_error.c_str());

  // gamma from the pings: per kind (cold: one every few ms, as a notification finds
  // the processes; hot: back to back), one-way tree hops -> round trips.
  std::map<std::string, std::map<int, std::vector<double>>> pings;
  {
    std::ifstream in(dir + "/pings.csv");
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      auto c = split(line, ',');
      if (c.size() == 4) pings[c[2]][std::atoi(c[1].c_str())].push_back(std::strtod(c[3].c_str(), nullptr));
    }
  }
  std::map<std::string, double> per_hop, per_hop_p90;
  for (const auto& [kind, by_hops] : pings) {
    const auto& [hops, near] = *by_hops.begin();
    per_hop[kind] = median(near) / (2.0 * hops);
    per_hop_p90[kind] = quantile(near, 0.9) / (2.0 * hops);
    print_row(o, "ping_" + kind + "_rtt_median_" + std::to_string(hops) + "hops", median(near), "us");
    double fit = NAN;
    if (by_hops.size() > 1) {
      const auto& [far_hops, far] = *by_hops.rbegin();
      print_row(o, "ping_" + kind + "_rtt_median_" + std::to_string(far_hops) + "hops", median(far), "us");
      fit = (median(far) - median(near)) / (2.0 * (far_hops - hops));
    }
    print_row(o, "gamma_" + kind, per_hop[kind], "us");
    print_row(o, "gamma_" + kind + "_fit", fit, "us");
  }
  const double gamma = per_hop.count("cold") ? per_hop["cold"] : NAN;
  const double gamma_p90 = per_hop_p90.count("cold") ? per_hop_p90["cold"] : NAN;
  print_row(o, "gamma", gamma, "us");
  print_row(o, "gamma_p90", gamma_p90, "us");

  // Kills, detections (alpha0).
  std::map<Rank, std::int64_t> kill_us;
  for (const auto& k : rec.kills) kill_us[k.rank] = k.at_us;
  {
    std::ofstream out(dir + "/kills.csv");
    out << "group,rank,pid,kill_us,detector,detector_depth\n";
    for (const auto& k : rec.kills) {
      out << k.group << ',' << k.rank << ',' << k.pid << ',' << k.at_us << ',' << tree.parent(k.rank) << ','
          << tree.depth(tree.parent(k.rank)) << '\n';
    }
  }
  {
    std::ofstream out(dir + "/frontend.csv");
    out << "kind,rank,time_us,view,left,stabilise_us\n";
    for (const auto& e : rec.events) {
      std::string left;
      for (Rank r : e.left) left += (left.empty() ? "" : " ") + std::to_string(r);
      out << e.kind << ',' << e.rank << ',' << e.time_us << ',' << e.view << ',' << left << ',' << e.stabilise_us
          << '\n';
    }
  }
  std::map<Rank, std::int64_t> fe_failure;
  for (const auto& e : rec.events) {
    if (e.kind == "failure" && !fe_failure.count(e.rank)) fe_failure[e.rank] = e.time_us;
  }
  const auto logged = detections_from_logs(dir + "/logs");
  std::vector<double> alpha_log, alpha_fe, alpha_gone, gone_to_report;
  std::map<Rank, double> alpha_of;  // per failed back-end: from its parent's log, else from the front-end
  {
    std::ofstream out(dir + "/detect.csv");
    out << "rank,kill_us,detector,detector_depth,gone_us,reported_us,frontend_failure_us,alpha_log_us,"
           "alpha_frontend_us\n";
    auto at = [](const std::map<Rank, std::int64_t>& m, Rank r) { return m.count(r) ? m.at(r) : -1; };
    for (const auto& k : rec.kills) {
      const int det_depth = tree.depth(tree.parent(k.rank));
      double a_log = NAN, a_fe = NAN;
      if (logged.reported.count(k.rank)) a_log = static_cast<double>(logged.reported.at(k.rank) - k.at_us);
      if (logged.gone.count(k.rank)) {
        alpha_gone.push_back(static_cast<double>(logged.gone.at(k.rank) - k.at_us));
        if (logged.reported.count(k.rank)) {
          gone_to_report.push_back(static_cast<double>(logged.reported.at(k.rank) - logged.gone.at(k.rank)));
        }
      }
      if (fe_failure.count(k.rank)) {
        a_fe = static_cast<double>(fe_failure.at(k.rank) - k.at_us) - gamma * det_depth;
      }
      if (!std::isnan(a_log)) alpha_log.push_back(a_log);
      if (!std::isnan(a_fe)) alpha_fe.push_back(a_fe);
      if (!std::isnan(a_log) || !std::isnan(a_fe)) alpha_of[k.rank] = std::isnan(a_log) ? a_fe : a_log;
      out << k.rank << ',' << k.at_us << ',' << tree.parent(k.rank) << ',' << det_depth << ','
          << at(logged.gone, k.rank) << ',' << at(logged.reported, k.rank) << ',' << at(fe_failure, k.rank) << ','
          << a_log << ',' << a_fe << '\n';
    }
  }
  if (rec.kills.empty()) return;
  std::vector<double> alphas;
  for (const auto& [rank, a] : alpha_of) alphas.push_back(a);
  print_row(o, "alpha0_from_logs", alpha_log.size() == rec.kills.size() ? 1 : 0, "bool");
  print_row(o, "alpha0_log_median", median(alpha_log), "us");
  print_row(o, "link_closed_median", median(alpha_gone), "us");
  print_row(o, "link_closed_to_report_median", median(gone_to_report), "us");
  print_row(o, "alpha0_frontend_median", median(alpha_fe), "us");
  const double alpha0 = median(alphas);
  print_row(o, "alpha0", alpha0, "us");
  print_row(o, "alpha0_max", alphas.empty() ? NAN : *std::max_element(alphas.begin(), alphas.end()), "us");
  print_row(o, "kills", static_cast<double>(rec.kills.size()), "count");
  print_row(o, "detections_logged", static_cast<double>(logged.reported.size()), "count");

  // Views at every back-end.
  std::map<Rank, std::vector<ViewSeen>> seen;
  for (Rank b : backends) {
    std::ifstream in(dir + "/views-" + std::to_string(b) + ".csv");
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      auto c = split(line, ',');
      if (c.size() < 7) continue;
      seen[b].push_back({std::strtoull(c[1].c_str(), nullptr, 10), std::strtoll(c[2].c_str(), nullptr, 10),
                         ranks_of(c[4])});
    }
  }
  // The views, from the front-end (stable views, with who left), in order.
  std::map<std::uint64_t, FrontEvent> views;
  for (const auto& e : rec.events) {
    if (e.kind == "view") views[e.view] = e;
  }
  std::vector<double> stabilise;
  for (const auto& [id, e] : views) stabilise.push_back(static_cast<double>(e.stabilise_us));
  print_row(o, "views", static_cast<double>(views.size()), "count");
  print_row(o, "stabilise_median", median(stabilise), "us");

  Summary s;
  std::vector<double> latencies;
  std::ofstream out(dir + "/latency.csv");
  out << "view,failed,survivor,kill_us,got_us,latency_us,D,bound_us,meets,alpha_f_us,bound_f_us,meets_f\n";
  std::set<Rank> gone;
  for (const auto& [id, e] : views) {
    for (Rank f : e.left) gone.insert(f);
    for (Rank d : backends) {
      if (gone.count(d)) continue;  // left in this view or before: not told
      // The first view at or after this one that d applied.
      const ViewSeen* got = nullptr;
      for (const auto& v : seen[d]) {
        if (v.view >= id) {
          got = &v;
          break;
        }
      }
      if (!got) {
        // Killed later, before it could learn of it, or a lost view.
        if (!kill_us.count(d)) {
          ++s.missing;
          std::fprintf(stderr, "canopy-ring-bench: %s: back-end %u never applied view %llu\n", o.scenario.c_str(), d,
                       static_cast<unsigned long long>(id));
        }
        continue;
      }
      for (Rank f : e.left) {
        if (!kill_us.count(f)) continue;
        const double latency = static_cast<double>(got->event_us - kill_us.at(f));
        const int D = tree.notification_hops(f, d);
        const double bound = alpha0 + gamma * D;
        const double alpha_f = alpha_of.count(f) ? alpha_of.at(f) : alpha0;
        const double bound_f = alpha_f + gamma * D;
        const bool meets = latency <= bound, meets_f = latency <= bound_f;
        ++s.latencies;
        s.meet += meets;
        s.meet_f += meets_f;
        latencies.push_back(latency);
        out << id << ',' << f << ',' << d << ',' << kill_us.at(f) << ',' << got->event_us << ',' << latency << ','
            << D << ',' << bound << ',' << (meets ? 1 : 0) << ',' << alpha_f << ',' << bound_f << ','
            << (meets_f ? 1 : 0) << '\n';
      }
    }
  }
  out.close();
  // What the notification took per hop once the detector had declared the failure,
  // and the gamma every latency would have needed to meet its per-failure bound.
  std::vector<double> notification_per_hop;
  double needed = 0;
  {
    std::ifstream in(dir + "/latency.csv");
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      auto c = split(line, ',');
      const double l = std::strtod(c[5].c_str(), nullptr), D = std::strtod(c[6].c_str(), nullptr);
      const double a = std::strtod(c[9].c_str(), nullptr);
      notification_per_hop.push_back((l - a) / D);
      needed = std::max(needed, (l - a) / D);
    }
  }
  print_row(o, "notification_per_hop_median", median(notification_per_hop), "us");
  print_row(o, "gamma_needed_by_all", needed, "us");
  print_row(o, "latencies", static_cast<double>(s.latencies), "count");
  print_row(o, "latency_median", median(latencies), "us");
  print_row(o, "latency_p90", quantile(latencies, 0.9), "us");
  print_row(o, "latency_max", latencies.empty() ? NAN : *std::max_element(latencies.begin(), latencies.end()), "us");
  print_row(o, "meet_bound", static_cast<double>(s.meet), "count");
  print_row(o, "violate_bound", static_cast<double>(s.latencies - s.meet), "count");
  print_row(o, "meet_bound_per_failure", static_cast<double>(s.meet_f), "count");
  print_row(o, "violate_bound_per_failure", static_cast<double>(s.latencies - s.meet_f), "count");
  print_row(o, "views_never_applied_by_survivors", static_cast<double>(s.missing), "count");
  print_row(o, "views_settled", rec.views_settled ? 1 : 0, "bool");

  // Where the time went, per kill (--log): kill -> the parent sees the link close ->
  // it reports (after the exit status) -> the front-end has the report -> it sends
  // the view that removes f -> the first and the last survivor apply it.
  if (logged.reported.empty()) return;
  std::map<Rank, std::uint64_t> view_of;
  for (const auto& [id, e] : views) {
    for (Rank f : e.left) view_of[f] = id;
  }
  std::map<std::uint64_t, std::pair<std::int64_t, std::int64_t>> applied;  // view -> first, last
  for (const auto& [b, list] : seen) {
    for (const auto& v : list) {
      auto [it, fresh] = applied.try_emplace(v.view, v.event_us, v.event_us);
      if (!fresh) {
        it->second.first = std::min(it->second.first, v.event_us);
        it->second.second = std::max(it->second.second, v.event_us);
      }
    }
  }
  const char* stages[] = {"kill_to_link_closed", "link_closed_to_report", "report_to_root", "root_to_view_sent",
                          "view_sent_to_first_applied", "view_sent_to_last_applied"};
  std::vector<std::vector<double>> spans(std::size(stages));
  std::ofstream steps(dir + "/breakdown.csv");
  steps << "rank,view";
  for (const char* st : stages) steps << ',' << st << "_us";
  steps << '\n';
  auto get = [](const auto& m, auto key) -> std::int64_t { return m.count(key) ? m.at(key) : -1; };
  for (const auto& k : rec.kills) {
    if (!view_of.count(k.rank)) continue;
    const auto v = view_of.at(k.rank);
    const std::int64_t t[] = {k.at_us,
                              get(logged.gone, k.rank),
                              get(logged.reported, k.rank),
                              get(logged.root_learned, k.rank),
                              get(logged.view_sent, v),
                              applied.count(v) ? applied.at(v).first : -1,
                              applied.count(v) ? applied.at(v).second : -1};
    steps << k.rank << ',' << v;
    for (std::size_t i = 0; i < std::size(stages); ++i) {
      const std::int64_t from = i < 4 ? t[i] : t[4];
      const std::int64_t to = t[i + 1];
      const bool ok = from >= 0 && to >= 0;
      steps << ',' << (ok ? std::to_string(to - from) : "");
      if (ok) spans[i].push_back(static_cast<double>(to - from));
    }
    steps << '\n';
  }
  for (std::size_t i = 0; i < std::size(stages); ++i) print_row(o, std::string(stages[i]) + "_median", median(spans[i]), "us");
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--log") {
      o.log = true;
      continue;
    }
    if (!v) {
      a = "--help";
    } else {
      ++i;
    }
    if (a == "--out") {
      o.out = v;
    } else if (a == "--scenario") {
      o.scenario = v;
    } else if (a == "--topology") {
      o.topology = v;
    } else if (a == "--tokens") {
      o.tokens = std::strtoull(v, nullptr, 10);
    } else if (a == "--duration-ms") {
      o.duration_ms = std::atoi(v);
    } else if (a == "--ring") {
      o.ring = v;
    } else if (a == "--pings") {
      o.pings = std::atoi(v);
    } else if (a == "--timeout-s") {
      o.timeout_s = std::atoi(v);
    } else {
      std::fprintf(stderr,
                   "usage: canopy-ring-bench --out DIR [--scenario none|one|pairs|half|most] [--topology SPEC]\n"
                   "         [--tokens T] [--duration-ms MS] [--ring view|all] [--pings P] [--log] [--timeout-s S]\n");
      return 2;
    }
  }
  if (o.out.empty()) {
    std::fprintf(stderr, "canopy-ring-bench: --out DIR is required\n");
    return 2;
  }
  if (!CANOPY_RING_HAS_VIEW && (o.scenario != "none" || o.ring != "all")) {
    std::fprintf(stderr, "canopy-ring-bench: this build has no membership view: --scenario none --ring all only\n");
    return 2;
  }
  canopy::testing::ProcessGuard guard;
  int status = 0;
  try {
    auto topology = canopy::generate_topology(o.topology);
    if (!topology) throw Failure(topology.error());
    Tree tree(*topology);
    std::printf("benchmark,scenario,metric,value,unit\n");
    auto rec = run(o, *topology, tree);
    auto left = canopy::testing::ProcessGuard::wait_for_none(10s);
    if (!left.empty()) {
      std::fprintf(stderr, "canopy-ring-bench: %zu processes left over after shutdown; killing them\n", left.size());
      canopy::testing::ProcessGuard::kill_all();
      status = 1;
    }
    analyse(o, *topology, tree, rec);
    if (!rec.finished) status = 1;
  } catch (const Failure& e) {
    std::fprintf(stderr, "canopy-ring-bench: %s\n", e.what());
    canopy::testing::ProcessGuard::kill_all();
    return 1;
  }
  return status;
}
