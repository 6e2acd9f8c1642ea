// canopy-membership-bench: the stabilisation time Ts of the membership service after
// one back-end failure (paper 000, §4 and §7), against the paper's base model
//
//   Ts = 2·L·(H−1) + Ocp·H
//
// measured on trees b:a^k (fan-out a = 2 and 4, N = a^k members = back-ends, 2..256),
// with L (half a ping-pong between two neighbouring processes) and Ocp (one level's
// processing of a view change) measured in the same run (docs/benchmarks.md).
//
//   canopy-membership-bench [--out DIR] [--samples N] [--fanouts 2,4] [--max-members N]
//                           [--pingpongs N] [--settle-ms MS] [--quick]
//
// H counts the levels of processes, as the paper counts the levels of its tree: the
// front-end, k−1 levels of commnodes and the back-ends, so b:a^k has H = k+1 and H−1 = k
// parent-child hops. (For N = a^k the paper's own radix tree of N members has the same
// height, min{h : (a^h−1)/(a−1) ≥ N} = k+1; Canopy's tree has its commnodes on top.)
//
// Each sample launches a fresh tree of canopy-commnode and canopy-demo-backend (taken
// from this executable's directory), lets it settle, SIGKILLs one back-end and waits
// for the front-end's view event: its `stabilise` is Ts (from the NODE_FAILURE reaching
// the root to the last acknowledgement). Recorded with it: the time from the kill to
// the front-end's failure and view events, and the CPU every thread of the tree used
// from the kill to the view (schedstat). Then a second back-end, half the tree away, is
// killed in the same tree: its Ts shows what the first failure's cold start costs
// (code and symbols not yet used by any process).
//
// L is measured three ways in the same run, before and after the trees: a ping-pong of
// a VIEW_ACK over TcpLink between two processes with asio event loops (the model's L),
// the same with 5 ms between round trips (both sides asleep, as in an idle tree), and
// raw blocking TCP; plus, once between the trees, the demo echo on b:1 through the
// public API. Ocp is timed in a loop without processes: the recalculation apply() does,
// and one level's whole processing of a view change (decode, recalculate, encode, frame
// per child, the acknowledgements); and fitted to the measured Ts.
//
// Writes to DIR (default /tmp/canopy-membership-ts):
//   samples.csv     one row per sample
//   summary.csv     one row per (a, N): medians, min, max, the model with each L
//   parameters.csv  L, Ocp (measured per N, and fitted), the fits, the machine's load
// and prints a table on stdout, progress and anything unexpected ("note:") on stderr.
// It is a benchmark: ctest never runs it. At the end it checks (as subreaper of
// everything it started) that no process it started is left, killing and reporting
// any that is. MTS_DEBUG=1 prints each kill's and view's CLOCK_MONOTONIC time (for
// `perf record -k CLOCK_MONOTONIC` and `perf report --time`), MTS_DEBUG=threads also
// each thread's CPU. bench/membership_ts.sh runs it and draws the figure.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <capnp/serialize.h>

#include "canopy/frontend.h"
#include "core/codec.h"
#include "core/loop_thread.h"
#include "core/service.h"
#include "demo_protocol.h"
#include "membership.capnp.h"
#include "pingpong.h"
#include "process_guard.h"
#include "transport/frame.h"
#include "transport/tcp_link.h"

extern char** environ;

namespace {

using namespace canopy::bench;

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using canopy::Rank;
namespace asio = boost::asio;
namespace wire = canopy::wire;

struct Options {
  std::string out = "/tmp/canopy-membership-ts";
  int samples = 5;
  std::vector<int> fanouts = {2, 4};
  int max_members = 256;
  int pingpongs = 2000;
  int settle_ms = -1;  // -1: 100 ms + 2 ms per process
};

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string sibling(const char* name) {
  auto path = std::filesystem::path(self_exe()).parent_path() / name;
  if (access(path.c_str(), X_OK) != 0) {
    throw Failure(path.string() + " is missing (build the canopy-membership-bench target, which builds it)");
  }
  return path.string();
}

std::unique_ptr<canopy::Network> launch(const canopy::Topology& topology, const std::string& spec) {
  canopy::LaunchOptions options;
  options.topology = topology;
  options.backend_argv = {sibling("canopy-demo-backend")};
  options.commnode_exe = sibling("canopy-commnode");
  options.startup_timeout = 60s;
  auto network = canopy::Network::launch(std::move(options));
  if (!network) throw Failure("launching " + spec + ": " + network.error());
  return std::move(*network);
}

canopy::Topology topology_of(const std::string& spec) {
  auto t = canopy::generate_topology(spec);
  if (!t) throw Failure("topology " + spec + ": " + t.error());
  return std::move(*t);
}

// The front-end and its one back-end (b:1) bouncing the demo workload's echo through
// the public API: broadcast → the back-end's handler → receive(). Each round trip
// crosses the one hop twice, and also the front-end's two thread hand-offs (user
// thread → loop thread → user thread), which messages inside the tree do not pay.
std::vector<double> pingpong_tree(int rounds) {
  auto net = launch(topology_of("b:1"), "b:1");
  auto stream = net->create_stream({.upstream_filter = "sum"});
  if (!stream) throw Failure("b:1: creating a stream: " + stream.error());
  canopy::Packet echo{canopy::demo::kEchoTag, {}};
  std::vector<double> rtt;
  const int warmup = std::max(10, rounds / 10);
  for (int i = 0; i < warmup + rounds; ++i) {
    auto start = Clock::now();
    if (auto r = net->broadcast(*stream, echo); !r) throw Failure("b:1 broadcast: " + r.error());
    auto in = net->receive(10s);
    auto end = Clock::now();
    if (!in || !*in || (*in)->packet.tag() != canopy::demo::kEchoTag) throw Failure("b:1: no echo");
    if (i >= warmup) rtt.push_back(us(end - start));
  }
  if (auto r = net->shutdown(); !r) throw Failure("b:1 shutdown: " + r.error());
  return rtt;
}

// ---- Ocp: one level's processing of a view change, without the network ----
//
// Two measures, each the median over batches of the time per view change:
//   recalc  what MembershipService::apply() does with a view of N members: the next
//           member list sorted and deduplicated, who left and joined (two
//           set_differences against the held view), the view and epochs replaced, and
//           the left/joined lists formatted for its log line: the paper's "time for
//           updating the tree structure on a local node".
//   level   everything a process does per view change except system calls and
//           waiting: decode the received VIEW_CHANGE frame in place (as a link does),
//           read the members and epochs out, recalc, build the VIEW_CHANGE it passes
//           down (core::Outgoing) and frame it once per child (a copies, as
//           TcpLink::send does), then decode a VIEW_ACKs and build and frame its own.
// Replicates membership.cpp (its functions are private); keep it in step.

struct Held {
  canopy::View view;
  std::map<Rank, std::uint32_t> epochs;
};

std::string ranks_text(const std::vector<Rank>& ranks) {
  std::string out;
  for (Rank r : ranks) out += (out.empty() ? "" : " ") + std::to_string(r);
  return out.empty() ? "none" : out;
}

// apply(): returns something derived from the work so the compiler keeps it.
std::size_t recalc(Held& held, canopy::View next, const std::map<Rank, std::uint32_t>& epochs) {
  std::sort(next.members.begin(), next.members.end());
  next.members.erase(std::unique(next.members.begin(), next.members.end()), next.members.end());
  std::vector<Rank> left, joined;
  std::set_difference(held.view.members.begin(), held.view.members.end(), next.members.begin(), next.members.end(),
                      std::back_inserter(left));
  std::set_difference(next.members.begin(), next.members.end(), held.view.members.begin(), held.view.members.end(),
                      std::back_inserter(joined));
  held.view = std::move(next);
  held.epochs = epochs;
  canopy::View copy = held.view;  // ViewChange::view
  return ranks_text(left).size() + ranks_text(joined).size() + copy.members.size();
}

std::vector<Rank> members_of(int n) {
  std::vector<Rank> m(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) m[static_cast<std::size_t>(i)] = static_cast<Rank>(i);
  return m;
}

void build_view_change(canopy::core::Outgoing& m, const canopy::View& view,
                       const std::map<Rank, std::uint32_t>& epochs) {
  auto v = m.init<wire::membership::ViewChange>();
  v.setId(view.id);
  // As ranges, as a whole view travels since protocol version 12.
  const auto ranges = canopy::core::rank_ranges(view.members);
  canopy::core::write_ranges(ranges, v.initRanges(static_cast<unsigned>(2 * ranges.size())));
  auto list = v.initEpochs(static_cast<unsigned>(epochs.size()));
  unsigned i = 0;
  for (const auto& [rank, e] : epochs) {
    list[i].setRank(rank);
    list[i++].setEpoch(e);
  }
}

struct OcpResult {
  double recalc_us, level_us;
};

OcpResult measure_ocp(int n, int fanout, bool quick) {
  const canopy::core::NodeIdentity parent{.rank = canopy::kFirstInternalRank, .role = canopy::Role::commnode};
  // View 0 has members 0..n-1; view 1 lacks member n/2, whose epoch is now 1.
  Held start{{0, members_of(n)}, {}};
  canopy::View next{1, members_of(n)};
  next.members.erase(next.members.begin() + n / 2);
  const std::map<Rank, std::uint32_t> epochs{{static_cast<Rank>(n / 2), 1}};
  canopy::core::Outgoing received(parent, wire::membership::SERVICE_ID, wire::membership::Kind::VIEW_CHANGE);
  build_view_change(received, next, epochs);
  canopy::transport::FrameBuffer frame;
  canopy::transport::append_frame(received.builder(), frame);
  canopy::transport::FrameBuffer ack_frame;
  canopy::transport::append_frame(view_ack(0)->builder(), ack_frame);

  const int per_batch = quick ? 200 : 1000, batches = quick ? 5 : 21;
  std::size_t sink = 0;
  std::vector<double> recalc_times, level_times;
  for (int b = 0; b < batches; ++b) {
    auto t0 = Clock::now();
    for (int i = 0; i < per_batch; ++i) {
      Held held = start;
      sink += recalc(held, next, epochs);
    }
    auto t1 = Clock::now();
    for (int i = 0; i < per_batch; ++i) {
      Held held = start;
      // Decode in place: skip the 8-byte frame header.
      capnp::FlatArrayMessageReader reader(kj::arrayPtr(canopy::transport::as_capnp(frame.data() + 1), frame.size() - 1));
      auto change = reader.getRoot<wire::Message>().getBody().getService().getBody().getAs<wire::membership::ViewChange>();
      canopy::View got;
      got.id = change.getId();
      auto ranges = change.getRanges();
      for (unsigned k = 0; k + 1 < ranges.size(); k += 2) {
        for (Rank r = ranges[k]; r <= ranges[k + 1]; ++r) got.members.push_back(r);
      }
      std::map<Rank, std::uint32_t> got_epochs;
      for (auto e : change.getEpochs()) got_epochs[e.getRank()] = e.getEpoch();
      sink += recalc(held, std::move(got), got_epochs);
      canopy::core::Outgoing down(parent, wire::membership::SERVICE_ID, wire::membership::Kind::VIEW_CHANGE);
      build_view_change(down, held.view, held.epochs);
      canopy::transport::FrameBuffer queued;
      for (int c = 0; c < fanout; ++c) canopy::transport::append_frame(down.builder(), queued);
      for (int c = 0; c < fanout; ++c) {
        capnp::FlatArrayMessageReader ack(kj::arrayPtr(canopy::transport::as_capnp(ack_frame.data() + 1), ack_frame.size() - 1));
        sink += ack.getRoot<wire::Message>().getBody().getService().getBody().getAs<wire::membership::ViewAck>().getId();
      }
      auto up = view_ack(parent.rank);
      canopy::transport::append_frame(up->builder(), queued);
      sink += queued.size();
    }
    auto t2 = Clock::now();
    recalc_times.push_back(us(t1 - t0) / per_batch);
    level_times.push_back(us(t2 - t1) / per_batch);
  }
  if (sink == 42) std::fprintf(stderr, " ");  // keeps `sink` alive
  return {median(recalc_times), median(level_times)};
}

// ---- Ts ----

// The time each thread has run so far and has waited on a run queue (ready, without a
// CPU), in ns, by thread id, of the given processes and of this process's threads
// other than the main one (the front-end's loop thread), from schedstat
// (nanoseconds, unlike utime).
struct ThreadTimes {
  double run_ns = 0, wait_ns = 0;
};
std::map<pid_t, ThreadTimes> thread_cpu_ns(const std::vector<pid_t>& pids) {
  std::map<pid_t, ThreadTimes> out;
  auto add = [&](pid_t pid, bool skip_main) {
    std::error_code ec;
    for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
      const pid_t tid = static_cast<pid_t>(std::atoi(t.path().filename().c_str()));
      if (skip_main && tid == pid) continue;
      // /proc/<tid>/schedstat, not /proc/<pid>/task/<tid>/schedstat: on this kernel
      // (6.18) a process whose task/<tid>/ files were opened can take its parent
      // milliseconds of kernel time to reap (d_walk in proc_invalidate_siblings_dcache;
      // 1-19 ms seen), which delays the detector's report.
      std::ifstream in("/proc/" + std::to_string(tid) + "/schedstat");
      ThreadTimes times;
      if (in >> times.run_ns >> times.wait_ns) out[tid] = times;
    }
  };
  add(getpid(), true);
  for (pid_t pid : pids) add(pid, false);
  return out;
}

// The time run and waited for a CPU between two readings (µs), summed over the
// threads alive at the second (a thread that ended meanwhile, the victim's, is not
// counted).
ThreadTimes between_us(const std::map<pid_t, ThreadTimes>& before, const std::map<pid_t, ThreadTimes>& after) {
  ThreadTimes sum;
  for (const auto& [tid, t] : after) {
    auto it = before.find(tid);
    if (std::getenv("MTS_DEBUG") && std::string(std::getenv("MTS_DEBUG")) == "threads") {
      std::ifstream comm("/proc/" + std::to_string(tid) + "/comm");
      std::string name;
      std::getline(comm, name);
      std::fprintf(stderr, "  tid %d %s run %.0f us wait %.0f us\n", tid, name.c_str(),
                   (t.run_ns - (it == before.end() ? 0 : it->second.run_ns)) / 1000,
                   (t.wait_ns - (it == before.end() ? 0 : it->second.wait_ns)) / 1000);
    }
    sum.run_ns += t.run_ns - (it == before.end() ? 0 : it->second.run_ns);
    sum.wait_ns += t.wait_ns - (it == before.end() ? 0 : it->second.wait_ns);
  }
  return {sum.run_ns / 1000, sum.wait_ns / 1000};
}

struct Sample {
  int fanout, members, height;
  std::size_t processes;
  int index;
  Rank victim = 0, second_victim = 0;
  double launch_ms = NAN;
  double ts_us = NAN, kill_to_failure_us = NAN, kill_to_view_us = NAN;
  // From the kill to the view event (read just after), summed over every thread of
  // the tree: the time run, and the time ready but waiting for a CPU.
  double tree_cpu_us = NAN, tree_wait_us = NAN;
  // A second back-end killed in the same tree once the first view is stable: its Ts,
  // with every process's failure path run once already (warm code, symbols bound).
  double ts_second_us = NAN;
  std::string note;  // empty when the sample is as expected
};

double since_us(std::chrono::system_clock::time_point from, std::chrono::system_clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

double monotonic_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// One failure: SIGKILL `victim`, wait for the front-end's view event (and 100 ms more
// for anything after it), check the view. Returns the first view event, if any; adds
// what was unexpected to `note`.
struct Outcome {
  std::optional<canopy::Event> view;
  double kill_to_failure_us = NAN, kill_to_view_us = NAN, tree_cpu_us = NAN, tree_wait_us = NAN;
};

Outcome fail_one(canopy::Network& net, Rank victim, std::uint64_t expected_id, const std::vector<Rank>& expected_members,
                 std::string& note) {
  Outcome out;
  pid_t pid = canopy::testing::ProcessGuard::process_of_rank(victim);
  if (pid <= 0) throw Failure("no process for back-end " + std::to_string(victim));
  const auto tree = canopy::testing::ProcessGuard::descendants();
  const auto cpu_before = thread_cpu_ns(tree);
  const bool debug = std::getenv("MTS_DEBUG") != nullptr;
  const auto killed_at = std::chrono::system_clock::now();
  if (debug) std::fprintf(stderr, "kill at monotonic %.6f\n", monotonic_s());
  kill(pid, SIGKILL);
  auto deadline = Clock::now() + 10s;
  std::size_t views = 0;
  while (Clock::now() < deadline) {
    auto e = net.next_event(20ms);
    if (!e) continue;
    if (e->kind == canopy::Event::Kind::failure && e->rank == victim && std::isnan(out.kill_to_failure_us)) {
      out.kill_to_failure_us = since_us(killed_at, e->time);
    } else if (e->kind == canopy::Event::Kind::view) {
      if (++views > 1) {
        note += "another view event " + canopy::to_json(*e) + "; ";
        continue;
      }
      if (debug) std::fprintf(stderr, "view at monotonic %.6f\n", monotonic_s());
      auto spent = between_us(cpu_before, thread_cpu_ns(tree));
      out.tree_cpu_us = spent.run_ns;
      out.tree_wait_us = spent.wait_ns;
      out.kill_to_view_us = since_us(killed_at, e->time);
      out.view = *e;
      deadline = Clock::now() + 100ms;  // a short look for more
    } else {
      note += "unexpected event " + canopy::to_json(*e) + "; ";
    }
  }
  if (!out.view) {
    note += "no view event within 10 s of killing " + std::to_string(victim) + "; ";
    return out;
  }
  const auto& v = *out.view;
  if (v.view.id != expected_id) note += "view id " + std::to_string(v.view.id) + "; ";
  if (v.left != std::vector<Rank>{victim}) note += "left is not just " + std::to_string(victim) + "; ";
  if (!v.joined.empty()) note += "someone joined; ";
  if (v.view.members != expected_members) note += "wrong members; ";
  if (v.stabilise.count() <= 0) note += "stabilise not positive; ";
  if (static_cast<double>(v.stabilise.count()) > out.kill_to_view_us) note += "stabilise exceeds kill-to-view; ";
  if (std::isnan(out.kill_to_failure_us)) note += "no failure event; ";
  return out;
}

Sample take_sample(const Options& o, int fanout, int k, int index) {
  int n = 1;
  for (int i = 0; i < k; ++i) n *= fanout;
  const std::string spec = "b:" + std::to_string(fanout) + "^" + std::to_string(k);
  auto topology = topology_of(spec);
  Sample s{fanout, n, k + 1, topology.size(), index};
  auto members = topology.backends();
  if (static_cast<int>(members.size()) != n) throw Failure(spec + " has " + std::to_string(members.size()) + " back-ends");
  // A different back-end each sample, spread over the tree; the second one half the
  // tree away (below another child of the root when k > 1).
  const std::size_t at = static_cast<std::size_t>(index) * members.size() / static_cast<std::size_t>(o.samples) % members.size();
  s.victim = members[at];
  s.second_victim = members[(at + members.size() / 2) % members.size()];
  auto t0 = Clock::now();
  auto net = launch(topology, spec);
  s.launch_ms = us(Clock::now() - t0) / 1000;
  const int settle = o.settle_ms >= 0 ? o.settle_ms : 100 + 2 * static_cast<int>(s.processes);
  std::this_thread::sleep_for(std::chrono::milliseconds(settle));
  while (auto e = net->next_event(0ms)) s.note += "an event before the kill " + canopy::to_json(*e) + "; ";

  std::erase(members, s.victim);
  auto first = fail_one(*net, s.victim, 1, members, s.note);
  s.kill_to_failure_us = first.kill_to_failure_us;
  s.kill_to_view_us = first.kill_to_view_us;
  s.tree_cpu_us = first.tree_cpu_us;
  s.tree_wait_us = first.tree_wait_us;
  if (first.view) s.ts_us = static_cast<double>(first.view->stabilise.count());
  if (first.view && n > 2) {
    std::string second_note;
    std::erase(members, s.second_victim);
    auto second = fail_one(*net, s.second_victim, 2, members, second_note);
    if (second.view) s.ts_second_us = static_cast<double>(second.view->stabilise.count());
    if (!second_note.empty()) s.note += "second failure: " + second_note;
  }
  if (auto r = net->shutdown(); !r) throw Failure("shutting down " + spec + ": " + r.error());
  net.reset();
  if (!s.note.empty()) {
    std::fprintf(stderr, "membership-bench: note: %s sample %d (victim %u): %s\n", spec.c_str(), index, s.victim,
                 s.note.c_str());
  }
  return s;
}

// ---- output ----

std::FILE* open_out(const Options& o, const char* name) {
  auto path = std::filesystem::path(o.out) / name;
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw Failure("cannot write " + path.string() + ": " + std::strerror(errno));
  return f;
}

struct Point {
  int fanout, members, height;
  std::size_t processes;
  std::vector<double> ts, kill_to_view, tree_cpu, tree_wait, ts_second;
  double ocp_recalc = 0, ocp_level = 0;
};

// The 1-minute load average (runnable processes, this machine's whole load).
double loadavg() {
  std::ifstream in("/proc/loadavg");
  double l = NAN;
  in >> l;
  return l;
}

// How busy the machine's CPUs were over `window`, from /proc/stat: 0 idle .. 1 busy
// (other users' work, before this run starts any process).
double cpu_busy(std::chrono::milliseconds window) {
  auto read = [] {
    std::ifstream in("/proc/stat");
    std::string cpu;
    double v, total = 0, idle = 0;
    in >> cpu;
    for (int i = 0; i < 8 && in >> v; ++i) {
      total += v;
      if (i == 3 || i == 4) idle += v;  // idle, iowait
    }
    return std::pair{total, idle};
  };
  auto [t0, i0] = read();
  std::this_thread::sleep_for(window);
  auto [t1, i1] = read();
  return t1 > t0 ? 1 - (i1 - i0) / (t1 - t0) : NAN;
}

int run(const Options& o, bool quick) {
  std::filesystem::create_directories(o.out);
  const double load_start = loadavg();
  const double busy_start = cpu_busy(1s);
  const auto started = Clock::now();

  // L in rounds: before the trees, between the fan-outs, after them. Each round's
  // figure is half its median round trip; the model takes the lowest round, the link
  // with the least interference from the rest of the machine (which only adds).
  struct Round {
    double raw, link, idle;
  };
  std::vector<Round> rounds;
  auto measure_l = [&] {
    std::fprintf(stderr, "membership-bench: L, round %zu...\n", rounds.size() + 1);
    Round r;
    r.raw = median(pingpong_raw(o.pingpongs)) / 2;
    r.link = median(pingpong_link(o.pingpongs)) / 2;
    r.idle = median(pingpong_link(std::max(20, o.pingpongs / 20), kColdGap)) / 2;
    rounds.push_back(r);
  };
  measure_l();

  // The points, and Ocp for each (the microbenchmark runs alone, before the trees).
  std::vector<Point> points;
  for (int a : o.fanouts) {
    int n = a;
    for (int k = 1; n <= o.max_members; ++k, n *= a) {
      Point p{a, n, k + 1, topology_of("b:" + std::to_string(a) + "^" + std::to_string(k)).size(), {}, {}};
      auto ocp = measure_ocp(n, a, quick);
      p.ocp_recalc = ocp.recalc_us;
      p.ocp_level = ocp.level_us;
      points.push_back(p);
    }
  }

  std::FILE* samples = open_out(o, "samples.csv");
  std::fprintf(samples,
               "fanout,members,height,processes,sample,victim,ts_us,kill_to_failure_us,kill_to_view_us,tree_cpu_us,"
               "tree_wait_us,second_victim,ts_second_us,launch_ms,note\n");
  std::vector<double> tree;
  for (auto& p : points) {
    const int k = p.height - 1;
    for (int i = 0; i < o.samples; ++i) {
      auto s = take_sample(o, p.fanout, k, i);
      std::string note = s.note;
      std::replace(note.begin(), note.end(), ',', ' ');  // one CSV field
      std::replace(note.begin(), note.end(), '"', '\'');
      std::fprintf(samples, "%d,%d,%d,%zu,%d,%u,%.0f,%.0f,%.0f,%.0f,%.0f,%u,%.0f,%.1f,%s\n", s.fanout, s.members,
                   s.height, s.processes, s.index, s.victim, s.ts_us, s.kill_to_failure_us, s.kill_to_view_us,
                   s.tree_cpu_us, s.tree_wait_us, s.second_victim, s.ts_second_us, s.launch_ms, note.c_str());
      std::fflush(samples);
      if (!std::isnan(s.ts_us)) p.ts.push_back(s.ts_us);
      if (!std::isnan(s.kill_to_view_us)) p.kill_to_view.push_back(s.kill_to_view_us);
      if (!std::isnan(s.tree_cpu_us)) p.tree_cpu.push_back(s.tree_cpu_us);
      if (!std::isnan(s.tree_wait_us)) p.tree_wait.push_back(s.tree_wait_us);
      if (!std::isnan(s.ts_second_us)) p.ts_second.push_back(s.ts_second_us);
      std::fprintf(stderr,
                   "membership-bench: b:%d^%d (N=%d, %zu processes) sample %d: Ts %.0f us, kill to view %.0f us, "
                   "tree CPU %.0f us\n",
                   p.fanout, k, p.members, p.processes, i, s.ts_us, s.kill_to_view_us, s.tree_cpu_us);
    }
    if (p.fanout == o.fanouts.front() && p.height == 2) {
      // The b:1 echo, between the trees, in the same conditions.
      tree = pingpong_tree(std::max(100, o.pingpongs / 4));
    }
    if (&p != &points.back() && p.fanout != (&p + 1)->fanout) measure_l();
  }
  if (tree.empty()) tree = pingpong_tree(std::max(100, o.pingpongs / 4));
  std::fclose(samples);

  measure_l();
  auto lowest = [&](double Round::*field) {
    double v = INFINITY;
    for (const auto& r : rounds) v = std::min(v, r.*field);
    return v;
  };
  const double l_raw = lowest(&Round::raw), l_link = lowest(&Round::link), l_cold = lowest(&Round::idle);
  const double l_tree = median(tree) / 2;
  const double L = l_link;  // the model's L (docs/benchmarks.md says why)

  // Fits of the medians. (1) Ocp with L = L_link fixed, by least squares of the
  // relative error (every point weighs the same, not just the largest trees):
  // minimise Σ ((2L(H−1) + Ocp·H − Ts) / Ts)², so Ocp = Σ (H/Ts)(1 − 2L(H−1)/Ts) / Σ (H/Ts)²;
  // per fan-out (key a) and over both (key 0). (2) Against the processes P of the tree:
  // Ts = γ P + δ, ordinary least squares (the 2 cores serialise the processes).
  struct Line {
    double slope = NAN, intercept = NAN;
  };
  auto fit_line = [](const std::vector<std::pair<double, double>>& xy) {
    Line l;
    if (xy.size() < 2) return l;
    double sx = 0, sy = 0, sxx = 0, sxy = 0, n = static_cast<double>(xy.size());
    for (auto [x, y] : xy) {
      sx += x;
      sy += y;
      sxx += x * x;
      sxy += x * y;
    }
    double d = n * sxx - sx * sx;
    if (d == 0) return l;
    l.slope = (n * sxy - sx * sy) / d;
    l.intercept = (sy - l.slope * sx) / n;
    return l;
  };
  std::map<int, std::pair<double, double>> ocp_sums;  // fan-out → (numerator, denominator)
  std::map<int, std::vector<std::pair<double, double>>> by_processes;
  for (const auto& p : points) {
    if (p.ts.empty()) continue;
    const double m = median(p.ts), h = p.height;
    for (int key : {p.fanout, 0}) {
      ocp_sums[key].first += (h / m) * (1 - 2 * L * (h - 1) / m);
      ocp_sums[key].second += (h / m) * (h / m);
      by_processes[key].push_back({static_cast<double>(p.processes), m});
    }
  }
  std::map<int, double> ocp_fits;
  for (auto& [a, sums] : ocp_sums) ocp_fits[a] = sums.second > 0 ? sums.first / sums.second : NAN;
  const double ocp_fit = ocp_fits.count(0) ? ocp_fits[0] : NAN;
  // How far the fitted model stays from the medians, as measured / model.
  double fit_lo = INFINITY, fit_hi = 0;
  for (const auto& p : points) {
    if (p.ts.empty()) continue;
    const double r = median(p.ts) / (2 * L * (p.height - 1) + ocp_fit * p.height);
    fit_lo = std::min(fit_lo, r);
    fit_hi = std::max(fit_hi, r);
  }

  std::FILE* params = open_out(o, "parameters.csv");
  std::fprintf(params, "parameter,fanout,members,value,unit,detail\n");
  auto param = [&](const char* name, int a, int n, double v, const char* unit, const std::string& detail) {
    std::fprintf(params, "%s,%d,%d,%.3f,%s,%s\n", name, a, n, v, unit, detail.c_str());
  };
  param("busy_start", 0, 0, 100 * busy_start, "%",
        "how busy the machine's CPUs were over 1 s before the run (other work; 100 = both cores)");
  param("load_start", 0, 0, load_start, "runnable",
        "1-minute load average at the start (includes the trees of a run that just ended)");
  param("duration", 0, 0, std::chrono::duration<double>(Clock::now() - started).count(), "s", "of the whole run");
  param("L", 0, 0, L, "us", "the model's L: L_link");
  param("L_link", 0, 0, l_link, "us",
        "half the median round trip of a VIEW_ACK over TcpLink between two processes with asio loops, " +
            std::to_string(o.pingpongs) + " round trips per round; the lowest round");
  param("L_link_idle", 0, 0, l_cold, "us",
        "the same with " + std::to_string(kColdGap.count() / 1000) +
            " ms between round trips, so both processes are asleep when a message comes (as in an idle tree); " +
            std::to_string(std::max(20, o.pingpongs / 20)) + " round trips per round; the lowest round");
  param("L_raw_tcp", 0, 0, l_raw, "us",
        "half the median round trip of 64 B over blocking loopback TCP between two processes; " +
            std::to_string(o.pingpongs) + " round trips per round; the lowest round");
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    const std::string when = i == 0 ? "before the trees" : i + 1 == rounds.size() ? "after the trees" : "between the fan-outs";
    const std::string round = "round " + std::to_string(i + 1) + ", " + when;
    param("L_link_round", 0, static_cast<int>(i + 1), rounds[i].link, "us", round);
    param("L_link_idle_round", 0, static_cast<int>(i + 1), rounds[i].idle, "us", round);
    param("L_raw_tcp_round", 0, static_cast<int>(i + 1), rounds[i].raw, "us", round);
  }
  param("L_tree_b1", 0, 0, l_tree, "us",
        "half the median echo round trip front-end <-> back-end on b:1 through the public API (with its two "
        "thread hand-offs); " + std::to_string(tree.size()) + " round trips");
  for (const auto& p : points) {
    param("Ocp_recalc", p.fanout, p.members, p.ocp_recalc, "us", "apply(): sort + left/joined difference + copy");
    param("Ocp_level", p.fanout, p.members, p.ocp_level, "us",
          "decode VIEW_CHANGE + recalc + encode it + frame it per child + the acks, no system calls");
  }
  for (auto& [a, v] : ocp_fits) {
    param("Ocp_fit", a, 0, v, "us", "fitted to the median Ts with L = L_link fixed; relative least squares (fanout 0: both)");
  }
  param("Ocp_fit_ratio_min", 0, 0, fit_lo, "x", "the lowest median Ts / the model with Ocp_fit (both fan-outs)");
  param("Ocp_fit_ratio_max", 0, 0, fit_hi, "x", "the highest");
  for (auto& [a, xy] : by_processes) {
    auto l = fit_line(xy);
    param("per_process", a, 0, l.slope, "us", "fit Ts = gamma P + delta over the processes P (fanout 0: both)");
    param("per_process_intercept", a, 0, l.intercept, "us", "delta of that fit");
  }
  std::fclose(params);

  std::FILE* summary = open_out(o, "summary.csv");
  std::fprintf(summary,
               "fanout,members,height,processes,samples,ts_median_us,ts_min_us,ts_max_us,model_us,ratio_to_model,"
               "model_idle_us,ratio_to_model_idle,model_fit_us,ts_second_median_us,kill_to_view_median_us,"
               "tree_cpu_median_us,cpu_per_process_us,tree_wait_median_us,ocp_level_us\n");
  std::printf("machine: CPUs %.0f%% busy with other work before the run, load average %.1f (2 cores); run %.0f s\n",
              100 * busy_start, load_start, std::chrono::duration<double>(Clock::now() - started).count());
  std::printf("L = %.1f us: half a VIEW_ACK ping-pong over TcpLink between two processes, quietest of %zu rounds "
              "(rounds:",
              L, rounds.size());
  for (const auto& r : rounds) std::printf(" %.1f", r.link);
  std::printf("); idle: %.1f us; raw TCP %.1f us; b:1 echo through the API %.1f us\n", l_cold, l_raw, l_tree);
  double ocp_lo = INFINITY, ocp_hi = 0, recalc_lo = INFINITY, recalc_hi = 0;
  for (const auto& p : points) {
    ocp_lo = std::min(ocp_lo, p.ocp_level);
    ocp_hi = std::max(ocp_hi, p.ocp_level);
    recalc_lo = std::min(recalc_lo, p.ocp_recalc);
    recalc_hi = std::max(recalc_hi, p.ocp_recalc);
  }
  std::printf("Ocp = %.2f..%.2f us per level, measured (the recalculation alone %.2f..%.2f us); fitted to Ts with "
              "this L: %.0f us, and then measured / fitted model = %.2f..%.2f\n",
              ocp_lo, ocp_hi, recalc_lo, recalc_hi, ocp_fit, fit_lo, fit_hi);
  if (by_processes.count(0)) {
    auto l = fit_line(by_processes[0]);
    std::printf("against the processes P of the tree: Ts = %.0f us * P %+.0f us (least squares)\n", l.slope,
                l.intercept);
  }
  std::printf("model = 2L(H-1) + Ocp*H; 'idle' uses the idle L; 'warm' is a second failure in the same tree; "
              "CPU/process: the tree's CPU from kill to view / processes\n");
  std::printf("%3s %4s %2s %4s | %9s %19s | %8s %7s | %8s %7s | %9s %11s %12s\n", "a", "N", "H", "P", "Ts med",
              "[min - max] us", "model", "x model", "idle", "x idle", "warm Ts", "kill->view", "CPU/process");
  for (const auto& p : points) {
    const double h = p.height;
    const double model = 2 * L * (h - 1) + p.ocp_level * h;
    const double model_idle = 2 * l_cold * (h - 1) + p.ocp_level * h;
    const double model_fit = 2 * L * (h - 1) + ocp_fit * h;
    const double m = median(p.ts);
    const double lo = p.ts.empty() ? NAN : *std::min_element(p.ts.begin(), p.ts.end());
    const double hi = p.ts.empty() ? NAN : *std::max_element(p.ts.begin(), p.ts.end());
    const double cpu = median(p.tree_cpu);
    std::fprintf(summary, "%d,%d,%d,%zu,%zu,%.0f,%.0f,%.0f,%.1f,%.2f,%.1f,%.2f,%.1f,%.0f,%.0f,%.0f,%.1f,%.0f,%.2f\n",
                 p.fanout, p.members, p.height, p.processes, p.ts.size(), m, lo, hi, model, m / model, model_idle,
                 m / model_idle, model_fit, median(p.ts_second), median(p.kill_to_view), cpu,
                 cpu / static_cast<double>(p.processes), median(p.tree_wait), p.ocp_level);
    std::printf("%3d %4d %2d %4zu | %9.0f %8.0f - %8.0f | %8.1f %7.1f | %8.1f %7.1f | %9.0f %11.0f %12.0f\n", p.fanout,
                p.members, p.height, p.processes, m, lo, hi, model, m / model, model_idle, m / model_idle,
                median(p.ts_second), median(p.kill_to_view), cpu / static_cast<double>(p.processes));
  }
  std::fclose(summary);
  std::fflush(stdout);
  return 0;
}

bool check_nothing_left() {
  auto left = canopy::testing::ProcessGuard::wait_for_none(10s);
  if (left.empty()) return true;
  std::string pids;
  for (pid_t pid : left) {
    pids += ' ' + std::to_string(pid);
    kill(pid, SIGKILL);
  }
  std::this_thread::sleep_for(100ms);
  canopy::testing::ProcessGuard::reap();
  std::fprintf(stderr, "canopy-membership-bench: %zu processes were still alive at the end (killed):%s\n", left.size(),
               pids.c_str());
  return false;
}

int usage() {
  std::fprintf(stderr,
               "usage: canopy-membership-bench [--out DIR] [--samples N] [--fanouts 2,4] [--max-members N]\n"
               "                               [--pingpongs N] [--settle-ms MS] [--quick]\n"
               "  --out DIR        where samples.csv, summary.csv, parameters.csv go (default "
               "/tmp/canopy-membership-ts)\n"
               "  --samples N      trees per point, one back-end killed in each (default 5)\n"
               "  --fanouts LIST   fan-outs a (default 2,4); trees b:a^k for a^k <= max members\n"
               "  --max-members N  largest member count (default 256)\n"
               "  --pingpongs N    round trips per L measurement (default 2000)\n"
               "  --settle-ms MS   wait after launch before the kill (default 100 + 2 per process)\n"
               "  --quick          smoke run: 2 samples, up to 16 members, 300 round trips\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc == 4 && std::string(argv[1]) == "--echo-raw") {
    return echo_raw(static_cast<std::uint16_t>(std::atoi(argv[2])), std::strtoul(argv[3], nullptr, 10));
  }
  if (argc == 3 && std::string(argv[1]) == "--echo-link") {
    return echo_link(static_cast<std::uint16_t>(std::atoi(argv[2])));
  }
  Options o;
  bool quick = false;
  int samples = 0, pingpongs = 0, max_members = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a);
      return argv[++i];
    };
    try {
      if (a == "--out") o.out = value();
      else if (a == "--samples") samples = std::stoi(value());
      else if (a == "--max-members") max_members = std::stoi(value());
      else if (a == "--pingpongs") pingpongs = std::stoi(value());
      else if (a == "--settle-ms") o.settle_ms = std::stoi(value());
      else if (a == "--quick") quick = true;
      else if (a == "--fanouts") {
        o.fanouts.clear();
        std::stringstream list(value());
        for (std::string f; std::getline(list, f, ',');) o.fanouts.push_back(std::stoi(f));
      } else if (a == "-h" || a == "--help") {
        usage();
        return 0;
      } else {
        return usage();
      }
    } catch (const std::exception&) {
      return usage();
    }
  }
  if (quick) {
    o.samples = 2;
    o.max_members = 16;
    o.pingpongs = 300;
  }
  if (samples) o.samples = samples;  // explicit values win over --quick
  if (pingpongs) o.pingpongs = pingpongs;
  if (max_members) o.max_members = max_members;
  if (o.samples < 1 || o.pingpongs < 10 || o.max_members < 2 || o.fanouts.empty() ||
      std::any_of(o.fanouts.begin(), o.fanouts.end(), [](int f) { return f < 2; })) {
    return usage();
  }
  if (const char* dir = std::getenv("CANOPY_LOG_DIR"); dir && *dir) {
    std::fprintf(stderr, "canopy-membership-bench: note: CANOPY_LOG_DIR is set, so every process logs to a file, "
                         "which the figures then include\n");
  }

  canopy::testing::ProcessGuard guard;  // subreaper: orphans come here, and are counted at the end
  int status = 0;
  try {
    status = run(o, quick);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "canopy-membership-bench: %s\n", e.what());
    status = 1;
  }
  if (!check_nothing_left()) status = 1;
  return status;
}
