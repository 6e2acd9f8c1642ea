#include "core/node.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>

#include <capnp/serialize.h>

#include "core/auth.h"
#include "core/codec.h"
#include "core/log.h"
#include "transport/tcp_link.h"

namespace canopy::core {

using transport::Link;
using transport::TcpLink;
using Body = wire::Message::Body;
using Clock = std::chrono::steady_clock;

namespace {

// How long a stopping node lets its children exit before killing them. A parent
// must wait longer than its children do, or it would kill a commnode just before that
// commnode kills its own stubborn children, leaving them orphaned: so the grace grows
// by kStopGraceStep with each level of the subtree below the node.
constexpr auto kStopGrace = std::chrono::seconds(2);
constexpr auto kStopGraceStep = std::chrono::seconds(1);
// After a child's connection closes, how long to wait for its exit status so that the
// report can say "exited with status 3" rather than just "connection closed".
constexpr auto kExitStatusWait = std::chrono::milliseconds(300);

std::string role_name(Role role) {
  switch (role) {
    case Role::frontend: return "front-end";
    case Role::commnode: return "commnode";
    case Role::backend: return "back-end";
  }
  return "node";
}

}  // namespace

const char* to_string(Phase phase) {
  switch (phase) {
    case Phase::launching: return "launching";
    case Phase::running: return "running";
    case Phase::orphaned: return "orphaned";
    case Phase::stopping: return "stopping";
    case Phase::stopped: return "stopped";
  }
  return "?";
}

Node::Node(asio::io_context& io, NodeIdentity identity, Observer* observer, transport::Fabric* fabric)
    : io_(io),
      id_(identity),
      observer_(observer),
      fabric_(fabric),
      fold_timer_(io),
      connections_(io, *this) {}

Node::~Node() {
  if (parent_) parent_->detach();
  if (healing_) healing_->detach();
  if (auto* o = orphan(); o && o->trying) o->trying->detach();
  connections_.detach_all();
  for (auto& child : children_) {
    if (child.link) child.link->detach();
  }
  // ChildProcess destructors kill and reap whatever is still running.
}

Result<void> Node::add_service(Service& service) { return services_.add(service); }

void Node::set_phase(PhaseData next, std::string_view why) {
  const Phase from = phase();
  phase_ = std::move(next);
  log().info("phase: {} -> {} ({})", to_string(from), to_string(phase()), why);
}

void Node::emit(const NodeEvent& event) {
  services_.emit(event);
  if (observer_) observer_->on_event(event);
}

// What parent and children alike may send: a service's message, or a report of the
// live tree. False for anything else.
bool Node::dispatch(const Peer& from, wire::Message::Body::Reader body) {
  switch (body.which()) {
    case Body::SERVICE:
      deliver_to_service(from, body.getService());
      return true;
    case Body::FAILURE_REPORT: {
      ++news_received_;
      auto f = body.getFailureReport();
      if (f.getToTheLost() && f.getRank() == id_.rank && is_root()) {
        taken_for_lost(std::string(f.getReason()));  // a child's report about this front-end
        return true;
      }
      on_failure_report(f.getRank(), f.getReason(), from.link, f.getIncarnation());
      return true;
    }
    case Body::ATTACH_REPORT: {
      ++news_received_;
      auto a = body.getAttachReport();
      std::optional<Topology> subtree;
      if (a.hasSubtree() && from.kind == Peer::Kind::child) {  // going up from an adopter
        auto decoded = decode_subtree(a.getSubtree());
        if (decoded) subtree = std::move(*decoded);
        else log().warn("ignoring the subtree that came with the adoption of {}: {}", a.getOrphan(), decoded.error());
      }
      on_attach_report(a.getOrphan(), a.getAdopter(), a.getIncarnation(), from.link, a.getOrphanIsCommnode(),
                       subtree ? &*subtree : nullptr);
      return true;
    }
    case Body::ATTACH_REPORTS:
      if (from.kind != Peer::Kind::parent) return false;  // batched on the way down only
      ++news_received_;
      for (auto a : body.getAttachReports()) {
        on_attach_report(a.getOrphan(), a.getAdopter(), a.getIncarnation(), from.link, a.getOrphanIsCommnode());
      }
      return true;
    default:
      return false;
  }
}

void Node::deliver_to_service(const Peer& from, wire::Message::Body::Service::Reader envelope) {
  const ServiceId id = envelope.getId();
  Service* service = services_.find(id);
  if (!service) {
    log().debug("dropping a message for service {}, which this process does not run", id);
    return;
  }
  service->on_message(from, envelope.getKind(), envelope.getBody());
}

// ---- start-up ----

Result<void> Node::start_as_root(Topology topology, LaunchPlan plan) {
  plan_ = std::move(plan);
  for (Service* service : services_.in_order()) {
    if (auto options = service->plan_options(); !options.empty()) plan_.service_options[service->id()] = std::move(options);
  }
  adopt_topology(std::move(topology));
  if (auto r = listen(); !r) return r;
  // The root's own endpoint goes out with the topology every child is launched with,
  // not only with the endpoints published once the tree is up: an orphan whose
  // parent dies before those reach it can still ask the front-end to adopt it.
  publish_endpoints({{id_.rank, connections_.port()}});  // no child is connected yet
  emit(events::Started{});
  return {};
}

Result<void> Node::start_as_child(const ParentLink& parent) {
  std::string where = parent.address + ":" + std::to_string(parent.port);
  if (fabric_) {
    auto connected = fabric_->connect(io_, parent.port);
    if (!connected.link) return Error{"cannot connect to parent at " + where + ": " + connected.error};
    parent_ = std::move(connected.link);
  } else if (parent.paths.empty()) {
    boost::system::error_code ec;
    auto socket = transport::connect_tcp(io_, parent.address, parent.port, ec);
    if (ec) return Error{"cannot connect to parent at " + where + ": " + ec.message()};
    parent_ = TcpLink::create(std::move(socket));
  } else {
    auto options = parent.striped;
    options.path_mac = path_mac(id_.secret);
    auto link = transport::StripedLink::connect(io_, parent.paths, std::move(options));
    if (!link) return Error{"cannot connect to parent at " + where + " (striped): " + link.error()};
    where += " over " + std::to_string(parent.paths.size()) + " striped paths";
    parent_ = std::move(*link);
  }
  attach_parent(parent_);
  healer().up.begin(parent_, id_.incarnation, false, false, std::nullopt, services_.in_order());
  log().info("connected to parent {}, waiting for its challenge", where);
  return {};
}

void Node::publish(Event event) {
  if (event.time == std::chrono::system_clock::time_point{}) event.time = std::chrono::system_clock::now();
  if (event.kind == Event::Kind::service) event.rank = id_.rank;
  if (observer_) observer_->on_public(event);
}

Result<Dial> Node::dial(Rank rank, bool plain, DialDone done) {
  if (!knows_tree()) return Error{"the tree is not known yet"};
  return core::dial(io_, topo(), id_.rank, rank, id_.secret, plain, std::move(done), fabric_);
}

bool Node::links_idle() const {
  if (parent_ && parent_->queued_bytes() > 0) return false;
  return std::all_of(children_.begin(), children_.end(),
                     [](const Child& c) { return !c.link || c.link->queued_bytes() == 0; });
}

std::string Node::describe(Rank rank) const {
  if (const FoldedPart::Held* h = folded_ ? folded_->held(rank) : nullptr) {
    return role_name(h->role) + " " + std::to_string(rank) + " on " + h->host;
  }
  const canopy::TopologyNode* n = knows_tree() ? topo().find(rank) : nullptr;
  if (!n) return "node " + std::to_string(rank);
  return role_name(n->role) + " " + std::to_string(rank) + " on " + n->host;
}

void Node::attach_process(std::size_t index, std::unique_ptr<ChildProcess> process) {
  Child& child = children_[index];
  child.process = std::move(process);
  child.process->watch([this, index](int status) { on_child_exit(index, status); });
}

void Node::give_up_child(std::size_t index, std::string_view why) {
  Child& child = children_[index];
  set_child_state(index, ChildState::gone, why, true);
  child.loss_reported = true;
  if (child.process && child.process->running()) child.process->kill(SIGKILL);
}

void Node::subtree_up() {
  if (phase() != Phase::launching) return;
  set_phase(Running{}, "subtree up");
  // A commnode holding a part folds it once nothing has read it for a while: the
  // endpoints published once the whole tree is up still come down through it.
  if (refold_) fold_part_later();
}

// ---- the parent ----

// Messages on a link up go to the parent while it is the parent, and to the
// adoption handshake while it is the potential adopter being asked.
void Node::attach_parent(std::shared_ptr<Link> link) {
  const Link* raw = link.get();
  link->set_watermarks(kUpstreamHighWater, kUpstreamLowWater, [this, raw](bool above) {
    if (parent_.get() == raw) set_upstream_full(above);
  });
  link->start(*this, kUpLink);
}

void Node::on_link_message(Link& link, capnp::MessageReader& message) {
  switch (link.purpose()) {
    case kUpLink: return on_up_message(&link, message);
    case kAcceptedLink: return on_accepted_message(&link, message);
    case kReattachLink: return on_reattach_message(&link, message);
  }
}

void Node::on_link_closed(Link& link, std::string_view reason) {
  switch (link.purpose()) {
    case kUpLink: return on_up_closed(&link, reason);
    case kAcceptedLink: return on_accepted_closed(&link, reason);
    case kReattachLink: return on_reattach_closed(&link, reason);
  }
}

void Node::on_up_closed(const Link* link, std::string_view reason) {
  if (healing_) healing_->up.forget(link);
  if (parent_.get() == link) {
    on_parent_closed(reason);
  } else if (auto* o = orphan(); o && o->trying.get() == link) {
    on_trying_closed(reason);
  } else if (healing_ && healing_->is_standby(link)) {
    log().info("standby link to {} closed: {}", describe(healing_->forget_standby()), reason);
  }
}

void Node::on_up_message(const Link* link, capnp::MessageReader& message) {
  if (!handshake_read(link, message)) return;
  if (parent_.get() == link) {
    on_parent_message(message);
  } else if (auto* o = orphan(); o && o->trying.get() == link) {
    on_trying_message(message);
  }
}

void Node::on_parent_message(capnp::MessageReader& message) {
  auto msg = message.getRoot<wire::Message>();
  auto body = msg.getBody();
  if (dispatch(Peer{Peer::Kind::parent, 0, msg.getSenderRank(), msg.getSenderIncarnation(), parent_.get(),
                    msg.getSenderEpoch()},
               body)) {
    return;
  }
  switch (body.which()) {
    case Body::TOPOLOGY:
      return on_topology(body.getTopology());
    case Body::ENDPOINTS:
      return on_endpoints(body.getEndpoints());
    case Body::SHUTDOWN: {
      // The reason comes down from the front-end through every level: said once.
      const std::string reason = body.getShutdown().getReason();
      return begin_stop(reason.starts_with("shutdown: ") ? reason : "shutdown: " + reason, true);
    }
    default:
      log().warn("ignoring unexpected message {} from parent", static_cast<int>(body.which()));
  }
}

// Back-pressure (docs/protocol.md, "Resource bounds"): while the link to the parent
// holds more than kUpstreamHighWater bytes, nothing more is read from the children
// (their bytes wait in the kernel, then in their own queues, which hold their own
// children or the back-end's send() back), until it is down to kUpstreamLowWater.
void Node::set_upstream_full(bool full) {
  if (full == upstream_full_ || (full && stopping())) return;
  upstream_full_ = full;
  log().debug("upstream queue {}: {} reading from the children", full ? "full" : "drained",
              full ? "pausing" : "resuming");
  for (auto& child : children_) {
    if (child.link) child.link->pause_reading(full || child.reading_held);
  }
  if (observer_) observer_->on_upstream_full(full);
}

void Node::hold_reading(std::size_t index, bool hold) {
  if (index >= children_.size()) return;
  Child& child = children_[index];
  child.reading_held = hold;
  if (child.link) child.link->pause_reading(upstream_full_ || hold);
}

void Node::on_parent_closed(std::string_view reason) {
  set_upstream_full(false);  // what an orphan sends is held back, bounded
  if (stopping()) {
    if (phase() == Phase::stopped) notify_stopped();  // the parent link's flush is done
    return;
  }
  if (!plan_.fault.enabled || !knows_tree()) return begin_stop("lost parent: " + std::string(reason));
  if (!healing_on_) return begin_stop("lost parent: " + std::string(reason) + "; healing is off");
  // The front-end is gone (or the process promoted in its place): without a grace
  // period there is nothing to rejoin; with one, the heir is promoted and the
  // others ask it to adopt them.
  const TreeView& view = tree().view();
  const Rank parent = view.parent(id_.rank);
  const bool parent_is_root = parent == view.root() || (view.without_root(parent) && view.heir() == parent);
  if (parent_is_root && plan_.fault.keep_tree_for.count() == 0) {
    return begin_stop("lost parent: " + std::string(reason));
  }
  become_orphan(std::string(reason));
}

// ---- losing a child ----

void Node::set_child_state(std::size_t child, ChildState next, std::string_view why, bool warn) {
  children_.set_state(child, next, why, warn);
}

void Node::cut_child(std::size_t index, const std::string& why, bool say_why, bool fence) {
  Child& child = children_[index];
  if (child.link && child.link->is_open()) {
    if (say_why) {
      Message stop(id_);
      stop.body().initShutdown().setReason(why);
      child.link->send(stop.builder());
      child.link->close(why);
    } else {
      child.link->abort(why);
    }
  }
  if (fence && child.process && child.process->running()) child.process->kill(SIGKILL);
}

void Node::cut_parent(Message& last, const std::string& why) {
  if (parent_ && parent_->is_open()) parent_->abort_with(last.builder(), why);
}

void Node::on_child_closed(std::size_t index, std::string_view reason) {
  Child& child = children_[index];
  child.link.reset();
  if (stopping()) {
    set_child_state(index, ChildState::gone, reason);
    check_stopped();
    return;
  }
  set_child_state(index, ChildState::gone, reason, true);
  child.lost().close_reason = std::string(reason);
  // Services keep waiting for it until the loss has been reported (finish_child_loss),
  // so that the front-end hears of the loss before any aggregate that lacks it.
  if (child.process && child.process->running()) {
    // Wait briefly for the exit status, which makes a better report.
    auto& timer = child.lost().timer;
    timer = std::make_unique<Timer>(io_, kExitStatusWait);
    timer->async_wait([this, index](const boost::system::error_code& ec) {
      if (!ec) finish_child_loss(index);
    });
  } else {
    finish_child_loss(index);
  }
}

void Node::on_child_exit(std::size_t index, int status) {
  Child& child = children_[index];
  child.lost().exit_status = status;
  log().info("{} (pid {}) {}", describe(child.rank), child.process->pid(), describe_wait_status(status));
  if (stopping()) return check_stopped();
  if (child.state == ChildState::starting) {
    child.lost().close_reason = Child::kNeverConnected;
    set_child_state(index, ChildState::gone, "exited before connecting", true);
    finish_child_loss(index);
  } else if (child.state == ChildState::gone) {
    finish_child_loss(index);
  }
  // Otherwise the connection is still open; its closing will report the loss.
}

void Node::finish_child_loss(std::size_t index) {
  Child& child = children_[index];
  if (child.loss_reported || stopping()) return;
  child.loss_reported = true;
  const ChildLoss& loss = child.lost();
  if (loss.timer) loss.timer->cancel();
  std::string what = describe(child.rank) + " " +
                     (loss.exit_status ? describe_wait_status(*loss.exit_status) : loss.close_reason);
  // Services report it and drop the child from their waits; reports and data share
  // the ordered link up, so aggregates without this child follow the report.
  emit(events::ChildLost{index, child.rank, what, phase() == Phase::launching});
  on_failure_report(child.rank, what, nullptr);
}

// ---- routing ----

bool Node::send_up(Message& message) {
  if (parent_ && phase() != Phase::orphaned) {
    parent_->send(message.builder());
    return true;
  }
  auto* o = orphan();
  if (!o) return false;
  // Orphaned: hold the message back until a new parent adopts us, within a bound.
  if (o->held.hold(message.builder())) return true;
  log().warn("orphan: dropping held-back output beyond {} MiB", o->held.max_bytes() >> 20);
  return false;
}

void Node::send_to_child(std::size_t child, Message& message) {
  // What this node has learnt of the tree goes first: a stream created, or a packet
  // sent, to a back-end that has just joined must find it known at every commnode
  // on its way (the join's report would otherwise follow it a batch later).
  if (auto* news = news_if_made()) news->flush_fast();
  if (auto& link = children_[child].link) link->send(message.builder());
}

std::optional<std::size_t> Node::route_to(Rank backend) const {
  if (folded_) return folded_->route_to(backend);
  return tree_ ? tree_->route_to(backend) : std::nullopt;
}

// ---- stopping ----

void Node::shutdown(const std::string& reason) { begin_stop(reason, true); }

void Node::set_healing(bool on) {
  if (healing_on_ == on) return;
  healing_on_ = on;
  log().info("healing switched {}", on ? "on" : "off");
  if (!on) close_standby("healing is off");
}

bool Node::stopped_in_order() const {
  if (const auto* s = std::get_if<Stopping>(&phase_)) return s->in_order;
  if (const auto* s = std::get_if<Stopped>(&phase_)) return s->in_order;
  return false;
}

bool Node::declared_lost() const {
  const auto* s = std::get_if<Stopped>(&phase_);
  return s && s->declared_lost;
}

void Node::begin_stop(const std::string& reason, bool in_order) {
  if (stopping()) return;
  if (auto* o = orphan(); o && o->trying) o->trying->detach();
  set_phase(Stopping{reason, in_order, std::make_unique<Timer>(io_)}, reason);  // drops what an orphan held back
  if (auto* news = news_if_made()) news->drop();                            // the children are told to stop instead
  close_standby("stopping");
  for (auto& link : connections_.links([](const auto& s) { return std::holds_alternative<Connections::Standby>(s); })) {
    connections_.remove(link.get());
    link->close("stopping");
  }
  emit(events::Stopping{reason});
  review_held_adoptions();  // told to stop, as any orphan asking now would be
  for (auto& link : connections_.links([](const auto& s) { return std::holds_alternative<Connections::Joining>(s); })) {
    refuse_joining(std::get<Connections::Joining>(connections_.find(link.get())->state).rank, "this node is stopping");
  }
  // The children are read again, to see them close: what data they still send is
  // dropped while stopping (services/streams.cpp), so nothing piles up.
  set_upstream_full(false);
  for (auto& link : connections_.links([](const auto& s) {
         return !std::holds_alternative<Connections::Standby>(s);
       })) {
    link->close("stopping");
  }
  Message message(id_);
  message.body().initShutdown().setReason(reason);
  for (auto& child : children_) {
    if (child.loss && child.loss->timer) child.loss->timer->cancel();
    if (child.link) {
      child.link->send(message.builder());
    } else if (child.process && child.process->running() && child.state != ChildState::gone) {
      child.process->kill(SIGTERM);  // started but never connected
    }
  }
  // Its height: what it waits for its subtree to stop by (a folded part keeps it).
  const std::uint32_t height = tree_ ? tree_->view().height(id_.rank) : folded_ ? folded_->place().height : 0;
  auto grace = stop_grace_for_height(height);
  auto& grace_timer = *std::get<Stopping>(phase_).grace;
  grace_timer.expires_after(grace);
  grace_timer.async_wait([this, grace](const boost::system::error_code& ec) {
    if (ec) return;
    for (auto& child : children_) {
      if (child.process && child.process->running()) {
        log().warn("{} did not exit within {} s of shutdown; killing it", describe(child.rank),
                   std::chrono::duration_cast<std::chrono::seconds>(grace).count());
        child.process->kill(SIGKILL);
      }
      if (child.link) child.link->close("shutdown grace period over");
    }
  });
  check_stopped();
}

std::chrono::milliseconds Node::stop_grace_for_height(std::size_t height) {
  return kStopGrace + kStopGraceStep * (height > 0 ? height - 1 : 0);
}

void Node::check_stopped() {
  auto* stopping_phase = std::get_if<Stopping>(&phase_);
  if (!stopping_phase) return;
  for (const auto& child : children_) {
    if (child.link && child.link->is_open()) return;
    if (child.process && child.process->running()) return;
  }
  std::string reason = std::move(stopping_phase->reason);
  const bool in_order = stopping_phase->in_order;
  set_phase(Stopped{reason, in_order}, "every child has exited");  // ends the grace period
  connections_.stop_listening();
  log().info("stopped: {}", reason);
  if (parent_ && parent_->is_open()) {
    // Stopped once the parent link has flushed what it holds and said goodbye (a
    // striped link's bye; without it the parent would wait for the link's time-out
    // to tell a stop from a failure): its close handler, or a bound.
    parent_->close("stopped");
    auto& farewell = std::get<Stopped>(phase_).farewell;
    farewell = std::make_unique<Timer>(io_, std::chrono::seconds(1));
    farewell->async_wait([this](const boost::system::error_code& ec) {
      if (!ec) notify_stopped();
    });
    return;
  }
  notify_stopped();
}

// Leaves the tree at once, without stopping the subtree: the children, which have
// left this process or will find it gone, are adopted elsewhere (their processes are
// not killed). The parent hears why first, as a failure report about this process,
// so that the tree heals without waiting for a time-out.
void Node::abandon(const std::string& reason, bool declared_lost) {
  if (phase() == Phase::stopped) return;
  log().error("{}: leaving the tree; the children are left to be adopted elsewhere", reason);
  if (parent_ && parent_->is_open()) {
    Message message(id_);
    auto f = message.body().initFailureReport();
    f.setRank(id_.rank);
    f.setReason(describe(id_.rank) + " left the tree: " + reason);
    f.setIncarnation(id_.incarnation);
    parent_->send(message.builder());
    parent_->close("left the tree");
  }
  for (auto& child : children_) {
    if (child.link) std::exchange(child.link, nullptr)->detach();
    if (child.process) child.process->release();
  }
  connections_.detach_all();
  if (healing_) healing_->detach();
  connections_.stop_listening();
  Stopped stopped{reason};
  stopped.declared_lost = declared_lost;
  set_phase(std::move(stopped), "left the tree");
  emit(events::Stopping{reason});
  notify_stopped();
}

void Node::notify_stopped() {
  auto& stopped = std::get<Stopped>(phase_);
  if (stopped.notified) return;
  stopped.notified = true;
  if (stopped.farewell) stopped.farewell->cancel();
  if (observer_) observer_->on_stopped(stopped.reason);
}

}  // namespace canopy::core
