// TreeHarness: a whole Canopy tree inside the test process.
//
// Every process of a generated topology is a services::Runtime on an io_context of
// its own, all driven by the test thread (run_until polls them in turn), over real
// loopback sockets. A parent "launches" a child by creating its runtime (the
// harness is the launch service's Launcher). So that:
//   - kill(rank) is a crash: the process's runtime is destroyed, its sockets close,
//     and its io_context is destroyed with whatever handlers were pending;
//   - freeze(rank) is SIGSTOP: its io_context is no longer run (thaw() resumes it);
// and every process's events and reports are recorded for the test to read.
//
// Time is manual (canopy::ManualTime, transport/clock.h): it stands still while any
// process has work to do, and only when every running process is idle does it move,
// straight to the next timer that is due. Heartbeats, suspicion, adoption deadlines
// and wave time-outs of seconds thus take milliseconds of real time, and happen at
// the virtual time the options say, however loaded the machine is. Limits given to
// run_until() are virtual time.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "canopy/topology.h"
#include "filters/filter.h"
#include "services/runtime.h"
#include "transport/clock.h"

namespace canopy::testing {

// What one process heard from its node and services.
struct Recorder : core::Node::Observer,
                  services::LaunchService::Observer,
                  services::DetectionService::Observer,
                  services::StreamService::Observer,
                  services::RequestService::Observer,
                  services::RecoveryService::Observer,
                  membership::MembershipService::Observer,
                  membership::GossipService::Observer {
  void on_stopped(const std::string& why) override { stopped = why; }
  void on_event(const core::NodeEvent& event) override { events.push_back(event); }
  void on_public(const Event& event) override { published.push_back(event); }
  void on_launched(Rank rank) override { launched.insert(rank); }
  void on_launch_failed(Rank rank, const std::string& why) override { launch_failures[rank] = why; }
  void on_ready() override { ready = true; }
  void on_node_lost(Rank rank, const std::string& why) override { lost[rank] = why; }
  void on_stream_ack(StreamId stream, const std::string& error) override { acks[stream] = error; }
  void on_stream_error(StreamId, const std::string& error) override { errors.push_back(error); }
  void on_upstream(StreamId stream, Packet&& packet, const services::WaveVerdict& wave) override {
    upstream.push_back(std::move(packet));
    waves.push_back(wave);
    upstream_streams.push_back(stream);
  }
  void on_downstream(StreamId, Packet&& packet) override { downstream.push_back(std::move(packet)); }
  void on_request_ack(std::uint64_t request, const std::string& error) override { request_acks[request] = error; }
  void on_recovered(const Event& report) override { recovered.push_back(report); }
  void on_view(const membership::ViewChange& change) override { views.push_back(change); }
  void on_gossip_report(Rank rank, Rank detector, std::chrono::milliseconds) override {
    gossip_reports.emplace_back(rank, detector);
  }
  void on_confirmed(Rank rank, std::chrono::milliseconds silent) override { confirmed[rank] = silent; }
  void on_orphan_lost(Rank rank, const std::string&, std::chrono::milliseconds silent) override {
    orphans_lost[rank] = silent;
  }
  void on_promotion(std::vector<Event> events) override { promotion = std::move(events); }

  // The live-tree changes this process applied, in order.
  std::vector<core::events::TreeChanged> tree_changes() const;

  std::optional<std::string> stopped;
  std::vector<core::NodeEvent> events;
  std::vector<Event> published;  // every public event, as the program would hear it
  std::set<Rank> launched;
  std::map<Rank, std::string> launch_failures, lost;
  bool ready = false;
  std::map<StreamId, std::string> acks;
  std::vector<std::string> errors;
  std::vector<Packet> upstream, downstream;
  std::vector<services::WaveVerdict> waves;  // one per upstream packet
  std::vector<StreamId> upstream_streams;     // one per upstream packet: its stream
  std::map<std::uint64_t, std::string> request_acks;
  std::vector<Event> recovered;
  std::vector<membership::ViewChange> views;
  std::vector<std::pair<Rank, Rank>> gossip_reports;       // root: (failed, detector)
  std::map<Rank, std::chrono::milliseconds> confirmed;     // by this member's gossip
  std::map<Rank, std::chrono::milliseconds> orphans_lost;  // root: orphans nobody adopted, declared failed
  std::vector<Event> promotion;                             // a re-attached front-end's
  std::optional<std::string> reattached;                    // its outcome: "" or the error
};

class TreeHarness final : public services::Launcher {
 public:
  // A tree of generated shape `spec` ("b:2^2"), fault tolerance with `fault`'s
  // thresholds. `extra(rank, node)`, if given, makes a service of the test's own for
  // every node; the harness registers it before the node starts and owns it.
  using AddServices = std::function<std::unique_ptr<core::Service>(Rank, core::ServiceContext&)>;
  TreeHarness(const std::string& spec, FaultToleranceOptions fault, AddServices extra = {});
  ~TreeHarness() override;

  // Starts the root and runs until the tree is up and every process knows every
  // listening endpoint (true), or a launch fails or `limit` passes (false). In
  // attach mode (set before launch), the tree is up without its back-ends; each
  // comes with attach().
  bool launch(std::chrono::milliseconds limit = std::chrono::seconds(10));
  // After a launch() that was not up within its limit: runs on until it is (true),
  // as launch() does.
  bool until_up(std::chrono::milliseconds limit);
  // Process `rank`, once started, is frozen (as freeze()) until thawed: a subtree
  // that comes up late.
  void start_frozen(Rank rank) { start_frozen_.insert(rank); }
  void set_attach_mode() { attach_ = true; }
  // Every back-end holds the whole tree (LaunchPlan::whole_tree), not its part.
  void set_whole_tree() { whole_tree_ = true; }
  // Attach mode: starts back-end `rank`, which connects to its parent in the
  // topology (as canopy::Backend::attach does).
  void attach(Rank rank);

  // Runs every process that is not frozen until `done()` holds (true) or `limit` of
  // virtual time passes (false). Also false, with a test failure, if the tree is
  // never idle for a minute of real time (time could not move on: a busy loop).
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds limit);
  // Runs for `duration` of virtual time whatever happens.
  void run_for(std::chrono::milliseconds duration);
  // Virtual time since the harness was made.
  std::chrono::milliseconds elapsed() const;

  core::Node& node(Rank rank) { return member(rank).runtime->node; }
  services::Runtime& runtime(Rank rank) { return *member(rank).runtime; }
  Recorder& heard(Rank rank) { return member(rank).heard; }
  bool alive(Rank rank) const;
  bool frozen(Rank rank) { return member(rank).frozen; }
  const Topology& topology() const { return topology_; }
  Rank root() const { return topology_.root().rank; }

  void kill(Rank rank);
  // A new front-end process in place of the killed one asks `acceptor` to take it as
  // its parent (Node::reattach); heard(root()).reattached says how it went.
  void reattach_frontend(Rank acceptor);
  // Opens a stream over every back-end with upstream filter `filter` from the root,
  // and runs until the root has its acknowledgement (a test failure if it does not
  // come within 5 s or carries an error). Stream ids count up from 1.
  // `backends`: those of the stream, if not every one.
  StreamId open_stream(const std::string& filter, SyncMode sync = SyncMode::wait_for_all,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(1000),
                       const std::vector<Rank>& backends = {});
  void freeze(Rank rank);
  void thaw(Rank rank);

  Result<std::unique_ptr<core::ChildProcess>> start(core::ServiceContext& parent, Rank rank) override;

 private:
  struct Member {
    boost::asio::io_context io{1};
    Recorder heard;
    filters::FilterRegistry filters = filters::FilterRegistry::with_builtins();
    std::unique_ptr<services::Runtime> runtime;
    std::unique_ptr<core::Service> extra;
    bool frozen = false;
  };
  Member& member(Rank rank);
  Member& add(Rank rank, Role role);
  bool poll_all();

  ManualTime time_;
  const NodeClock::time_point epoch_ = NodeClock::now();
  // How far time moves when every process is idle and no timer is pending.
  static constexpr std::chrono::milliseconds kStep{1};

  Topology topology_;
  FaultToleranceOptions fault_;
  bool attach_ = false;
  bool whole_tree_ = false;
  AddServices extra_;
  std::uint64_t network_id_ = 0x5eed0000cafe0001;
  std::map<Rank, std::unique_ptr<Member>> members_;
  std::set<Rank> start_frozen_;
  StreamId next_stream_ = 1;
};

// The report `orphan` made of its own recovery (it reaches the root only through
// live ancestors), or null.
const Event* own_recovery(TreeHarness& tree, Rank orphan);
// Once the stream reopened after a healing, back-ends 0..count-1 each send b + 1 up
// `stream`: the root must get the whole sum of the wave within 5 s (a test failure
// if not).
void expect_whole_wave(TreeHarness& tree, StreamId stream, Rank count);

}  // namespace canopy::testing
