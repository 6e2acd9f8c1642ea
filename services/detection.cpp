#include "services/detection.h"

#include <signal.h>

#include "core/log.h"

namespace canopy::services {

using core::log;
using Kind = wire::detection::Kind;

const char* to_string(PeerState state) {
  switch (state) {
    case PeerState::alive: return "alive";
    case PeerState::suspect: return "suspect";
    case PeerState::lost: return "lost";
  }
  return "?";
}

PeerState peer_state_after(std::chrono::milliseconds silent, const FaultToleranceOptions& fault) {
  return silent >= fault.lost ? PeerState::lost : silent >= fault.suspect ? PeerState::suspect : PeerState::alive;
}

DetectionService::DetectionService(core::Node& node, Observer* observer)
    : node_(node), observer_(observer), timer_(node.io()) {}

void DetectionService::on_event(const core::NodeEvent& event) {
  if (auto* started = std::get_if<core::events::Started>(&event)) {
    if (started->error.empty() && node_.plan().fault.enabled && !started_) {
      started_ = true;
      arm();
    }
  } else if (auto* lost = std::get_if<core::events::ChildLost>(&event)) {
    if (!lost->during_launch) report_node_lost(lost->rank, lost->reason);
  } else if (auto* adopted = std::get_if<core::events::ChildAdopted>(&event)) {
    if (adopted->child < children_.size()) children_[adopted->child] = PeerState::alive;
  } else if (auto* connected = std::get_if<core::events::ChildConnected>(&event)) {
    if (connected->child < children_.size()) children_[connected->child] = PeerState::alive;  // a rejoin
  } else if (std::holds_alternative<core::events::Adopted>(event)) {
    parent_ = PeerState::alive;
  } else if (std::holds_alternative<core::events::Stopping>(event)) {
    timer_.cancel();
  }
}

void DetectionService::on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) {
  switch (static_cast<Kind>(kind)) {
    case Kind::HEARTBEAT:
      return;  // the link noted its arrival
    case Kind::NODE_LOST: {
      auto l = body.getAs<wire::detection::NodeLost>();
      return report_node_lost(l.getRank(), l.getReason());
    }
  }
  log().warn("ignoring detection message of unknown kind {}", kind);
}

void DetectionService::arm() {
  timer_.expires_after(node_.plan().fault.heartbeat / 2);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) tick();
  });
}

void DetectionService::tick() {
  if (node_.stopping()) return;
  const auto now = NodeClock::now();
  if (const auto& parent = node_.parent_link(); parent && node_.phase() != core::Phase::orphaned) {
    const Rank rank = node_.view()->parent(node_.identity().rank);
    watch(*parent, parent_, "parent " + node_.describe(rank), now, rank);
  }
  auto& children = node_.children();
  children_.resize(children.size(), PeerState::alive);
  for (std::size_t i = 0; i < children.size(); ++i) {
    auto& child = children[i];
    if (!child.link || !child.link->is_open()) continue;
    watch(*child.link, children_[i], "child " + node_.describe(child.rank), now);
    if (children_[i] == PeerState::lost && child.process && child.process->running()) {
      // Fence it: a hung process must not wake up later and rejoin a healed tree.
      child.process->kill(SIGKILL);
    }
  }
  arm();
}

void DetectionService::watch(transport::Link& link, PeerState& state, const std::string& who,
                             NodeClock::time_point now, std::optional<Rank> parent) {
  const auto& fault = node_.plan().fault;
  if (now - link.last_sent() >= fault.heartbeat) {
    core::Outgoing beat(node_.identity(), id(), Kind::HEARTBEAT);
    link.send(beat.builder());
    ++heartbeats_sent_;
  }
  const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - link.last_received());
  const PeerState next = peer_state_after(silent, fault);
  if (next == state) return;
  log().warn("{}: {} -> {} (silent for {} ms)", who, to_string(state), to_string(next), silent.count());
  state = next;
  if (next != PeerState::lost) return;
  const std::string why = "no message or heartbeat for " + std::to_string(silent.count()) + " ms";
  if (parent) {
    // The parent hears it was declared lost, should it be only stalled and read it
    // when it wakes: it then leaves the tree instead of reporting its children, who
    // are being adopted elsewhere, as lost (Node::on_failure_report). Handed to the
    // socket if it takes it at once: waiting for a parent that may never read again
    // would hold up this process's recovery.
    core::Message report(node_.identity());
    auto f = report.body().initFailureReport();
    f.setRank(*parent);
    f.setReason(node_.describe(node_.identity().rank) + " heard " + why);
    f.setIncarnation(node_.view()->incarnation(*parent));
    return link.abort_with(report.builder(), why);
  }
  link.abort(why);
}

void DetectionService::report_node_lost(Rank rank, const std::string& reason) {
  if (node_.is_root()) {
    if (observer_) observer_->on_node_lost(rank, reason);
    return;
  }
  core::Outgoing message(node_.identity(), id(), Kind::NODE_LOST);
  auto l = message.init<wire::detection::NodeLost>();
  l.setRank(rank);
  l.setReason(reason);
  node_.send_up(message);
}

}  // namespace canopy::services
