// A front-end re-attaching to a tree that outlived its own (docs/fault-tolerance.md,
// "When the front-end fails"), both ends: the new front-end's request and its
// handshake up to the heir's topology, and the heir's acceptance, which makes the
// new front-end its parent.
#include <cstdio>

#include "core/attach_file.h"
#include "core/codec.h"
#include "core/log.h"
#include "core/node.h"

namespace canopy::core {

using transport::Link;

// ---- the new front-end ----

void Node::reattach(std::shared_ptr<Link> link, Rank acceptor, std::function<void(Result<void>)> done) {
  if (knows_tree() || (healing_ && healing_->reattaching.link)) {
    link->abort("already attached");
    return done(Error{"this front-end has attached already"});
  }
  healer().reattaching = {link, acceptor, std::move(done)};
  link->start(*this, kReattachLink);
  healer().up.begin(link, 0, false, false, acceptor, services_.in_order());
  log().info("asking {} ({}) to take this front-end as its parent", acceptor, link->peer());
}

void Node::on_reattach_closed(const Link* raw, std::string_view reason) {
  healer().up.forget(raw);
  if (healer().reattaching.link.get() == raw) return reattach_failed(std::string(reason));
  on_accepted_closed(raw, reason);  // the acceptor, since the topology a child
}

void Node::reattach_failed(const std::string& why) {
  auto r = std::exchange(healer().reattaching, {});
  if (!r.link) return;
  healer().up.forget(r.link.get());
  r.link->abort(why);
  log().warn("re-attaching to {} failed: {}", r.acceptor, why);
  if (r.done) r.done(Error{why});
}

// The acceptor's handshake, then its topology; from then on it is this node's child.
void Node::on_reattach_message(const Link* raw, capnp::MessageReader& message) {
  if (!handshake_read(raw, message)) return;
  if (raw->owner_tag() != 0) return on_accepted_message(raw, message);  // the acceptor, a child
  if (healer().reattaching.link.get() != raw) return;
  auto msg = message.getRoot<wire::Message>();
  auto body = msg.getBody();
  if (body.isShutdown()) return reattach_failed(body.getShutdown().getReason());
  if (!body.isTopology() || msg.getSenderRank() != healer().reattaching.acceptor) {
    return reattach_failed("it sent something other than the topology first");
  }
  auto topology = decode_topology(body.getTopology());
  if (!topology) return reattach_failed("it sent an invalid topology: " + topology.error());
  const Rank acceptor = healer().reattaching.acceptor;
  if (topology->root().rank != id_.rank) return reattach_failed("its tree's front-end has another rank");
  if (!topology->find(acceptor) || topology->at(acceptor).role != Role::commnode) {
    return reattach_failed("rank " + std::to_string(acceptor) + " is not a commnode of its tree");
  }
  if (topology->partial()) return reattach_failed("it sent a part of its tree, not the whole");
  auto plan = decode_plan(body.getTopology());
  if (!plan) return reattach_failed("it sent an invalid launch plan: " + plan.error());
  auto r = std::exchange(healer().reattaching, {});
  plan_ = std::move(*plan);
  plan_.reattached = true;
  adopt_topology(std::move(*topology));
  // A port of its own: the lost front-end's may still be taken, or on another host.
  publish_endpoints({{id_.rank, 0}});
  if (auto listening = listen(); !listening) {
    topology_.reset();
    tree_.reset();
    folded_.reset();
    children_ = ChildTable{};
    r.link->abort("cannot listen");
    return r.done(Error{listening.error()});
  }
  // The acceptor is this node's one child; the others were adopted under it, or are lost.
  auto index = children_.index_of(acceptor);
  if (!index) {
    index = children_.add(acceptor, Role::commnode);
    tree().note_child(acceptor, *index);
  }
  for (std::size_t i = 0; i < children_.size(); ++i) {
    if (i == *index) continue;
    set_child_state(i, ChildState::gone, "not a child of this front-end: the tree lost its front-end before it");
    children_[i].loss_reported = true;
  }
  take_link(*index, r.link);
  set_child_state(*index, ChildState::ready, "re-attached to it at " + r.link->peer());
  log().info("re-attached to {}: {} processes in the topology", describe(acceptor), topo().size());
  publish_endpoints({{id_.rank, connections_.port()}});  // orphans may ask this front-end to adopt them
  emit(events::Started{});
  if (r.done) r.done({});
}

// A child took this front-end for lost: it was stopped longer than `lost` where the
// child could not see its process. The tree has healed without it (an heir stands in
// the root's place for the grace period), so it must not act on the tree again: it
// leaves, saying so (docs/fault-tolerance.md, "A stopped front-end").
void Node::taken_for_lost(const std::string& reason) {
  abandon("a child took this front-end for lost (" + reason + ")" +
          (plan_.fault.keep_tree_for.count() > 0
               ? "; the tree is kept for " + std::to_string(plan_.fault.keep_tree_for.count()) +
                     " ms under an heir, for a front-end to re-attach"
               : "; without a grace period (keep_tree_for) the tree stops"),
          true);
}

// ---- the heir ----

// The heir, left without the root, takes the root's place for the grace period.
void Node::promote(std::chrono::milliseconds grace, const std::string& reason) {
  auto& o = *orphan();
  o.promoted = true;
  log().info("promoted in the place of the lost {}: the tree waits {} ms for a front-end to re-attach",
             describe(o.failed_parent), grace.count());
  o.deadline = std::make_unique<Timer>(io_, grace);
  o.deadline->async_wait([this, grace](const boost::system::error_code& ec) {
    if (ec || !promoted()) return;
    remove_reattach_file();
    begin_stop("no front-end re-attached within " + std::to_string(grace.count()) + " ms");
  });
  review_held_adoptions();  // orphans that asked before this node knew it was the heir
  emit(events::Promoted{o.failed_parent, reason});
}

// The re-attach file holds the secret, and no front-end can use it once the tree
// stops: the heir removes it, when it is on this host (or a shared file system) and
// is this tree's.
void Node::remove_reattach_file() {
  const std::string& path = plan_.commands.get().reattach_file;
  if (path.empty()) return;
  auto file = attach::read_attach_file(path);
  if (!file || file->network_id != id_.network_id) return;
  if (std::remove(path.c_str()) == 0) log().info("removed the re-attach file {}: the grace period is over", path);
}


// A front-end re-attaching after the tree lost its own: this node, promoted in the
// root's place, takes it as its parent. It sends the topology and every report of
// the live tree, is adopted by the root under a fresh incarnation (the report
// floods: every process knows the root alive again), and its services send their
// state (state composition: the complete state of every recoverable stream), then
// the output it held back.
void Node::accept_frontend(const std::shared_ptr<Link>& link, wire::Hello::Reader hello) {
  auto refuse = [&](const std::string& why) {
    connections_.refuse(link, {.whom = "the front-end that re-attaches from " + link->peer(), .why = why,
                               .for_good = true});
  };
  if (!knows_tree() || stopping()) return refuse("this node is not running");
  const Rank root = tree().view().root();
  if (hello.getRank() != root) return refuse("rank " + std::to_string(hello.getRank()) + " is not this tree's front-end");
  if (!promoted()) {
    const Rank heir = tree().view().heir();
    return refuse(tree().view().alive(root) ? "the tree's front-end is alive"
                  : heir != TreeView::kNone ? "it does not stand in the root's place; " + describe(heir) + " does"
                                            : "it does not stand in the root's place");
  }
  connections_.remove(link.get());  // the parent now
  auto& o = *orphan();
  const Rank failed = o.failed_parent;
  auto held = std::move(o.held);
  parent_ = link;
  const Link* raw = link.get();
  link->set_watermarks(kUpstreamHighWater, kUpstreamLowWater, [this, raw](bool above) {
    if (parent_.get() == raw) set_upstream_full(above);
  });
  id_.incarnation = tree().next_incarnation(id_.incarnation);
  set_phase(Running{}, "a front-end re-attached from " + link->peer());  // destroys the grace timer
  send_topology(*link, Role::frontend, root);
  if (knows_tree()) news().send_live_tree(tree(), *link, false);
  on_attach_report(id_.rank, root, id_.incarnation, nullptr);
  emit(events::Adopted{root, id_.incarnation, failed});
  held.send_all(*parent_);
}

}  // namespace canopy::core
