// A node's part in the live tree's news: it floods the failure and adoption reports
// it hears to its neighbours (the ones that need them), and applies them to its own
// view (docs/fault-tolerance.md; the news on its way down: core/tree_news.h).
#include "core/codec.h"
#include "core/log.h"
#include "core/node.h"

namespace canopy::core {

using transport::Link;

void Node::flood(Message& message, const Link* except, std::optional<Rank> about) {
  const bool parts = plan_.commnode_parts() && about && knows_tree();
  // Whether the back-end children take it: the same for all of them, asked of the first.
  std::optional<bool> backends_hold;
  for (auto& child : children_) {
    if (!child.link || child.link.get() == except || child.role != Role::backend) continue;
    backends_hold = !about || (parts ? hears_of(child.rank, *about, true)
                                     : backend_part().holds(topo(), id_.rank, plan_, *about));
    break;
  }
  // What was learnt earlier goes first, to those who take this. Back-ends that do not
  // take it keep their batch of other back-ends' adoptions for later (TreeNews): in the storm
  // of a commnode's death, the failure report reaches its orphans' adopters while
  // they adopt, and would wake every back-end below them for nothing.
  if (auto* news = news_if_made()) news->flush(backends_hold.value_or(false));
  if (parent_ && parent_.get() != except) parent_->send(message.builder());
  for (auto& child : children_) {
    if (!child.link || child.link.get() == except) continue;
    if (child.role == Role::backend ? !*backends_hold : parts && !hears_of(child.rank, *about, true)) continue;
    child.link->send(message.builder());
  }
}

void Node::on_failure_report(Rank rank, const std::string& reason, const Link* from,
                             std::optional<std::uint32_t> incarnation) {
  if (rank == id_.rank && from && knows_tree() && !is_root()) {
    // A child declared this process lost: it was stalled (stopped, swapped out)
    // longer than `lost`, and its children have left it. A process declared failed
    // must never act on the tree again (it would report its children, adopted
    // elsewhere meanwhile, as lost): it leaves.
    return abandon("declared lost (" + reason + ")");
  }
  if (!knows_tree()) return;
  // A re-attached front-end hears of the loss of the one before it (the heir's live
  // tree): not news of this process.
  if (rank == id_.rank && is_root()) return;
  const std::uint32_t known = incarnation.value_or(tree().view().contains(rank) ? tree().view().incarnation(rank) : 0);
  if (!tree().apply_failure(rank, known)) return;  // not news, or stale
  log().info("failure report: {} ({})", describe(rank), reason);
  review_held_adoptions();  // an orphan of `rank` may be waiting for this news
  Message message(id_);
  auto f = message.body().initFailureReport();
  f.setRank(rank);
  f.setReason(reason);
  f.setIncarnation(known);
  if (tree().view().role(rank) == Role::backend) {
    // A back-end's failure changes nothing below this node, and nothing at any
    // process but its ancestors (routes) and the front-end (status): it goes up
    // only. Every other process learns it from the membership view that follows
    // (docs/fault-tolerance.md, "The live tree"; issue 47).
    if (auto* news = news_if_made()) news->flush();  // what was learnt earlier goes first
    if (parent_ && parent_.get() != from) parent_->send(message.builder());
  } else {
    // A commnode's: its orphans' potential adopters and its back-end nephews (whose
    // part of the tree holds it) hear of it; other back-ends would drop it.
    flood(message, from, rank);
  }
  emit(events::TreeChanged{events::TreeChanged::Kind::failure, rank, TreeView::kNone, 0, reason});
}

void Node::on_attach_report(Rank orphan, Rank adopter, std::uint32_t incarnation, const Link* from,
                            bool orphan_is_commnode, const Topology* subtree) {
  if (!knows_tree()) return;
  if (incarnation == 0) return on_join_request(orphan, adopter, from);  // open attach (node_join.cpp)
  // The orphan's subtree, come up with the report where the adopter's parent may not
  // hold it (Node::graft): held here if it is not, and sent on up only then (whoever
  // holds it, its ancestors hold it too).
  if (subtree && adopter != id_.rank && tree().view().contains(adopter)) {  // the adopter grafted it already
    if (tree().view().holds_below(orphan)) subtree = nullptr;
    else if (!graft(*subtree, adopter)) log().warn("ignoring the subtree that came with the adoption of {}", orphan);
  }
  // An orphan the tree does not have is a back-end that joined it (open attach):
  // every process adds it to its topology and live tree, then applies the report.
  const bool unknown = !tree().view().contains(orphan);
  bool joined = unknown;
  if (unknown && topo().partial()) {
    // A part of the tree holds its ancestors and their children, and a commnode's its
    // subtree: of what it does not hold, it takes a back-end joining or adopted under
    // a process it holds with its children (an ancestor, itself or a process below),
    // and nothing else (docs/scale.md). Which of the two, it cannot tell: in open
    // attach, a join.
    const TreeView& view = tree().view();
    if (orphan_is_commnode || !view.contains(adopter) ||
        !(view.in_subtree(id_.rank, adopter) || view.in_subtree(adopter, id_.rank))) {
      return;
    }
    joined = plan_.open_attach;
  }
  if (unknown) {
    if (!topo().find(orphan)) {
      if (backend_part_) backend_part_->invalidate();
      if (auto added = topo().add_backend(orphan, adopter); !added) {
        log().warn("ignoring the join of rank {} under {}: {}", orphan, adopter, added.error());
        return;
      }
    }
    if (!tree().add_backend(orphan, adopter)) {
      log().warn("ignoring the join of rank {} under {}: not a commnode of this view", orphan, adopter);
      return;
    }
  }
  // A back-end joining here (open attach) is a child before the report is applied:
  // routes to it go through it.
  const bool joining_here = adopter == id_.rank && connections_.joining(orphan);
  if (joining_here) {
    auto index = children_.index_of(orphan);
    tree().note_child(orphan, index ? *index : children_.add(orphan, Role::backend));
  }
  if (!tree().apply_adoption(orphan, adopter, incarnation)) return;  // stale or known
  if (joined) {
    log().info("join report: back-end {} joined under {}", orphan, adopter);
  } else {
    log().info("adoption report: {} adopted by {} (incarnation {})", orphan, adopter, incarnation);
  }
  // Up at once: the ancestors route to the orphan's subtree by it, and the recovery
  // report that follows it up must not overtake it. Down in a batch (TreeNews).
  if (parent_ && parent_.get() != from) {
    Message message(id_);
    auto report = message.body().initAttachReport();
    set_adoption(report, orphan, adopter, incarnation, tree().view().role(orphan) == Role::commnode);
    if (subtree) encode_topology(*subtree, report.initSubtree());
    parent_->send(message.builder());
  }
  if (!children_.empty()) news().add(orphan, adopter, incarnation, from, tree().view().role(orphan) == Role::backend);
  emit(events::TreeChanged{joined ? events::TreeChanged::Kind::join : events::TreeChanged::Kind::adoption, orphan,
                           adopter, incarnation, {}});
  if (joining_here) admit_joining(orphan, !joined);
}

}  // namespace canopy::core
