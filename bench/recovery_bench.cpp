// canopy-recovery-bench: the paper's fault-tolerance measurements, on this machine.
// Prints CSV (benchmark,params,metric,value,unit) on stdout (docs/benchmarks.md):
//
//   adopters      time for an orphan to compute its potential adopters on 32^3 and
//                 32^4 topologies (TreeView::potential_adopters), and to build the view
//   recovery      Figure 6: a victim commnode with fan-out 16..128 next to 16 extra
//                 commnodes is SIGKILLed under the union workload; overall recovery
//                 (kill to the last orphan's recovery event at the front-end) and the
//                 per-orphan phases choose/connect/compensate/cleanup; beside them
//                 the floor: the same storm's messages between bare processes
//                 (canopy-storm-floor, bench/storm_floor.cpp), in every repetition
//   perturbation  Figure 7: union throughput over time in b:8^2 (64 back-ends) while
//                 a commnode is SIGKILLed every few seconds; one row per 250 ms
//
// Every run is checked before its rows count: the union workload runs to its end (the
// end marker of every back-end), each back-end records what it sent (union_record.h),
// and the front-end's union must hold all of it and nothing else; no recovery event
// may name an incomplete stream; every planned kill must find its process and be
// reported as a failure. A run that fails a check stops the program with a line
// "canopy-recovery-bench: FAILED ..." and exit status 1, and its rows are not printed.
//
//   canopy-recovery-bench [--quick] [--only adopters|recovery|perturbation] [--reps N]
//                         [--fanouts F,F,...]   (Figure 6's victims; default 16,32,64,128)
//                         [--standby off|on|both]  (standby links; default both, side by side)
//                         [--timeline FILE]  (Figure 6: each orphan's recovery, CSV, below)
//
// --timeline writes one row per orphan of every Figure 6 run, and of the floor after
// it: system,fanout,rep,orphan,detect_ms,request_ms,answer_ms,state_ms,report_ms,
// each from the kill: the orphan found its parent lost, sent its adoption request,
// read the adopter's answer, sent its state, and the front-end received its
// `recovered` report (the floor: detect and report only). bench/recovery_trace.sh
// draws it beside a scheduler trace (docs/fault-tolerance.md, "Where the time goes").
//
// Processes are real (canopy-commnode and canopy-demo-backend from this executable's
// directory) and talk over loopback. At the end the program checks that nothing it
// started is left.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "canopy/frontend.h"
#include "core/tree_view.h"
#include "demo_protocol.h"
#include "process_guard.h"
#include "union_record.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using canopy::Rank;

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void row(const std::string& bench, const std::string& params, const std::string& metric, double value,
         const char* unit) {
  std::printf("%s,%s,%s,%.3f,%s\n", bench.c_str(), params.c_str(), metric.c_str(), value, unit);
  std::fflush(stdout);
}

// Rows of a run, held back until the run has passed its checks.
struct Rows {
  struct Row {
    std::string bench, params, metric;
    double value;
    const char* unit;
  };
  std::vector<Row> rows;
  void add(std::string bench, std::string params, std::string metric, double value, const char* unit) {
    rows.push_back({std::move(bench), std::move(params), std::move(metric), value, unit});
  }
  void print() const {
    for (const auto& r : rows) row(r.bench, r.params, r.metric, r.value, r.unit);
  }
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

std::string self_directory() {
  return std::filesystem::canonical("/proc/self/exe").parent_path().string();
}

// A balanced tree of the given fan-outs, built directly (generate_topology numbers
// internal nodes from 1,000,000, which 32^4 back-ends would collide with).
canopy::Topology balanced(const std::vector<std::size_t>& fanouts) {
  std::size_t leaves = 1;
  for (auto f : fanouts) leaves *= f;
  const Rank first_internal = static_cast<Rank>(std::max<std::size_t>(canopy::kFirstInternalRank, 2 * leaves));
  std::vector<canopy::TopologyNode> nodes;
  std::vector<Rank> level{first_internal};
  nodes.push_back({.rank = first_internal, .role = canopy::Role::frontend});
  Rank next_internal = first_internal + 1, next_backend = 0;
  for (std::size_t depth = 0; depth < fanouts.size(); ++depth) {
    const bool last = depth + 1 == fanouts.size();
    std::vector<Rank> below;
    for (Rank parent : level) {
      for (std::size_t i = 0; i < fanouts[depth]; ++i) {
        Rank r = last ? next_backend++ : next_internal++;
        nodes.push_back({.rank = r, .role = last ? canopy::Role::backend : canopy::Role::commnode, .parent = parent});
        below.push_back(r);
      }
    }
    level = std::move(below);
  }
  auto topology = canopy::Topology::make(std::move(nodes), {});
  if (!topology) throw Failure("cannot build the topology: " + topology.error());
  return std::move(*topology);
}

// ---- adopters ----

void bench_adopters(bool quick) {
  for (std::size_t depth : {3, 4}) {
    if (quick && depth == 4) continue;
    std::vector<std::size_t> fanouts(depth, 32);
    std::string params = "32^" + std::to_string(depth);
    auto topology = balanced(fanouts);
    auto t0 = Clock::now();
    canopy::core::TreeView view(topology);
    row("adopters", params, "build_view", std::chrono::duration<double, std::milli>(Clock::now() - t0).count(), "ms");
    row("adopters", params, "processes", static_cast<double>(topology.size()), "count");

    // A leaf commnode (its orphans are back-ends) and a commnode just below the
    // front-end (its orphans are commnodes).
    const Rank root = topology.root().rank;
    const Rank top = topology.at(root).children.front();
    Rank leaf = top;
    while (topology.at(topology.at(leaf).children.front()).role != canopy::Role::backend) {
      leaf = topology.at(leaf).children.front();
    }
    for (auto [name, victim] : {std::pair{"leaf_commnode", leaf}, std::pair{"top_commnode", top}}) {
      const auto orphans = topology.at(victim).children;
      view.apply_failure(victim);
      std::vector<double> times;
      const int rounds = quick ? 20 : 200;
      for (int i = 0; i < rounds; ++i) {
        for (Rank orphan : orphans) {
          auto start = Clock::now();
          auto list = view.potential_adopters(orphan, 16);
          times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
          if (list.empty()) throw Failure("no adopter for " + std::to_string(orphan));
        }
      }
      row("adopters", params + " " + name, "potential_adopters_median", median(times), "us");
      row("adopters", params + " " + name, "potential_adopters_max", *std::max_element(times.begin(), times.end()),
          "us");
    }
  }
}

// ---- processes ----

std::unique_ptr<canopy::Network> launch(const canopy::Topology& topology, bool standby_links = false) {
  canopy::LaunchOptions options;
  options.topology = topology;
  options.fault_tolerance.standby_links = standby_links;
  options.backend_argv = {self_directory() + "/canopy-demo-backend"};
  options.commnode_exe = self_directory() + "/canopy-commnode";
  options.startup_timeout = 30s;
  auto network = canopy::Network::launch(std::move(options));
  if (!network) throw Failure(network.error());
  return std::move(*network);
}

// A directory of its own for each run's records, removed with it.
struct RecordDir {
  std::filesystem::path path;
  RecordDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "canopy-recovery-bench.XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw Failure("cannot create a record directory: " + std::string(std::strerror(errno)));
    path = pattern;
  }
  ~RecordDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  RecordDir(const RecordDir&) = delete;
  RecordDir& operator=(const RecordDir&) = delete;
};

// The union workload (docs/demo.md) at `rate_hz` for `duration_ms`, each back-end
// recording what it sends into `record`.
canopy::StreamId start_union(canopy::Network& net, int rate_hz, int duration_ms, const RecordDir& record) {
  auto stream = net.create_stream({.upstream_filter = "incremental_union"});
  if (!stream) throw Failure(stream.error());
  auto r = net.broadcast(*stream,
                         canopy::Packet{canopy::demo::kUnionStartTag, {rate_hz, duration_ms, record.path.string()}});
  if (!r) throw Failure(r.error());
  return *stream;
}

// What the front-end received of the union workload: the integers and the back-ends
// whose end marker arrived.
struct UnionResult {
  std::set<std::int32_t> integers;
  std::set<Rank> finished;

  // Takes one packet; returns how many integers were new.
  std::size_t take(const canopy::Packet& packet) {
    std::size_t fresh = 0;
    for (const auto& v : packet.values()) {
      if (auto* xs = std::get_if<std::vector<std::int32_t>>(&v)) {
        for (auto x : *xs) {
          if (x < 0) {
            finished.insert(static_cast<Rank>(-1 - x));  // canopy::demo::union_end_marker
          } else {
            fresh += integers.insert(x).second;
          }
        }
      }
    }
    return fresh;
  }
};

// A recovery event must not name a stream that may have lost data: incremental_union
// is state recoverable (docs/fault-tolerance.md).
void check_recovered(const canopy::Event& e, const std::string& run) {
  if (e.kind != canopy::Event::Kind::recovered || e.incomplete_streams.empty()) return;
  throw Failure(run + ": the recovery of orphan " + std::to_string(e.rank) + " under " + std::to_string(e.adopter) +
                " reported " + std::to_string(e.incomplete_streams.size()) + " incomplete stream(s)");
}

// Receives until every back-end's end marker has arrived (at most `limit`), handing
// each event to `on_event`, then checks the union against the back-ends' records:
// no back-end is killed in these runs, so every integer each one recorded must be
// there, and nothing else. Throws Failure, naming `run`, otherwise.
template <typename OnEvent>
void finish_and_check_union(canopy::Network& net, UnionResult& got, const RecordDir& record, const std::string& run,
                            std::chrono::milliseconds limit, OnEvent on_event) {
  const auto backends = net.topology().backends();
  const auto deadline = Clock::now() + limit;
  auto all_finished = [&] {
    return std::all_of(backends.begin(), backends.end(), [&](Rank r) { return got.finished.count(r) > 0; });
  };
  while (!all_finished() && Clock::now() < deadline) {
    auto in = net.receive(20ms);
    if (!in) throw Failure(run + ": receive failed: " + in.error());
    if (*in) got.take((*in)->packet);
    while (auto e = net.next_event(0ms)) on_event(*e);
  }
  while (auto e = net.next_event(0ms)) on_event(*e);
  if (!all_finished()) {
    std::string missing;
    for (Rank r : backends) {
      if (!got.finished.count(r)) missing += " " + std::to_string(r);
    }
    throw Failure(run + ": no end marker from back-end(s)" + missing + " within " +
                  std::to_string(std::chrono::duration_cast<std::chrono::seconds>(limit).count()) + " s");
  }
  std::map<Rank, std::vector<canopy::demo::RecordedValue>> records;
  for (Rank r : backends) {
    auto values = canopy::demo::read_record(record.path / ("be-" + std::to_string(r) + ".txt"));
    if (!values) throw Failure(run + ": " + values.error());
    if (values->empty()) throw Failure(run + ": back-end " + std::to_string(r) + " recorded nothing");
    records.emplace(r, std::move(*values));
  }
  auto check = canopy::demo::check_union(got.integers, records, {});
  if (!check.ok()) {
    throw Failure(run + ": the union lost data: " + std::to_string(check.missing) + " of " +
                  std::to_string(check.expected) + " integers the back-ends sent are missing, " +
                  std::to_string(check.extra) + " extra");
  }
  std::fprintf(stderr, "canopy-recovery-bench: %s: union complete (%zu integers from %zu back-ends)\n", run.c_str(),
               check.expected, backends.size());
}

// Figure 5's topology: the front-end over the victim (fan-out F, back-ends) and 16
// extra commnodes with one back-end each, which adopt the victim's orphans.
canopy::Topology victim_topology(std::size_t fanout) {
  const Rank fe = canopy::kFirstInternalRank;
  std::vector<canopy::TopologyNode> nodes{{.rank = fe, .role = canopy::Role::frontend}};
  nodes.push_back({.rank = fe + 1, .role = canopy::Role::commnode, .parent = fe});
  Rank backend = 0;
  for (std::size_t i = 0; i < fanout; ++i) {
    nodes.push_back({.rank = backend++, .role = canopy::Role::backend, .parent = fe + 1});
  }
  for (Rank extra = 0; extra < 16; ++extra) {
    nodes.push_back({.rank = fe + 2 + extra, .role = canopy::Role::commnode, .parent = fe});
    nodes.push_back({.rank = backend++, .role = canopy::Role::backend, .parent = fe + 2 + extra});
  }
  auto topology = canopy::Topology::make(std::move(nodes), {});
  if (!topology) throw Failure(topology.error());
  return std::move(*topology);
}

// One run of Figure 6: times in ms, from the kill to the front-end's receipt of
// the last orphan's recovered event, and the slowest orphan's phases; before them,
// from the kill to the last orphan's finding its parent lost (detect), and after
// them, from an orphan's recovery to the front-end's receipt of its report (report:
// the slowest).
struct RecoveryRun {
  double overall = 0, choose = 0, connect = 0, compensate = 0, cleanup = 0, per_orphan_mean = 0;
  double detect = 0, report = 0;
  std::size_t over_standby = 0;  // orphans adopted over their standby links
  std::vector<canopy::Event> recovered;  // each orphan's report, as the front-end received it
  std::chrono::system_clock::time_point killed_at;
};

// --timeline: where each orphan's rows go (null: nowhere).
std::FILE* timeline = nullptr;

double ms_between(std::chrono::system_clock::time_point from, std::chrono::system_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

void write_timeline(const RecoveryRun& r, std::size_t fanout, bool standby, int rep) {
  if (!timeline) return;
  for (const auto& e : r.recovered) {
    const auto request = e.orphaned + e.choose;
    const auto answer = request + e.connect;
    const auto state = answer + e.compensate;
    std::fprintf(timeline, "%s,%zu,%d,%u,%.3f,%.3f,%.3f,%.3f,%.3f\n", standby ? "canopy-standby" : "canopy", fanout,
                 rep, e.rank, ms_between(r.killed_at, e.orphaned), ms_between(r.killed_at, request),
                 ms_between(r.killed_at, answer), ms_between(r.killed_at, state), ms_between(r.killed_at, e.time));
  }
  std::fflush(timeline);
}

RecoveryRun run_recovery(std::size_t fanout, bool standby, const std::string& run) {
  RecordDir record;
  auto net = launch(victim_topology(fanout), standby);
  // The tree in its steady state, in both modes: standby links open 1-2 s after
  // each process starts (services/recovery.cpp, kStandbyFirst).
  std::this_thread::sleep_for(2500ms);
  // The paper's 10 Hz sampling rate, long enough to outlast the kill (at 500 ms)
  // and the recovery, after which the union is checked.
  const int duration_ms = 3000 + 20 * static_cast<int>(fanout);
  start_union(*net, 10, duration_ms, record);
  UnionResult got;
  const auto started = Clock::now();
  while (Clock::now() - started < 500ms) {
    auto in = net->receive(20ms);
    if (!in) throw Failure(run + ": receive failed: " + in.error());
    if (*in) got.take((*in)->packet);
  }
  const Rank victim = canopy::kFirstInternalRank + 1;
  pid_t pid = canopy::testing::ProcessGuard::process_of_rank(victim);
  if (pid <= 0) throw Failure(run + ": no process of the victim, commnode " + std::to_string(victim));
  auto killed_at = std::chrono::system_clock::now();
  if (kill(pid, SIGKILL) != 0) throw Failure(run + ": cannot kill the victim: " + std::strerror(errno));
  std::set<Rank> recovered;
  std::vector<canopy::Event> events;
  auto on_event = [&](const canopy::Event& e) {
    check_recovered(e, run);
    if (e.kind == canopy::Event::Kind::recovered && recovered.insert(e.rank).second) events.push_back(e);
  };
  auto deadline = Clock::now() + 30s;
  while (recovered.size() < fanout && Clock::now() < deadline) {
    auto in = net->receive(0ms);  // keep the data flowing
    if (!in) throw Failure(run + ": receive failed: " + in.error());
    if (*in) got.take((*in)->packet);
    if (auto e = net->next_event(20ms)) on_event(*e);
  }
  if (recovered.size() < fanout) {
    throw Failure(run + ": " + std::to_string(recovered.size()) + " of " + std::to_string(fanout) +
                  " orphans recovered");
  }
  finish_and_check_union(*net, got, record, run, std::chrono::milliseconds(duration_ms) + 30s, on_event);
  RecoveryRun r;
  double sum = 0;
  for (const auto& e : events) {
    r.overall = std::max(r.overall, std::chrono::duration<double, std::milli>(e.time - killed_at).count());
    r.choose = std::max(r.choose, e.choose.count() / 1000.0);
    r.connect = std::max(r.connect, e.connect.count() / 1000.0);
    r.compensate = std::max(r.compensate, e.compensate.count() / 1000.0);
    r.cleanup = std::max(r.cleanup, e.cleanup.count() / 1000.0);
    r.detect = std::max(r.detect, std::chrono::duration<double, std::milli>(e.orphaned - killed_at).count());
    const auto recovered_at = e.orphaned + e.choose + e.connect + e.compensate + e.cleanup;
    r.report = std::max(r.report, std::chrono::duration<double, std::milli>(e.time - recovered_at).count());
    sum += (e.choose + e.connect + e.compensate + e.cleanup).count() / 1000.0;
    r.over_standby += e.standby;
  }
  r.per_orphan_mean = sum / static_cast<double>(events.size());
  r.recovered = std::move(events);
  r.killed_at = killed_at;
  (void)net->shutdown();
  return r;
}

// The floor under one run (bench/storm_floor.cpp): the same storm's messages between
// bare processes, no Canopy in them. Overall and last detection, in ms.
// With --timeline, its orphans' rows follow the run's.
std::pair<double, double> run_floor(std::size_t fanout, int rep) {
  const std::string command = self_directory() + "/canopy-storm-floor --fanout " + std::to_string(fanout) +
                              " --adopters 16" + (timeline ? " --timeline" : "");
  std::FILE* out = popen(command.c_str(), "r");
  if (!out) throw Failure("cannot run " + command + ": " + std::strerror(errno));
  char line[256] = {};
  const bool got = std::fgets(line, sizeof line, out) != nullptr;
  // The floor's timeline: a line "orphan detect_ms report_ms" for each.
  std::vector<std::string> orphans;
  for (char more[256]; std::fgets(more, sizeof more, out);) orphans.emplace_back(more);
  const int status = pclose(out);
  double overall = 0, detect = 0;
  if (!got || status != 0 || std::sscanf(line, "overall_ms=%lf last_detect_ms=%lf", &overall, &detect) != 2) {
    throw Failure(command + " failed (status " + std::to_string(status) + "): " + line);
  }
  for (const auto& o : orphans) {
    unsigned orphan = 0;
    double at = 0, reported = 0;
    if (std::sscanf(o.c_str(), "%u %lf %lf", &orphan, &at, &reported) != 3) {
      throw Failure(command + " printed a timeline line it should not: " + o);
    }
    std::fprintf(timeline, "floor,%zu,%d,%u,%.3f,,,,%.3f\n", fanout, rep, orphan, at, reported);
  }
  return {overall, detect};
}

// Each repetition runs every mode in turn (without standby links, then with), and
// then the floor, so that they are measured side by side on the same machine state.
void bench_recovery(std::vector<std::size_t> fanouts, int reps, const std::vector<bool>& modes) {
  for (std::size_t fanout : fanouts) {
    std::map<bool, std::vector<RecoveryRun>> runs;
    std::vector<double> floor_overall, floor_detect;
    for (int rep = 0; rep < reps; ++rep) {
      for (bool standby : modes) {
        const std::string run = "recovery fanout=" + std::to_string(fanout) + (standby ? " standby" : "") + " rep " +
                                std::to_string(rep + 1);
        runs[standby].push_back(run_recovery(fanout, standby, run));
        write_timeline(runs[standby].back(), fanout, standby, rep + 1);
      }
      const auto [overall, detect] = run_floor(fanout, rep + 1);
      floor_overall.push_back(overall);
      floor_detect.push_back(detect);
    }
    for (bool standby : modes) {
      const auto& all = runs[standby];
      auto med = [&](double RecoveryRun::*field) {
        std::vector<double> v;
        for (const auto& r : all) v.push_back(r.*field);
        return median(v);
      };
      std::size_t over = 0;
      for (const auto& r : all) over += r.over_standby;
      std::string params = "fanout=" + std::to_string(fanout) + " adopters=16 reps=" + std::to_string(reps) +
                           " standby=" + (standby ? "on" : "off");
      row("recovery", params, "overall_median", med(&RecoveryRun::overall), "ms");
      row("recovery", params, "orphan_mean_median", med(&RecoveryRun::per_orphan_mean), "ms");
      row("recovery", params, "last_detect_median", med(&RecoveryRun::detect), "ms");
      row("recovery", params, "slowest_choose_median", med(&RecoveryRun::choose), "ms");
      row("recovery", params, "slowest_connect_median", med(&RecoveryRun::connect), "ms");
      row("recovery", params, "slowest_compensate_median", med(&RecoveryRun::compensate), "ms");
      row("recovery", params, "slowest_cleanup_median", med(&RecoveryRun::cleanup), "ms");
      row("recovery", params, "slowest_report_median", med(&RecoveryRun::report), "ms");
      row("recovery", params, "adopted_over_standby", static_cast<double>(over) / static_cast<double>(all.size()),
          "orphans per run");
      row("recovery", params, "floor_overall_median", median(floor_overall), "ms");
      row("recovery", params, "floor_last_detect_median", median(floor_detect), "ms");
    }
  }
}

// ---- perturbation ----

void bench_perturbation(bool quick) {
  const int seconds = quick ? 8 : 30;
  const int kill_every = quick ? 3 : 6;
  const std::string run = "perturbation b:8^2";
  auto topology = canopy::generate_topology("b:8^2");
  if (!topology) throw Failure(topology.error());
  RecordDir record;
  auto net = launch(*topology);
  start_union(*net, 100, seconds * 1000, record);
  std::vector<Rank> commnodes;
  for (const auto& n : topology->nodes()) {
    if (n.role == canopy::Role::commnode) commnodes.push_back(n.rank);
  }
  std::mt19937 random(42);
  std::shuffle(commnodes.begin(), commnodes.end(), random);
  Rows rows;
  UnionResult got;
  std::set<Rank> killed, reported_failed;
  const auto start = Clock::now();
  auto on_event = [&](const canopy::Event& e) {
    check_recovered(e, run);
    if (e.kind == canopy::Event::Kind::failure) {
      reported_failed.insert(e.rank);
      rows.add("perturbation", "b:8^2 rate=100Hz", "failure_at",
               std::chrono::duration<double>(Clock::now() - start).count(), "s");
    }
  };
  auto next_kill = start + std::chrono::seconds(kill_every);
  auto window_end = start + 250ms;
  std::size_t window_new = 0;
  while (Clock::now() - start < std::chrono::seconds(seconds)) {
    auto in = net->receive(10ms);
    if (!in) throw Failure(run + ": receive failed: " + in.error());
    if (*in) window_new += got.take((*in)->packet);
    while (auto e = net->next_event(0ms)) on_event(*e);
    auto now = Clock::now();
    if (now >= next_kill && !commnodes.empty()) {
      // A kill that finds no process would leave a figure without its failure.
      const Rank victim = commnodes.back();
      commnodes.pop_back();
      pid_t pid = canopy::testing::ProcessGuard::process_of_rank(victim);
      if (pid <= 0) throw Failure(run + ": no process of commnode " + std::to_string(victim) + " to kill");
      if (kill(pid, SIGKILL) != 0) {
        throw Failure(run + ": cannot kill commnode " + std::to_string(victim) + ": " + std::strerror(errno));
      }
      killed.insert(victim);
      next_kill += std::chrono::seconds(kill_every);
    }
    while (now >= window_end) {
      char params[64];
      std::snprintf(params, sizeof params, "b:8^2 rate=100Hz t=%.2f",
                    std::chrono::duration<double>(window_end - start).count());
      rows.add("perturbation", params, "new_integers_per_s", static_cast<double>(window_new) * 4.0, "1/s");
      window_new = 0;
      window_end += 250ms;
    }
  }
  finish_and_check_union(*net, got, record, run, 30s, on_event);
  const std::size_t planned = static_cast<std::size_t>((seconds - 1) / kill_every);
  if (killed.size() < planned) {
    throw Failure(run + ": " + std::to_string(killed.size()) + " of " + std::to_string(planned) + " kills made");
  }
  for (Rank r : killed) {
    if (!reported_failed.count(r)) throw Failure(run + ": the kill of commnode " + std::to_string(r) + " was not reported");
  }
  (void)net->shutdown();
  rows.print();
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  bool quick = false;
  std::string only;
  int reps = 5;
  std::vector<std::size_t> fanouts;  // Figure 6's victims; all four unless --fanouts
  std::vector<bool> modes{false, true};  // Figure 6 without standby links, then with
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      quick = true;
      reps = 1;
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--standby" && i + 1 < argc) {
      const std::string mode = argv[++i];
      if (mode == "off") {
        modes = {false};
      } else if (mode == "on") {
        modes = {true};
      } else if (mode == "both") {
        modes = {false, true};
      } else {
        std::fprintf(stderr, "canopy-recovery-bench: --standby takes off, on or both, not '%s'\n", mode.c_str());
        return 2;
      }
    } else if (a == "--timeline" && i + 1 < argc) {
      timeline = std::fopen(argv[++i], "w");
      if (!timeline) {
        std::fprintf(stderr, "canopy-recovery-bench: cannot write %s: %s\n", argv[i], std::strerror(errno));
        return 2;
      }
      std::fprintf(timeline, "system,fanout,rep,orphan,detect_ms,request_ms,answer_ms,state_ms,report_ms\n");
    } else if (a == "--fanouts" && i + 1 < argc) {
      std::stringstream list(argv[++i]);
      for (std::string f; std::getline(list, f, ',');) {
        const int n = std::atoi(f.c_str());
        if (n < 1 || n > 1024) {
          std::fprintf(stderr, "canopy-recovery-bench: --fanouts takes fan-outs from 1 to 1024, not '%s'\n", f.c_str());
          return 2;
        }
        fanouts.push_back(static_cast<std::size_t>(n));
      }
    } else {
      std::fprintf(stderr,
                   "usage: canopy-recovery-bench [--quick] [--only adopters|recovery|perturbation] [--reps N] "
                   "[--fanouts F,F,...] [--standby off|on|both] [--timeline FILE]\n");
      return 2;
    }
  }
  canopy::testing::ProcessGuard guard;
  std::printf("benchmark,params,metric,value,unit\n");
  try {
    if (only.empty() || only == "adopters") bench_adopters(quick);
    if (fanouts.empty()) fanouts = quick ? std::vector<std::size_t>{16} : std::vector<std::size_t>{16, 32, 64, 128};
    if (only.empty() || only == "recovery") bench_recovery(fanouts, reps, modes);
    if (only.empty() || only == "perturbation") bench_perturbation(quick);
  } catch (const Failure& e) {
    std::fprintf(stderr, "canopy-recovery-bench: FAILED %s\n", e.what());
    canopy::testing::ProcessGuard::kill_all();
    return 1;
  }
  if (timeline) std::fclose(timeline);
  auto left = canopy::testing::ProcessGuard::wait_for_none(10s);
  if (!left.empty()) {
    std::fprintf(stderr, "canopy-recovery-bench: %zu processes left over; killing them\n", left.size());
    canopy::testing::ProcessGuard::kill_all();
    return 1;
  }
  return 0;
}
