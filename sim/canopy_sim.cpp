// canopy-sim: every process of a Canopy tree in this one process, on virtual time,
// over links of memory: the node core and services that ship, measured at sizes no
// machine here can start as processes (docs/simulation.md).
//
//   canopy-sim --tree SPEC [--kill-backends N] [--kill-commnodes N]
//              [--latency-us L] [--cpu-us C] [--log-level LEVEL]
//
// Launches the tree, runs one reduction wave (a sum), kills N back-ends one at a
// time (each time until every live back-end holds the view without it), then N
// commnodes (each time until every orphan is adopted), runs a last wave and checks
// its sum, and prints one JSON object. Exit status 1, with the reason, if any of it
// fails.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "canopy/topology.h"
#include "core/log.h"
#include "core/tree_news.h"
#include "filters/filter.h"
#include "services/runtime.h"
#include "sim/heap_account.h"
#include "sim/heap_sites.h"
#include "sim/simulator.h"

namespace canopy::sim {
namespace {

using std::chrono::microseconds;

struct RootRecorder : core::Node::Observer,
                      services::LaunchService::Observer,
                      services::StreamService::Observer,
                      services::RecoveryService::Observer,
                      membership::MembershipService::Observer {
  void on_launch_failed(Rank rank, const std::string& why) override { launch_failures[rank] = why; }
  void on_ready() override { ready = true; }
  void on_stream_ack(StreamId stream, const std::string& error) override { acks[stream] = error; }
  void on_stream_error(StreamId, const std::string& error) override { errors.push_back(error); }
  void on_upstream(StreamId, Packet&& packet, const services::WaveVerdict& wave) override {
    upstream.push_back(std::move(packet));
    waves.push_back(wave);
  }
  void on_recovered(const Event& report) override { recovered.push_back(report); }
  void on_view(const membership::ViewChange& change) override { views.push_back(change); }

  std::map<Rank, std::string> launch_failures;
  bool ready = false;
  std::map<StreamId, std::string> acks;
  std::vector<std::string> errors;
  std::vector<Packet> upstream;
  std::vector<services::WaveVerdict> waves;
  std::vector<Event> recovered;
  std::vector<membership::ViewChange> views;
};

// The tree: one member per live process, started by its parent (the simulator is
// the launch service's Launcher, as the tests' TreeHarness is).
class SimTree final : public services::Launcher {
 public:
  SimTree(Topology topology, Simulator& sim, FaultToleranceOptions fault, std::optional<Rank> traced)
      : topology_(std::move(topology)), sim_(sim), fault_(fault), traced_(traced) {}

  struct Member {
    boost::asio::io_context io{1};
    ProcessId process = kNoProcess;
    std::unique_ptr<services::Runtime> runtime;
  };

  Result<void> start_root() {
    core::LaunchPlan plan;
    plan.startup_timeout = std::chrono::seconds(30);
    plan.fault = fault_;
    Member& root = add(topology_.root().rank, Role::frontend);
    ChargeHeap charge(root.process);
    core::ScratchPool::Use scratch(sim_.scratch(root.process));
    return root.runtime->node.start_as_root(topology_, plan);
  }

  Result<std::unique_ptr<core::ChildProcess>> start(core::ServiceContext& parent, Rank rank) override {
    Member& m = add(rank, topology_.at(rank).role);
    ChargeHeap charge(m.process);
    core::ScratchPool::Use scratch(sim_.scratch(m.process));
    core::ParentLink link{.address = "sim", .port = parent.listen_port()};
    if (auto started = m.runtime->node.start_as_child(link); !started) return Error{started.error()};
    return std::unique_ptr<core::ChildProcess>();  // no OS process to watch
  }

  void kill(Rank rank) {
    auto it = members_.find(rank);
    if (it == members_.end()) return;
    sim_.remove(it->second->process);
    ChargeHeap nobody(kNobody);
    members_.erase(it);  // its links close: the peers read an end of file
  }

  bool alive(Rank rank) const { return members_.count(rank) != 0; }
  Member& member(Rank rank) { return *members_.at(rank); }
  const std::map<Rank, std::unique_ptr<Member>>& members() const { return members_; }
  RootRecorder& root_heard() { return root_heard_; }
  const Topology& topology() const { return topology_; }

 private:
  Member& add(Rank rank, Role role) {
    ChargeHeap sims_own(kNobody);
    auto& slot = members_[rank];
    const auto process = static_cast<ProcessId>(sim_.size());
    if (rank == traced_) trace_heap_sites(process);
    ChargeHeap charge(process);  // what the process holds from its start
    slot = std::make_unique<Member>();
    slot->process = sim_.add(slot->io, std::string(role == Role::frontend ? "front-end " : role == Role::commnode ? "commnode " : "back-end ") + std::to_string(rank));
    core::NodeIdentity identity{.rank = rank, .role = role, .network_id = 0x51a0000000000001, .incarnation = 0};
    services::Observers observers;
    if (role == Role::frontend) {
      observers.node = &root_heard_;
      observers.launch = &root_heard_;
      observers.streams = &root_heard_;
      observers.recovery = &root_heard_;
      observers.membership = &root_heard_;
    }
    slot->runtime = std::make_unique<services::Runtime>(slot->io, identity, filters_, observers, this,
                                                        &sim_.fabric(slot->process));
    return *slot;
  }

  Topology topology_;
  Simulator& sim_;
  FaultToleranceOptions fault_;
  std::optional<Rank> traced_;
  filters::FilterRegistry filters_ = filters::FilterRegistry::with_builtins();  // shared: code, not state
  std::map<Rank, std::unique_ptr<Member>> members_;
  RootRecorder root_heard_;
};

struct SimOptions {
  std::string tree;
  int kill_backends = 0;
  int kill_commnodes = 0;
  long latency_us = 0;
  long cpu_us = 0;
  std::optional<Rank> heap_sites;  // the process whose live blocks are listed by call site
};

// Traffic of every process ever, at one moment.
std::vector<Traffic> snapshot(const Simulator& sim) {
  std::vector<Traffic> out(sim.size());
  for (ProcessId p = 0; p < sim.size(); ++p) out[p] = sim.traffic(p);
  return out;
}

// What happened between two snapshots.
struct Window {
  std::uint64_t bytes = 0, messages = 0;
  std::uint64_t reached = 0;       // processes that received anything
  std::uint64_t root_messages = 0;  // messages the front-end received
};
Window between(const std::vector<Traffic>& before, const std::vector<Traffic>& after, ProcessId root) {
  Window w;
  for (ProcessId p = 0; p < after.size(); ++p) {
    const Traffic b = p < before.size() ? before[p] : Traffic{};
    w.bytes += after[p].bytes_sent - b.bytes_sent;
    w.messages += after[p].messages_sent - b.messages_sent;
    const auto got = after[p].messages_received - b.messages_received;
    if (got > 0) ++w.reached;
    if (p == root) w.root_messages += got;
  }
  return w;
}

double ms(microseconds us) { return static_cast<double>(us.count()) / 1000.0; }

class Run {
 public:
  Run(const SimOptions& options, Topology topology)
      : options_(options),
        sim_({.latency = microseconds(options.latency_us), .cpu = microseconds(options.cpu_us)}),
        tree_(std::move(topology), sim_, fault(), options.heap_sites) {}

  int go() {
    const auto wall_start = std::chrono::steady_clock::now();
    const auto& topology = tree_.topology();
    const Rank root = topology.root().rank;
    auto& heard = tree_.root_heard();
    // ---- launch ----
    if (auto started = tree_.start_root(); !started) return fail("the front-end did not start: " + started.error());
    const bool up = sim_.run_until([&] { return heard.ready || !heard.launch_failures.empty(); }, kLimit);
    if (!heard.launch_failures.empty()) {
      return fail("launch failed: rank " + std::to_string(heard.launch_failures.begin()->first) + ": " +
                  heard.launch_failures.begin()->second);
    }
    if (!up) return fail("the tree was not up within " + std::to_string(kLimit.count() / 1000000) + " s of virtual time");
    const auto ready_at = sim_.now();
    quiet();
    const auto after_launch = snapshot(sim_);
    const auto launch = between({}, after_launch, root_process());
    std::uint64_t backend_received = 0;  // the most any back-end received
    for (Rank b : topology.backends()) {
      backend_received = std::max(backend_received, after_launch[tree_.member(b).process].bytes_received);
    }
    json_ += "\"launch\":{\"bytes\":" + std::to_string(launch.bytes) + ",\"messages\":" +
             std::to_string(launch.messages) + ",\"backend_received_max\":" + std::to_string(backend_received) +
             ",\"virtual_ms\":" + number(ms(ready_at)) +
             ",\"quiet_virtual_ms\":" + number(ms(sim_.now())) + "}";
    rest();
    // ---- the first wave ----
    backends_ = topology.backends();
    if (auto e = open_stream(); !e.empty()) return fail(e);
    if (auto e = wave(); !e.empty()) return fail("first wave: " + e);
    note_state("after the first wave");
    // ---- back-end failures, one at a time ----
    std::vector<Rank> victims = spread(backends_, options_.kill_backends);
    Sums be_sums;
    for (Rank victim : victims) {
      const auto before = snapshot(sim_);
      const auto killed_at = sim_.now();
      const auto view_before = tree_.member(root).runtime->membership.view_id();
      tree_.kill(victim);
      std::erase(backends_, victim);
      std::size_t checked = 0;  // back-ends known to hold the new view
      const bool stable = sim_.run_until(
          [&] {
            // By id and ranges (MembershipService::view() lists every member: O(N)
            // a call, which made this check O(N^2) over a failure).
            const auto& at_root = tree_.member(root).runtime->membership;
            if (at_root.view_id() == view_before || at_root.members().contains(victim)) return false;
            for (; checked < backends_.size(); ++checked) {
              if (tree_.member(backends_[checked]).runtime->membership.view_id() != at_root.view_id()) return false;
            }
            return true;
          },
          kLimit);
      if (!stable) return fail("the view without back-end " + std::to_string(victim) + " did not reach every back-end");
      const auto ts = sim_.now() - killed_at;
      quiet();
      auto w = between(before, snapshot(sim_), root_process());
      be_sums.add(w, ts);
    }
    json_ += ",\"backend_failure\":" + be_sums.json(true);
    // ---- commnode failures, one at a time ----
    Sums cn_sums;
    for (Rank victim : spread(leaf_commnodes(), options_.kill_commnodes)) {
      std::vector<Rank> orphans;
      for (Rank c : topology.at(victim).children) {
        if (tree_.alive(c)) orphans.push_back(c);
      }
      const auto before = snapshot(sim_);
      const auto killed_at = sim_.now();
      const std::size_t recovered_before = heard.recovered.size();
      tree_.kill(victim);
      const bool healed = sim_.run_until(
          [&] {
            std::set<Rank> adopted;
            for (std::size_t i = recovered_before; i < heard.recovered.size(); ++i) adopted.insert(heard.recovered[i].rank);
            return std::all_of(orphans.begin(), orphans.end(), [&](Rank o) { return adopted.count(o) != 0; });
          },
          kLimit);
      if (!healed) return fail("the orphans of commnode " + std::to_string(victim) + " were not all adopted");
      const auto took = sim_.now() - killed_at;
      quiet();
      auto w = between(before, snapshot(sim_), root_process());
      if (w.root_messages > 0) --w.reached;  // the front-end is not counted (issue 47's bound is besides it)
      cn_sums.add(w, took);
    }
    json_ += ",\"commnode_failure\":" + cn_sums.json(false);
    if (!victims.empty() || options_.kill_commnodes > 0) rest();
    // ---- the last wave ----
    const auto last = wave();
    note_state("after the last wave");
    json_ = "{\"processes\":" + std::to_string(topology.size()) + ",\"backends\":" +
            std::to_string(topology.backends().size()) + "," + json_;
    json_ += ",\"state_bytes\":{\"frontend\":" + std::to_string(state_.frontend) + ",\"commnode_max\":" +
             std::to_string(state_.commnode_max) + ",\"backend_max\":" + std::to_string(state_.backend_max) +
             ",\"adopted_backend_max\":" + std::to_string(state_.adopted_backend_max) +
             ",\"commnode_max_children\":" + std::to_string(state_.commnode_max_children) +
             ",\"commnode_max_rank\":" + std::to_string(state_.commnode_max_rank) + "}";
    json_ += ",\"last_wave_ok\":" + std::string(last.empty() ? "true" : "false");
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    json_ += ",\"virtual_ms\":" + number(ms(sim_.now())) + ",\"process_runs\":" + std::to_string(sim_.runs()) +
             ",\"wall_seconds\":" + number(wall) + ",\"peak_rss_mb\":" + number(usage.ru_maxrss / 1024.0) + "}";
    std::printf("%s\n", json_.c_str());
    if (!last.empty()) return fail("last wave: " + last);
    return 0;
  }

 private:
  static constexpr microseconds kLimit = std::chrono::seconds(600);

  // Crashes only: a killed process's links close, and its peers read an end of file
  // at once. Heartbeats are an hour apart so that nothing periodic falls in what is
  // measured.
  static FaultToleranceOptions fault() {
    FaultToleranceOptions f;
    f.heartbeat = std::chrono::hours(1);
    f.suspect = std::chrono::hours(2);
    f.lost = std::chrono::hours(3);
    f.broadcast_log_bytes = 0;
    return f;
  }

  struct Sums {
    std::uint64_t count = 0;
    double bytes = 0, messages = 0, reached = 0, root_messages = 0, took = 0;
    // `took`: Ts for a back-end, the time to the last recovery for a commnode.
    void add(const Window& w, microseconds took_us) {
      ++count;
      bytes += w.bytes;
      messages += w.messages;
      reached += w.reached;
      root_messages += w.root_messages;
      took += ms(took_us);
    }
    std::string json(bool backend) const {
      const double n = count ? double(count) : 1.0;
      std::string out = "{\"count\":" + std::to_string(count) + ",\"bytes\":" + number(bytes / n) +
                        ",\"messages\":" + number(messages / n) + ",\"processes_reached\":" + number(reached / n) +
                        ",\"root_messages\":" + number(root_messages / n);
      out += std::string(backend ? ",\"ts_virtual_ms\":" : ",\"virtual_ms\":") + number(took / n);
      return out + "}";
    }
  };

  static std::string number(double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", x);
    return buf;
  }

  ProcessId root_process() { return tree_.member(tree_.topology().root().rank).process; }

  // Runs until nothing is in flight.
  // Nothing in flight, and no news held back: a node sends its back-end children the
  // adoptions it learns in batches, core::TreeNews::kLeafWindow after the first, which
  // belong to the change measured (the news of a commnode's failure was counted with
  // the next one's, or not at all).
  void quiet() {
    sim_.run_until_quiet(kLimit);
    const auto settled = sim_.now() + core::TreeNews::kLeafWindow + std::chrono::milliseconds(50);
    sim_.run_until([&] { return sim_.now() >= settled; }, kLimit);
    sim_.run_until_quiet(kLimit);
  }

  // Parts unfolded (a commnode's through launch, as the endpoints come down; an
  // adopter's and its adopted back-ends' in a heal) fold again once left alone for
  // Node::kFoldAgainAfter, looked at that often: what is measured is the tree at
  // rest, not in the seconds after its launch or a heal (core/folded_part.h).
  void rest() {
    const auto rested = sim_.now() + 2 * core::Node::kFoldAgainAfter + std::chrono::seconds(1);
    sim_.run_until([&] { return sim_.now() >= rested; }, kLimit);
    quiet();
  }

  // `count` of `ranks`, evenly spread.
  static std::vector<Rank> spread(const std::vector<Rank>& ranks, int count) {
    std::vector<Rank> out;
    if (count <= 0 || ranks.empty()) return out;
    const auto n = std::min<std::size_t>(static_cast<std::size_t>(count), ranks.size());
    for (std::size_t i = 0; i < n; ++i) out.push_back(ranks[(2 * i + 1) * ranks.size() / (2 * n)]);
    return out;
  }

  std::vector<Rank> leaf_commnodes() const {
    std::vector<Rank> out;
    for (const auto& n : tree_.topology().nodes()) {
      if (n.role != Role::commnode) continue;
      bool leaf = !n.children.empty();
      for (Rank c : n.children) leaf = leaf && tree_.topology().at(c).role == Role::backend;
      if (leaf) out.push_back(n.rank);
    }
    return out;
  }

  std::string open_stream() {
    services::StreamSpec spec;
    spec.id = kStream;
    spec.backends = core::RankSet::of(tree_.topology().backends());
    spec.upstream_filter = "sum";
    spec.sync = SyncMode::wait_for_all;
    auto& root = tree_.member(tree_.topology().root().rank);
    sim_.post(root.process, [&root, spec] { root.runtime->streams.create_stream(spec); });
    auto& heard = tree_.root_heard();
    if (!sim_.run_until([&] { return heard.acks.count(kStream) != 0; }, kLimit)) return "the stream was never acknowledged";
    if (!heard.acks[kStream].empty()) return "the stream was refused: " + heard.acks[kStream];
    return {};
  }

  // Every live back-end sends its rank; the front-end's result must be their sum,
  // complete.
  std::string wave() {
    auto& heard = tree_.root_heard();
    const std::size_t before = heard.upstream.size();
    std::int64_t expected = 0;
    for (Rank b : backends_) {
      expected += b;
      auto& m = tree_.member(b);
      sim_.post(m.process, [&m, b] { m.runtime->streams.send_up(kStream, Packet(0, {std::int64_t{b}})); });
    }
    if (!sim_.run_until([&] { return heard.upstream.size() > before; }, kLimit)) return "no result came";
    quiet();
    if (heard.upstream.size() != before + 1) {
      return std::to_string(heard.upstream.size() - before) + " results came, not one";
    }
    const auto& values = heard.upstream.back().values();
    const auto* sum = values.empty() ? nullptr : std::get_if<std::int64_t>(&values[0]);
    if (!sum) return "the result holds no integer: " + heard.upstream.back().format();
    if (*sum != expected) return "sum " + std::to_string(*sum) + ", expected " + std::to_string(expected);
    if (!heard.waves.back().complete) return "the wave is not complete";
    return {};
  }

  struct State {
    std::int64_t frontend = 0, commnode_max = 0, backend_max = 0, adopted_backend_max = 0;
    std::size_t commnode_max_children = 0;
    Rank commnode_max_rank = 0;  // to look at with --heap-sites
  };
  void note_state(const std::string& when) {
    if (options_.heap_sites) {
      ChargeHeap nobody(kNobody);
      if (tree_.alive(*options_.heap_sites)) {
        print_heap_sites(stderr, "rank " + std::to_string(*options_.heap_sites) + " " + when);
      } else {
        std::fprintf(stderr, "canopy-sim: heap sites %s: rank %u is not alive\n", when.c_str(), *options_.heap_sites);
      }
    }
    for (const auto& [rank, m] : tree_.members()) {
      const std::int64_t bytes = heap_bytes(m->process);
      switch (tree_.topology().at(rank).role) {
        case Role::frontend: state_.frontend = std::max(state_.frontend, bytes); break;
        case Role::commnode:
          if (bytes > state_.commnode_max) {
            state_.commnode_max = bytes;
            state_.commnode_max_children = m->runtime->node.children().size();
            state_.commnode_max_rank = rank;
          }
          break;
        case Role::backend: {
          // A back-end whose parent failed was adopted, and unfolded its part of the
          // tree to choose its adopter (core/folded_part.h): counted apart.
          const auto parent = tree_.topology().at(rank).parent;
          auto& most = parent && !tree_.alive(*parent) ? state_.adopted_backend_max : state_.backend_max;
          most = std::max(most, bytes);
          break;
        }
      }
    }
  }

  int fail(const std::string& why) {
    std::fprintf(stderr, "canopy-sim: %s (at %.3f ms of virtual time)\n", why.c_str(), ms(sim_.now()));
    return 1;
  }

  static constexpr StreamId kStream = 1;
  SimOptions options_;
  Simulator sim_;
  SimTree tree_;
  std::vector<Rank> backends_;  // the live ones
  std::string json_;
  State state_;
};

}  // namespace
}  // namespace canopy::sim

int main(int argc, char** argv) {
  using namespace canopy;
  sim::SimOptions options;
  std::string log_level = "error";
  CLI::App app{"canopy-sim: a whole Canopy tree in one process, on virtual time (docs/simulation.md)", "canopy-sim"};
  app.add_option("--tree", options.tree, "Tree to generate, as for canopy run (b:16^2, k:…, g:…)")->required();
  app.add_option("--kill-backends", options.kill_backends, "Back-ends to kill, one at a time")->check(CLI::NonNegativeNumber);
  app.add_option("--kill-commnodes", options.kill_commnodes, "Commnodes (parents of back-ends) to kill, one at a time, after the back-ends")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--latency-us", options.latency_us, "One-way latency of every frame, in virtual microseconds")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--cpu-us", options.cpu_us, "Virtual CPU time a process spends on each frame it receives")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--heap-sites", options.heap_sites,
                 "List on stderr what process RANK holds on the heap, by call site, after the first and last waves");
  app.add_option("--log-level", log_level, "Log level of every simulated process (default: error)");
  CLI11_PARSE(app, argc, argv);
  core::log().set_level(spdlog::level::from_str(log_level));
  auto topology = generate_topology(options.tree);
  if (!topology) {
    std::fprintf(stderr, "canopy-sim: --tree %s: %s\n", options.tree.c_str(), topology.error().c_str());
    return 2;
  }
  if (options.heap_sites && !topology->find(*options.heap_sites)) {
    std::fprintf(stderr, "canopy-sim: --heap-sites %u: no such rank in %s\n", *options.heap_sites, options.tree.c_str());
    return 2;
  }
  auto run = std::make_unique<sim::Run>(options, std::move(*topology));
  const int code = run->go();
  std::fflush(stdout);
  std::_Exit(code);  // tearing a million processes down is the kernel's job
}
