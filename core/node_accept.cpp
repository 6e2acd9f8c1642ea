// The accepting side of the node core: the handshake of every connection a node
// accepts (Challenge, Hello with its proof, Accepted: core/auth.h), then what the
// hello asks for: a launched or attached child, an orphan to adopt, or a lost
// back-end's rank coming back (docs/protocol.md, docs/security.md).
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "core/auth.h"
#include "core/codec.h"
#include "core/log.h"
#include "core/node.h"
#include "transport/tcp_link.h"

namespace canopy::core {

using transport::Link;
using transport::TcpLink;
using Body = wire::Message::Body;
using Clock = std::chrono::steady_clock;

// Listens on every NIC address of this node's host, all on one port.
Result<void> Node::listen() {
  const auto& me = topo().at(id_.rank);
  if (fabric_) {
    auto opened = connections_.listen(*fabric_, me.port, [this](std::shared_ptr<Link> link) { accept_link(std::move(link)); });
    if (!opened) return Error{"host '" + me.host + "': " + opened.error()};
    return {};
  }
  auto options = striped_options(topo().links());
  options.hello_timeout = plan_.startup_timeout;  // as for a plain connection's hello
  options.max_pending = max_pending();
  options.path_mac = path_mac(id_.secret);
  auto opened = connections_.listen(topo().nics_of(me.host), me.port, topo().ports(), options,
                               [this](std::shared_ptr<Link> link) { accept_link(std::move(link)); });
  if (!opened) return Error{"host '" + me.host + "': " + opened.error()};
  return {};
}

// Connections that have not said hello yet, held at each stage of the handshake
// (the listener's, telling plain from striped, and this node's): never fewer than
// 1,024, and twice the tree, so that every process of it can be connecting here at
// once (an adopter of many orphans, a front-end of a flat tree) with room to spare.
std::size_t Node::max_pending() const { return std::max<std::size_t>(1024, 2 * topo().size()); }

// A new connection, plain or striped: it has until the startup time-out to say hello.
void Node::accept_link(std::shared_ptr<Link> link) {
  if (phase() == Phase::stopped) return link->abort("stopped");
  if (connections_.unadmitted() >= max_pending()) {
    connections_.note_stranger(link->peer(), "pending", fmt::format("{} connections are already waiting for their hello, the most this "
                                          "node holds", connections_.unadmitted()));
    return link->abort("too many connections without a hello");
  }
  auto& deadline = connections_.add(link).hello_deadline;
  deadline = std::make_unique<Timer>(io_, plan_.startup_timeout);
  deadline->async_wait([this, weak = std::weak_ptr<Link>(link)](const boost::system::error_code& ec) {
    auto l = weak.lock();
    if (ec || !l) return;
    const auto* c = connections_.find(l.get());
    if (!c || !c->hello_deadline) return;  // admitted meanwhile
    connections_.note_stranger(l->peer(), "silent", fmt::format("no hello within {} ms", plan_.startup_timeout.count()));
    l->close("no hello in time");
  });
  link->start(*this, kAcceptedLink);
}

void Node::on_accepted_message(const Link* link, capnp::MessageReader& message) {
  if (parent_.get() == link) return on_parent_message(message);  // a front-end that re-attached here
  auto msg = message.getRoot<wire::Message>();
  if (const std::uint32_t tag = link->owner_tag()) return on_child_message(tag - 1, link, msg);
  auto* c = connections_.find(link);
  if (!c) return;
  if (std::holds_alternative<Connections::Standby>(c->state)) return on_standby_message(link, msg);
  if (std::holds_alternative<Connections::HeldOrphan>(c->state)) {
    log().debug("ignoring a message from {}, whose adoption request is held", c->link->peer());
    return;
  }
  if (std::holds_alternative<Connections::Joining>(c->state)) {
    log().debug("ignoring a message from {}, whose join waits for the root's answer", c->link->peer());
    return;
  }
  std::shared_ptr<Link> held = c->link;  // admitting it changes the table
  if (std::holds_alternative<Connections::Challenged>(c->state)) return on_hello_proof(held, msg);
  on_hello(held, msg);
}

void Node::on_child_message(std::size_t index, const Link* link, wire::Message::Reader msg) {
  Child& child = children_[index];
  if (msg.getSenderRank() != child.rank) {
    log().warn("dropping a message from child {} that claims to be from rank {}", child.rank, msg.getSenderRank());
    return;
  }
  auto body = msg.getBody();
  const Peer from{Peer::Kind::child, index, child.rank, msg.getSenderIncarnation(), link, msg.getSenderEpoch()};
  if (child.role == Role::backend && gate_ && !(*gate_)(from)) return;
  if (!dispatch(from, body)) {
    log().warn("ignoring unexpected message {} from child {}", static_cast<int>(body.which()), child.rank);
  }
}

void Node::on_accepted_closed(const Link* link, std::string_view reason) {
  if (healing_ && healing_->held_if_made()) healing_->held().forget(link);
  auto c = connections_.remove(link);
  if (parent_.get() == link) return on_parent_closed(reason);
  if (const std::uint32_t tag = link->owner_tag()) return on_child_closed(tag - 1, reason);
  if (!c) return;
  // Garbage or an oversized frame before any hello: docs/protocol.md promises the
  // warning, once per address in a while like any refused handshake.
  if (reason.starts_with("bad frame") && !std::holds_alternative<Connections::Standby>(c->state)) {
    connections_.note_stranger(c->link->peer(), "frame", std::string(reason) + " (before a hello)");
  }
}

void Node::on_hello(const std::shared_ptr<Link>& link, wire::Message::Reader msg) {
  // Nothing is proved yet: whoever can reach the port can cause these.
  auto refuse = [&](std::string_view kind, const std::string& why) {
    connections_.refuse(link, {.why = why, .stranger = kind});
  };
  // A process of another version or another tree can never be accepted here: it is
  // told why and to stop, so that its own error says so (an attached back-end's
  // receive() fails with the reason), not just that its parent hung up.
  auto refuse_for_good = [&](std::string_view kind, const std::string& why) {
    connections_.refuse(link, {.why = why, .for_good = true, .stranger = kind});
  };
  if (msg.getBody().which() != Body::HELLO) return refuse("not a hello", "first message is not a hello");
  auto hello = msg.getBody().getHello();
  if (hello.getProtocolVersion() != wire::PROTOCOL_VERSION) {
    return refuse_for_good("version", "protocol version " + std::to_string(hello.getProtocolVersion()) + ", expected " +
                           std::to_string(wire::PROTOCOL_VERSION));
  }
  if (hello.getNetworkId() != id_.network_id) {
    // The stranger is told its own id only: this tree's id is what lets a process
    // join it, and must not be handed to whoever connects.
    return refuse_for_good("network", fmt::format("hello from another network (network id {:x})", hello.getNetworkId()));
  }
  if (hello.getNonce().size() != kNonceBytes) {
    return refuse("nonce", "the hello's nonce is not " + std::to_string(kNonceBytes) + " bytes");
  }
  // Nothing else of the hello is looked at before its proof: the challenge proves
  // this node knows the secret, over the hello's nonce and a fresh one of its own,
  // and the hello's proof must cover that fresh nonce (core/auth.h).
  Connections::Challenged pending{std::make_unique<Connections::Challenged::Held>()};
  pending.held->challenge = new_nonce();
  pending.held->hello.setRoot(hello);
  Message challenge(id_);
  auto c = challenge.body().initChallenge();
  c.setNonce(as_data(pending.held->challenge));
  c.setProof(as_data(challenge_proof(id_.secret, hello.getNonce(), as_data(pending.held->challenge), id_.rank)));
  connections_.set(link, std::move(pending));
  link->send(challenge.builder());
}

void Node::on_hello_proof(const std::shared_ptr<Link>& link, wire::Message::Reader msg) {
  // One proof per challenge: a message after it is taken as a new hello.
  auto pending = std::get<Connections::Challenged>(std::move(connections_.find(link.get())->state));
  connections_.set(link, Connections::AwaitingHello{});
  auto hello = pending.held->hello.getRoot<wire::Hello>().asReader();
  const bool proved = msg.getBody().isHelloProof() &&
                      proof_matches(hello_proof(id_.secret, as_data(pending.held->challenge), hello),
                                    msg.getBody().getHelloProof().getProof());
  if (!proved) {
    // Logged once per address in a while: a stranger retrying must not fill the log.
    return connections_.refuse(
        link, {.why = fmt::format("authentication failed (a {}, pid {}, claiming rank {}): wrong or missing network secret",
                                  to_string(from_wire(hello.getRole())), hello.getPid(), hello.getRank()),
               .for_good = true,
               .told = "refused by " + describe(id_.rank) + ": authentication failed (wrong or missing network secret)",
               .stranger = "proof"});
  }
  admit(link, hello);
}

// What a proved hello asks for: a launched or attached child, an orphan to adopt, or
// a lost back-end's rank coming back.
void Node::admit(const std::shared_ptr<Link>& link, wire::Hello::Reader hello) {
  auto refuse = [&](const std::string& why) {
    connections_.refuse(link, {.whom = "connection from " + link->peer(), .why = why});
  };
  for (Service* service : services_.in_order()) {
    if (auto why = service->refuse_hello(hello)) {
      // Told to stop, not only refused: an orphan would otherwise ask the next adopter.
      return connections_.refuse(link, {.whom = "connection from " + link->peer(), .why = *why, .for_good = true,
                                        .told = *why});
    }
  }
  if (from_wire(hello.getRole()) == Role::frontend) return accept_frontend(link, hello);
  if (hello.getStandby()) return accept_standby(link, hello);
  if (hello.getAdopt()) return accept_orphan(link, hello);
  auto index = children_.index_of(hello.getRank());
  if (!index && plan_.open_attach) return accept_newcomer(link, hello);
  if (!index) return refuse("rank " + std::to_string(hello.getRank()) + " is not a child of this node");
  Child& child = children_[*index];
  if (from_wire(hello.getRole()) != child.role) return refuse("role does not match the topology");
  if (child.state == ChildState::gone && child.loss_reported && !stopping()) return accept_rejoin(*index, link, hello);
  if (child.state != ChildState::starting || stopping()) {
    return refuse("rank " + std::to_string(child.rank) + " is already connected or gone");
  }

  take_link(*index, link);
  set_child_state(*index, ChildState::connected, "hello from " + link->peer() + ", pid " + std::to_string(hello.getPid()));
  send_topology(*link, child.role, child.rank);
  // A back-end attaching late must not start from the launch shape.
  if (knows_tree()) news().send_live_tree(tree(), *link, true);
  emit(events::ChildConnected{*index, child.rank});
}

// An accepted connection becomes child `index`'s link, and what the child's last one
// left behind (a loss, its reason, its exit status) is forgotten. The link leaves
// the connections: it is found as the child's by its tag (core/connections.h).
void Node::take_link(std::size_t index, const std::shared_ptr<Link>& link) {
  Child& child = children_[index];
  child.link = link;
  child.loss_reported = false;
  if (child.loss) {  // its timer, if it still waits, finds the loss reported
    child.loss->close_reason.clear();
    child.loss->exit_status.reset();
  }
  connections_.remove(link.get());
  link->set_owner_tag(static_cast<std::uint32_t>(index) + 1);
  if (upstream_full_ || children_[index].reading_held) link->pause_reading(true);  // as every other child's
}

// ---- standby links ----

// A proved hello with `standby`: this node is the sender's first potential adopter.
// The link is kept idle, without a deadline, until the sender asks for adoption on
// it, or either side closes it.
void Node::accept_standby(const std::shared_ptr<Link>& link, wire::Hello::Reader hello) {
  const Rank rank = hello.getRank();
  auto refuse = [&](const std::string& why) {
    connections_.refuse(link, {.whom = "the standby link of " + describe(rank), .why = why});
  };
  if (stopping()) return refuse("stopping");
  // Held without a deadline: only where the tree asked for them.
  if (!plan_.fault.enabled || !plan_.fault.standby_links) return refuse("standby links are off in this tree");
  // Where commnodes hold parts, the sender may be one this node does not hold (a
  // nephew): its parent, the last of its ancestors, must be held here.
  const auto ancestors = hello.getAncestors();
  if (!knows_tree() || !(tree().view().contains(rank) ||
                  (ancestors.size() != 0 && tree().view().contains(ancestors[ancestors.size() - 1])))) {
    return refuse("rank " + std::to_string(rank) + " is not in the tree");
  }
  if (connections_.count<Connections::Standby>() >= max_pending()) {
    return refuse("this node holds as many standby links as it takes");
  }
  connections_.set(link, Connections::Standby{rank, from_wire(hello.getRole())});
  log().debug("standby link of {} accepted ({})", describe(rank), link->peer());
}

// The only message a standby link carries: its sender's request for adoption, a
// hello with `adopt`, of the rank and role the link's handshake proved. It goes on
// as a proved hello (held, adopted or refused with the reason).
void Node::on_standby_message(const Link* raw, wire::Message::Reader message) {
  auto* c = connections_.find(raw);
  const auto standby = std::get<Connections::Standby>(c->state);
  const std::shared_ptr<Link> link = c->link;
  // As a new connection's, until adopted or refused (with no hello deadline).
  connections_.set(link, Connections::AwaitingHello{});
  auto body = message.getBody();
  if (!body.isHello() || !body.getHello().getAdopt() || body.getHello().getRank() != standby.rank ||
      from_wire(body.getHello().getRole()) != standby.role || message.getSenderRank() != standby.rank) {
    log().warn("closing the standby link of {}: it carried something other than its request for adoption",
               describe(standby.rank));
    return link->close("a standby link carries only a request for adoption");
  }
  admit(link, body.getHello());
}

// ---- adopting an orphan ----

// An orphan asks to be adopted: adopted (or refused, saying why) at once when its
// parent is known to be gone, else held until it is (core/held_adoptions.h).
void Node::accept_orphan(const std::shared_ptr<Link>& link, wire::Hello::Reader hello) {
  OrphanRequest request{link, hello.getRank(), from_wire(hello.getRole()), hello.getIncarnation(), hello.getPid()};
  if (hello.hasSubtree()) {
    auto subtree = decode_subtree(hello.getSubtree());
    if (!subtree) {
      return connections_.refuse(link, {.whom = "to adopt " + std::to_string(request.orphan),
                                        .why = "the subtree it sent: " + subtree.error()});
    }
    request.subtree = std::make_shared<const Topology>(std::move(*subtree));
  }
  for (Rank r : hello.getAncestors()) request.ancestors.push_back(r);
  if (knows_tree() && !tree().view().contains(request.orphan) && hello.getAncestors().size() != 0) {
    // Not held here: judged by the deepest of its ancestors held here, if that is its
    // parent, or gone (docs/scale.md, "Adopting an orphan from another part").
    const TreeView& view = tree().view();
    Rank deepest = TreeView::kNone;
    for (Rank r : hello.getAncestors()) {
      if (view.contains(r)) deepest = r;
    }
    const Rank parent = hello.getAncestors()[hello.getAncestors().size() - 1];
    if (deepest != TreeView::kNone && (deepest == parent || !view.alive(deepest))) request.watched = deepest;
  }
  if (!knows_tree() || !healing() || stopping() || orphan_may_be_adopted(request)) {
    return adopt_orphan(request);  // adopted, or refused with the reason
  }
  const auto kept = std::min(std::max(2 * plan_.fault.heartbeat, plan_.fault.lost / 2),
                             std::max(std::chrono::milliseconds(500), plan_.fault.lost) * 3 / 4);
  connections_.set(link, Connections::HeldOrphan{});
  healer().held().hold(std::move(request), kept);
}

bool Node::orphan_may_be_adopted(const OrphanRequest& request) const {
  const TreeView& view = tree().view();
  const Rank orphan = request.orphan;
  if (!view.contains(orphan)) {  // adopt_orphan refuses it with the reason, or grafts it
    if (request.watched == TreeView::kNone) return true;
    return !view.alive(request.watched) || (held_if_made() && held_if_made()->found_gone(request.watched, plan_.fault.lost));
  }
  const Rank parent = view.parent(orphan);
  if (!view.alive(orphan) || parent == TreeView::kNone || !view.alive(parent)) return true;
  return held_if_made() && held_if_made()->found_gone(parent, plan_.fault.lost);
}

// After a failure report, when orphaned or when stopping: every held request that
// may now be answered is (adopted, or refused with the reason).
void Node::review_held_adoptions() {
  if (!held_if_made()) return;  // none was ever held here
  healing_->held().review([this](const OrphanRequest& request) {
    return stopping() || seeking_adopter() || orphan_may_be_adopted(request);
  });
}

void Node::adopt_orphan(const OrphanRequest& request) {
  const std::shared_ptr<Link>& link = request.link;
  const Rank orphan = request.orphan;
  const std::string whom = "to adopt " + std::to_string(orphan);
  auto refuse = [&](const std::string& why) { connections_.refuse(link, {.whom = whom, .why = why}); };
  if (!plan_.fault.enabled || !knows_tree()) return refuse("fault tolerance is off");
  if (!healing_on_) {
    // For good: the orphan stops with its subtree rather than ask the others.
    return connections_.refuse(link, {.whom = whom, .why = "healing is off", .for_good = true});
  }
  if (stopping()) {
    // Tell the orphan why, so that it stops too instead of trying others.
    const auto* s = std::get_if<Stopping>(&phase_);
    return connections_.refuse(
        link, {.whom = whom, .why = "this node is stopping", .for_good = true, .told = s ? s->reason : "stopped"});
  }
  if (seeking_adopter()) return refuse("this node is itself an orphan");
  const std::uint32_t incarnation = request.incarnation;
  const Topology* subtree = request.subtree.get();
  if (subtree && !tree().view().contains(orphan) && request.watched == TreeView::kNone) {
    return refuse("this node holds neither the orphan's parent nor a failed ancestor of it, so it cannot tell "
                  "whether its parent is gone");
  }
  if (auto why = tree().refuse_adoption(orphan, request.role, incarnation, subtree)) return refuse(*why);

  auto known = children_.index_of(orphan);
  if (known && children_[*known].link) return refuse("already connected");
  if (subtree && !graft(*subtree, id_.rank)) return refuse("its subtree holds ranks held here elsewhere");
  std::size_t index;
  if (known) {
    index = *known;  // a former child of ours coming back
  } else {
    index = children_.add(orphan, tree().view().role(orphan));
    tree().note_child(orphan, index);
  }
  children_[index].adopted = true;
  take_link(index, link);
  set_child_state(index, ChildState::ready,  // its subtree is already up
                  "adopted from " + link->peer() + ", pid " + std::to_string(request.pid) + ", incarnation " +
                      std::to_string(incarnation));

  const transport::Cork burst(link);  // the answer, the live tree and the services' state in one write
  Message reply(id_);
  auto a = reply.body().initAdopted();
  a.setAdopter(id_.rank);
  a.setIncarnation(incarnation);
  link->send(reply.builder());
  if (knows_tree()) news().send_live_tree(tree(), *link, true);
  // The subtree goes up only if this node's parent may not hold it: it is not among
  // the orphan's ancestors (Node::graft).
  const Rank up = tree().view().parent(id_.rank);
  const bool parent_holds = std::find(request.ancestors.begin(), request.ancestors.end(), up) != request.ancestors.end();
  on_attach_report(orphan, id_.rank, incarnation, link.get(), request.role == Role::commnode,
                   subtree && !parent_holds ? subtree : nullptr);
  emit(events::ChildAdopted{index, orphan});
}

// A child whose loss was reported connects again under its rank: a restarted
// back-end (paper 000's NODE_ALIVE). The live tree takes it back under an
// incarnation above the lost process's, flooded like an adoption; the new process
// gets the topology and the live tree as at launch, and the services treat it as a
// new connection (the membership service makes it a member again).
void Node::accept_rejoin(std::size_t index, const std::shared_ptr<Link>& link, wire::Hello::Reader hello) {
  Child& child = children_[index];
  auto refuse = [&](const std::string& why) {
    connections_.refuse(link, {.whom = describe(child.rank) + " again", .why = why});
  };
  if (child.role != Role::backend) return refuse("a lost commnode does not rejoin; only back-ends do");
  if (!plan_.fault.enabled || !knows_tree()) return refuse("fault tolerance is off, so a lost back-end stays lost");
  if (seeking_adopter()) return refuse("this node is itself an orphan");
  const std::uint32_t incarnation = tree().view().incarnation(child.rank) + 1;
  if (auto why = tree().refuse_adoption(child.rank, Role::backend, incarnation)) return refuse(*why);

  take_link(index, link);
  set_child_state(index, ChildState::connected,
                  "rejoined from " + link->peer() + ", pid " + std::to_string(hello.getPid()) + ", incarnation " +
                      std::to_string(incarnation));
  on_attach_report(child.rank, id_.rank, incarnation, link.get());
  send_topology(*link, Role::backend, child.rank);
  // With the report above: the new process learns its incarnation.
  if (knows_tree()) news().send_live_tree(tree(), *link, true);
  emit(events::ChildConnected{index, child.rank, true});
}

}  // namespace canopy::core
