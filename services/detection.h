// DetectionService: the event detection service (docs/fault-tolerance.md).
//
// Every process watches its parent and its children. Loss of a connection is
// detected by the core, passively and at once; a hung peer is caught here:
// heartbeats go on links idle for a heartbeat interval, a peer silent for the
// suspect threshold is suspect, for the lost threshold lost, and its link is cut (a
// lost child process this node started is killed, so that it cannot wake up and
// rejoin a healed tree). Each change of a peer's state is logged. A child process
// this node started on its own host is not lost while the kernel shows it starved
// of CPU rather than hung: silent past the lost threshold, it spent at least half
// of the last (lost - suspect) waiting for a CPU, and has had less than kHungCpu of
// CPU since it turned suspect (docs/fault-tolerance.md, "Silence under load"). A
// process judges the parent that started it the same way, until it is adopted.
//
// It also reports the loss of a running process up to the front-end (NodeLost); at
// the root that is the observer's on_node_lost.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/service_context.h"
#include "detection.capnp.h"

namespace canopy::services {

namespace asio = boost::asio;

enum class PeerState : std::uint8_t { alive, suspect, lost };
const char* to_string(PeerState state);

// The state a peer silent for `silent` is in, under `fault`'s thresholds.
PeerState peer_state_after(std::chrono::milliseconds silent, const FaultToleranceOptions& fault);

// Whether a peer silent past the lost threshold is starved on a loaded machine
// rather than hung, from its process's CPU account at the start (`before`) and the
// end (`after`) of `window`, and the CPU it had while silent before that
// (`ran_earlier`): it waited for a CPU for half the window or waits now, and has had
// less than `hung_cpu` since it fell silent (one that ran that long and said
// nothing hangs in a loop).
bool starved_not_hung(const core::CpuAccount& before, const core::CpuAccount& after,
                      std::chrono::nanoseconds window, std::chrono::nanoseconds ran_earlier,
                      std::chrono::nanoseconds hung_cpu);

class DetectionService final : public core::Service {
 public:
  // Root only.
  class Observer {
   public:
    virtual ~Observer() = default;
    virtual void on_node_lost(Rank rank, const std::string& reason) {}
  };

  DetectionService(core::ServiceContext& node, Observer* observer);

  core::ServiceId id() const override { return wire::detection::SERVICE_ID; }
  std::string_view name() const override { return "detection"; }
  void on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) override;
  void on_event(const core::NodeEvent& event) override;

  // What the service sees now, for tests and tools: the state of the parent and of
  // child `child` (alive until watched), and how many heartbeats this process has
  // sent (only idle links carry them).
  PeerState parent_state() const { return parent_; }
  PeerState child_state(std::size_t child) const {
    return below_ && child < below_->children.size() ? below_->children[child] : PeerState::alive;
  }
  std::uint64_t heartbeats_sent() const { return heartbeats_sent_; }

  // CPU a silent child may have had and still be called starved: one that ran this
  // long and said nothing hangs in a loop.
  static constexpr std::chrono::milliseconds kHungCpu{500};

 private:
  // The CPU account of a suspect child's process, to judge it at the lost
  // threshold: starved or hung.
  struct Starvation {
    std::optional<core::CpuAccount> mark;  // at suspect, then at each judgement
    NodeClock::time_point marked_at{};
    std::chrono::nanoseconds ran{0};  // since it turned suspect
    bool said = false;                // logged once a spell
    bool said_stopped = false;        // the same, for a stopped front-end
  };
  // Whether process `pid`, silent past the lost threshold, is starved (see above).
  bool starved(Starvation& s, pid_t pid, NodeClock::time_point now, const std::string& who,
               std::chrono::milliseconds silent);

  // Whether the front-end's process `pid`, silent past the lost threshold, is
  // stopped (SIGSTOP, Ctrl-Z, a debugger): alive, and waited for.
  bool stopped_front_end(Starvation& s, pid_t pid, const std::string& who);

  void tick();
  void arm();
  // Judges the peer at the other end of `link`: child `child`, or the parent (none).
  // `process`: the peer's process on this host, when this node knows it;
  // `front_end`: that process is the front-end's, waited for while it is stopped.
  // A peer found lost is cut off through the node (ServiceContext::cut_child,
  // cut_parent); an idle link gets a heartbeat.
  struct Whom {
    std::string_view kind;  // "parent", "child"
    Rank rank;
  };
  void watch(const transport::Link& link, std::optional<std::size_t> child, PeerState& state, Whom whom,
             NodeClock::time_point now, std::optional<pid_t> process, Starvation& starvation, bool front_end = false);
  void report_node_lost(Rank rank, const std::string& reason);

  core::ServiceContext& node_;
  Observer* observer_;
  Timer timer_;
  bool started_ = false;
  PeerState parent_ = PeerState::alive;
  std::unique_ptr<Starvation> parent_starving_;  // kept while the parent is suspect, as a child's
  // The process that started this one, while it is the parent (not after an
  // adoption).
  std::optional<pid_t> parent_process_;
  // What it watches of its children: made at the first child, never at a back-end
  // (72 bytes in place until stop 77: docs/scale.md, "A back-end's own state").
  struct Below {
    std::vector<PeerState> children;  // by child index
    // Only for the children suspect now, by child index: one for every child, as it
    // was, cost a commnode about 85 bytes a child for the rare one that falls silent.
    std::map<std::size_t, Starvation> starving;
  };
  std::unique_ptr<Below> below_;
  std::uint64_t heartbeats_sent_ = 0;
  // This process's own gaps: a tick that came later than `suspect` after the one
  // before means this process did not run meanwhile (stopped, or starved of CPU).
  // Its peers' messages may be waiting unread: silence is counted from `resumed_`
  // at the earliest.
  NodeClock::time_point last_tick_{};
  NodeClock::time_point resumed_{};
};

}  // namespace canopy::services
