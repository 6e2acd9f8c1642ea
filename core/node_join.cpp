// Open attach (docs/attach.md, "Open attach"): a back-end the tree does not name
// joins it under its own rank. The commnode it connects to holds it (joining) and
// asks the root, in an adoption report of incarnation 0 sent up hop by hop; the root
// decides, first come first served, so that two processes never hold one rank:
//   - a rank the tree has, alive: refused, the refusal flooded down to the commnodes
//     (an adoption report of incarnation 0 from the parent), and the one holding it
//     tells the back-end why;
//   - otherwise: the join is an adoption report of the rank under that commnode
//     (incarnation 1, or one above a failed process's of the same rank), flooded like
//     any, so that every process adds the back-end to its topology and live tree
//     (on_attach_report). The commnode holding it then makes it a child: it gets
//     the topology (with itself in it) and the live tree, and the services see a back-end
//     attach (the membership service makes it a member).
#include <limits>

#include "core/codec.h"
#include "core/listener.h"
#include "core/log.h"
#include "core/node.h"

namespace canopy::core {

using transport::Link;

void Node::accept_newcomer(const std::shared_ptr<Link>& link, wire::Hello::Reader hello) {
  const Rank rank = hello.getRank();
  // Told why (its receive() fails with it).
  auto refuse = [&](const std::string& why) {
    connections_.refuse(link, {.whom = "back-end " + std::to_string(rank) + " from " + link->peer(), .why = why,
                               .for_good = true});
  };
  if (from_wire(hello.getRole()) != Role::backend) return refuse("only back-ends join a running tree");
  if (rank >= kFirstInternalRank) {
    return refuse("rank " + std::to_string(rank) + " is not a back-end's (back-end ranks are below " +
                  std::to_string(kFirstInternalRank) + ")");
  }
  // Only the root, and a back-end's own parent, know whether it is alive: the failure
  // of a back-end goes up only (docs/fault-tolerance.md, "The live tree"). Elsewhere
  // the root decides.
  const TreeView& view = tree().view();
  if (view.contains(rank) && view.alive(rank) && (is_root() || view.parent(rank) == id_.rank)) {
    return refuse("rank " + std::to_string(rank) + " is in the tree already (under " + describe(view.parent(rank)) + ")");
  }
  if (connections_.joining(rank)) return refuse("a back-end under rank " + std::to_string(rank) + " is joining already");
  if (auto none = connections_.take_descriptor()) return refuse(*none);
  if (stopping()) return refuse("this node is stopping");
  if (seeking_adopter()) return refuse("this node is itself an orphan");
  auto deadline = std::make_unique<Timer>(io_, plan_.startup_timeout);
  deadline->async_wait([this, rank](const boost::system::error_code& ec) {
    if (!ec) refuse_joining(rank, "the front-end did not answer its join in time");
  });
  connections_.set(link, Connections::Joining{rank, std::move(deadline)});
  log().info("back-end {} asks to join from {}, pid {}", rank, link->peer(), hello.getPid());
  on_join_request(rank, id_.rank, nullptr);
}

void Node::on_join_request(Rank rank, Rank under, const Link* from) {
  Message message(id_);
  auto request = message.body().initAttachReport();
  request.setOrphan(rank);
  request.setAdopter(under);
  request.setIncarnation(0);
  // The root's refusal, on its way down to the commnode holding the back-end.
  auto refused = [&] {
    if (under == id_.rank) return refuse_joining(rank, "rank " + std::to_string(rank) + " is in the tree already");
    for (auto& child : children_) {
      if (child.link && child.role == Role::commnode) child.link->send(message.builder());
    }
  };
  if (from && parent_ && from == parent_.get()) return refused();
  if (!is_root()) {
    if (parent_ && phase() != Phase::orphaned) parent_->send(message.builder());
    return;  // an orphan's request is lost: the back-end's join times out
  }
  const TreeView& view = tree().view();
  const bool known = view.contains(rank);
  if ((known && view.alive(rank)) || !view.contains(under) || view.role(under) == Role::backend) {
    log().info("join of back-end {} under {} refused: {}", rank, under,
               known ? "the rank is in the tree" : "not a commnode of the tree");
    return refused();
  }
  // First come, first served: every later request for the rank finds it alive.
  on_attach_report(rank, under, known ? view.incarnation(rank) + 1 : 1, nullptr);
}

void Node::refuse_joining(Rank rank, const std::string& why) {
  auto* c = connections_.joining(rank);
  if (!c) return;
  auto link = c->link;
  connections_.set(link, Connections::AwaitingHello{});  // closing: nothing more is asked of it
  connections_.refuse(link, {.whom = "back-end " + std::to_string(rank) + " from " + link->peer(), .why = why,
                             .for_good = true});
}

// The root accepted the join of `rank` under this node, and the report has been
// applied here: the back-end becomes a child.
void Node::admit_joining(Rank rank, bool rejoined) {
  auto* c = connections_.joining(rank);
  if (!c) return;
  auto link = c->link;
  const std::size_t index = *children_.index_of(rank);
  take_link(index, link);
  set_child_state(index, ChildState::connected, "joined from " + link->peer());
  send_topology(*link, Role::backend, rank);
  // With its join: the newcomer learns its incarnation.
  if (knows_tree()) news().send_live_tree(tree(), *link, true);
  emit(events::ChildConnected{index, rank, rejoined, true});
}

}  // namespace canopy::core
