#include "services/detection.h"

#include <unistd.h>

#include <cstdlib>

#include "core/log.h"
#include "core/parent_link.h"

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

bool starved_not_hung(const core::CpuAccount& before, const core::CpuAccount& after,
                      std::chrono::nanoseconds window, std::chrono::nanoseconds ran_earlier,
                      std::chrono::nanoseconds hung_cpu) {
  const auto waited = after.waited - before.waited;
  const auto ran = ran_earlier + (after.ran - before.ran);
  return (waited * 2 >= window || after.runnable) && ran < hung_cpu;
}

PeerState peer_state_after(std::chrono::milliseconds silent, const FaultToleranceOptions& fault) {
  return silent >= fault.lost ? PeerState::lost : silent >= fault.suspect ? PeerState::suspect : PeerState::alive;
}

DetectionService::DetectionService(core::ServiceContext& node, Observer* observer)
    : node_(node), observer_(observer), timer_(node.io()) {
  // Started by a Canopy parent (it set where to connect): the parent process, or a
  // wrapper that idles (ssh, srun), which is never found starved.
  if (const pid_t parent = getppid(); parent > 1 && std::getenv(core::kEnvParent)) parent_process_ = parent;
}

void DetectionService::on_event(const core::NodeEvent& event) {
  if (auto* started = std::get_if<core::events::Started>(&event)) {
    if (started->error.empty() && node_.plan().fault.enabled && !started_) {
      started_ = true;
      arm();
    }
  } else if (auto* lost = std::get_if<core::events::ChildLost>(&event)) {
    if (!lost->during_launch) report_node_lost(lost->rank, lost->reason);
  } else if (auto* adopted = std::get_if<core::events::ChildAdopted>(&event)) {
    if (below_ && adopted->child < below_->children.size()) below_->children[adopted->child] = PeerState::alive;
  } else if (auto* connected = std::get_if<core::events::ChildConnected>(&event)) {
    if (below_ && connected->child < below_->children.size()) {
      below_->children[connected->child] = PeerState::alive;  // a rejoin
    }
  } else if (std::holds_alternative<core::events::Adopted>(event)) {
    parent_ = PeerState::alive;
    parent_starving_.reset();
    parent_process_.reset();  // a new parent, whose process is not known here
  } else if (std::holds_alternative<core::events::Stopping>(event)) {
    timer_.cancel();
  } else if (auto* changed = std::get_if<core::events::TreeChanged>(&event);
             changed && changed->kind == core::events::TreeChanged::Kind::failure && !node_.is_root()) {
    // Below the root, a failure is public as the live tree applies it; the root's come
    // up in order with the data (report_node_lost).
    Event failure;
    failure.kind = Event::Kind::failure;
    failure.rank = changed->rank;
    failure.reason = changed->reason;
    node_.publish(std::move(failure));
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
  const auto& fault = node_.plan().fault;
  if (last_tick_ != NodeClock::time_point{} && now - last_tick_ > fault.suspect) {
    resumed_ = now;
    const auto gap = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_tick_);
    if (gap >= fault.lost) {
      log().warn("this process did not run for {} ms (it was stopped, or starved of CPU): its peers' silence over "
                 "that time is not held against them",
                 gap.count());
    }
  }
  last_tick_ = now;
  if (const auto* parent = node_.parent_link(); parent && node_.phase() != core::Phase::orphaned) {
    const Rank rank = node_.parent_rank();
    // Still the process that started this one (an orphaned process is given to init).
    const bool started_us = parent_process_ && getppid() == *parent_process_;
    Starvation fresh;
    watch(*parent, std::nullopt, parent_, {"parent", rank}, now, started_us ? parent_process_ : std::nullopt,
          parent_starving_ ? *parent_starving_ : fresh, rank == node_.root_rank());
    if (parent_ != PeerState::suspect) parent_starving_.reset();
    else if (!parent_starving_) parent_starving_ = std::make_unique<Starvation>(std::move(fresh));
  }
  const auto& children = node_.children();
  if (!children.empty() && !below_) below_ = std::make_unique<Below>();
  if (below_) below_->children.resize(children.size(), PeerState::alive);
  for (std::size_t i = 0; i < children.size(); ++i) {
    const auto& child = children[i];
    if (!child.link || !child.link->is_open()) continue;
    const auto process = child.process && child.process->running() ? std::optional(child.process->pid()) : std::nullopt;
    // A child's account is kept while it is suspect, and only then.
    auto& starving = below_->starving;
    const auto found = starving.find(i);
    Starvation fresh;
    watch(*child.link, i, below_->children[i], {"child", child.rank}, now, process,
          found == starving.end() ? fresh : found->second);
    if (below_->children[i] != PeerState::suspect) {
      if (found != starving.end()) starving.erase(found);
    } else if (found == starving.end()) {
      starving.emplace(i, std::move(fresh));
    }
  }
  arm();
}

void DetectionService::watch(const transport::Link& link, std::optional<std::size_t> child, PeerState& state,
                             Whom whom, NodeClock::time_point now, std::optional<pid_t> process,
                             Starvation& starvation, bool front_end) {
  const auto& fault = node_.plan().fault;
  // Named only when something is said of it: describing a peer reads the tree, which
  // a back-end holds folded (core/folded_part.h), and costs a string each tick.
  const auto who = [&] { return std::string(whom.kind) + " " + node_.describe(whom.rank); };
  // Judged before this tick's heartbeat goes out: a link declared lost says so to
  // its peer only if nothing is being written on it (TcpLink::abort_with).
  const auto heartbeat = [&] {
    if (now - link.last_sent() < fault.heartbeat) return;
    core::Outgoing beat(node_.identity(), id(), Kind::HEARTBEAT);
    if (child) {
      node_.send_to_child(*child, beat);
    } else {
      node_.send_up(beat);
    }
    ++heartbeats_sent_;
  };
  const auto silent =
      std::chrono::duration_cast<std::chrono::milliseconds>(now - std::max(link.last_received(), resumed_));
  PeerState next = peer_state_after(silent, fault);
  // Its bytes wait unread: it spoke, and this process is behind (a stopped peer
  // just continued, or this loop ran its timer first). Judged again next tick.
  if (next == PeerState::lost && link.input_waiting()) next = PeerState::suspect;
  if (next == PeerState::alive) {
    starvation = {};
  } else if (process) {
    if (state == PeerState::alive) {
      starvation.mark = core::cpu_account(*process);
      starvation.marked_at = now;
    }
    if (next == PeerState::lost &&
        ((front_end && stopped_front_end(starvation, *process, who())) ||
         starved(starvation, *process, now, who(), silent))) {
      next = PeerState::suspect;
    }
  }
  if (next == state) return heartbeat();
  log().warn("{}: {} -> {} (silent for {} ms)", who(), to_string(state), to_string(next), silent.count());
  state = next;
  if (next != PeerState::lost) return heartbeat();
  const std::string why = "no message or heartbeat for " + std::to_string(silent.count()) + " ms";
  if (child) {
    // Fenced: a hung process must not wake up later and rejoin a healed tree.
    return node_.cut_child(*child, why, /*say_why=*/false, /*fence=*/true);
  }
  // The parent hears it was declared lost, should it be only stalled and read it
  // when it wakes: it then leaves the tree instead of reporting its children, who
  // are being adopted elsewhere, as lost (Node::on_failure_report). Handed to the
  // socket if it takes it at once: waiting for a parent that may never read again
  // would hold up this process's recovery.
  const Rank parent = node_.parent_rank();
  core::Message report(node_.identity());
  auto f = report.body().initFailureReport();
  f.setRank(parent);
  f.setReason(node_.describe(node_.identity().rank) + " heard " + why);
  f.setIncarnation(node_.parent_incarnation());
  f.setToTheLost(true);
  node_.cut_parent(report, why);
}

bool DetectionService::starved(Starvation& s, pid_t pid, NodeClock::time_point now, const std::string& who,
                               std::chrono::milliseconds silent) {
  const auto& fault = node_.plan().fault;
  if (!s.mark) return false;  // no statistics: silence alone decides
  const auto window = now - s.marked_at;
  if (window * 2 < fault.lost - fault.suspect) return true;  // judged over a window
  const auto account = core::cpu_account(pid);
  if (!account) return false;
  const bool starved = starved_not_hung(*s.mark, *account, window, s.ran, kHungCpu);
  const auto ran = account->ran - s.mark->ran;
  const auto waited = account->waited - s.mark->waited;
  s.ran += ran;
  s.mark = account;
  s.marked_at = now;
  if (starved && !s.said) {
    s.said = true;
    log().warn("{}: silent for {} ms, but it waited {} of the last {} ms for a CPU{} and ran {} ms: starved on a "
               "loaded machine, not hung; still watching it",
               who, silent.count(), std::chrono::duration_cast<std::chrono::milliseconds>(waited).count(),
               std::chrono::duration_cast<std::chrono::milliseconds>(window).count(),
               account->runnable ? " (and waits now)" : "",
               std::chrono::duration_cast<std::chrono::milliseconds>(ran).count());
  }
  return starved;
}

bool DetectionService::stopped_front_end(Starvation& s, pid_t pid, const std::string& who) {
  const auto account = core::cpu_account(pid);
  if (!account || !account->stopped) return false;
  if (!s.said_stopped) {
    s.said_stopped = true;
    log().warn("{} is stopped (SIGSTOP, Ctrl-Z or a debugger), not dead: the tree waits for it to continue", who);
  }
  return true;
}

void DetectionService::report_node_lost(Rank rank, const std::string& reason) {
  if (node_.is_root()) {
    if (observer_) observer_->on_node_lost(rank, reason);
    Event failure;
    failure.kind = Event::Kind::failure;
    failure.rank = rank;
    failure.reason = reason;
    node_.publish(std::move(failure));
    return;
  }
  core::Outgoing message(node_.identity(), id(), Kind::NODE_LOST);
  auto l = message.init<wire::detection::NodeLost>();
  l.setRank(rank);
  l.setReason(reason);
  node_.send_up(message);
}

}  // namespace canopy::services
