#include "core/live_tree.h"

#include <algorithm>

#include "topology/rank_pairs.h"

namespace canopy::core {

LiveTree::LiveTree(const Topology& topology, Rank self) : self_(self), view_(topology) {
  const auto& children = topology.at(self).children;
  std::vector<std::pair<Rank, RankMap::Value>> routes;
  child_index_.reserve(children.size());
  for (std::size_t i = 0; i < children.size(); ++i) {
    child_index_.emplace_back(children[i], static_cast<std::uint32_t>(i));
    for (Rank b : topology.backends_below(children[i])) routes.emplace_back(b, static_cast<RankMap::Value>(i));
  }
  route_ = RankMap::of(std::move(routes));
  std::sort(child_index_.begin(), child_index_.end());
}

void LiveTree::note_child(Rank rank, std::size_t index) {
  topology::set_rank(child_index_, rank, static_cast<std::uint32_t>(index));
}

std::optional<std::size_t> LiveTree::route_to(Rank backend) const {
  if (auto via = route_.find(backend)) return *via;
  return std::nullopt;
}

bool LiveTree::apply_failure(Rank rank, std::optional<std::uint32_t> incarnation) {
  if (!view_.contains(rank)) return false;
  if (incarnation && *incarnation < view_.incarnation(rank)) return false;  // adopted since: stale
  return view_.apply_failure(rank);
}

bool LiveTree::apply_adoption(Rank orphan, Rank adopter, std::uint32_t incarnation) {
  if (!view_.apply_adoption(orphan, adopter, incarnation)) return false;
  update_routes(orphan);
  return true;
}

bool LiveTree::add_backend(Rank rank, Rank parent) {
  return view_.add_backend(rank, parent);
}

void LiveTree::update_routes(Rank orphan) {
  // This node itself, or an ancestor of it, moved (an adoption comes down the
  // orphan's subtree): what it routes, all below it, is reached as before. (A
  // commnode below an adopted orphan dropped the routes to its own back-ends: a
  // packet down to them found "no route".)
  if (view_.in_subtree(self_, orphan)) return;
  Rank via = TreeView::kNone;
  std::size_t steps = 0;
  for (Rank r = orphan; r != TreeView::kNone && steps < 64; r = view_.parent(r), ++steps) {
    if (view_.parent(r) == self_) {
      via = r;
      break;
    }
  }
  const std::uint32_t* child = topology::find_rank(child_index_, via);
  for (Rank b : view_.backends_below(orphan)) {
    if (child) {
      route_.set(b, static_cast<RankMap::Value>(*child));
    } else {
      route_.erase(b);
    }
  }
}

bool LiveTree::graft(const Topology& subtree, Rank under) {
  return view_.graft(subtree, under);
}

std::optional<std::string> LiveTree::refuse_adoption(Rank orphan, Role role, std::uint32_t incarnation,
                                                     const Topology* subtree) const {
  if (!view_.contains(orphan) && subtree) return refuse_subtree(orphan, role, incarnation, *subtree);
  if (!view_.contains(orphan) || orphan == view_.root()) return "unknown rank";
  if (role != view_.role(orphan)) return "role does not match the topology";
  if (view_.in_subtree(self_, orphan)) return "this node is inside the orphan's subtree";
  if (view_.role(self_) == Role::backend) return "a back-end adopts no one";
  // The heir takes every process left without the root, whatever its height: it
  // stands in the root's place.
  const bool to_heir = view_.without_root(orphan) && view_.heir() == self_;
  if (!to_heir && view_.height(self_) < view_.height(orphan) + 1) return "adoption would make the tree deeper";
  if (incarnation <= view_.incarnation(orphan)) return "stale incarnation";
  return std::nullopt;
}

std::optional<std::string> LiveTree::refuse_subtree(Rank orphan, Role role, std::uint32_t incarnation,
                                                    const Topology& subtree) const {
  const TopologyNode& top = subtree.root();
  if (top.rank != orphan || top.role != role) return "the subtree it sent is not rooted at it";
  if (subtree.find(self_)) return "this node is inside the orphan's subtree";
  if (view_.role(self_) == Role::backend) return "a back-end adopts no one";
  for (const auto& n : subtree.nodes()) {
    if (view_.contains(n.rank)) return "its subtree holds rank " + std::to_string(n.rank) + ", held here elsewhere";
  }
  if (view_.height(self_) < subtree.heights().front() + 1) return "adoption would make the tree deeper";
  if (incarnation == 0) return "stale incarnation";
  return std::nullopt;
}

std::uint32_t LiveTree::next_incarnation(std::uint32_t current) {
  last_asked_ = std::max({current, view_.incarnation(self_), last_asked_}) + 1;
  return last_asked_;
}

std::vector<LiveTree::Report> LiveTree::reports() const {
  std::vector<Report> out;
  for (std::size_t i = 0; i < view_.held(); ++i) {
    if (const Rank rank = view_.held_rank(i); !view_.alive(rank)) out.push_back({true, rank, TreeView::kNone, 0});
  }
  for (std::size_t i = 0; i < view_.held(); ++i) {
    if (const Rank rank = view_.held_rank(i); view_.incarnation(rank) != 0) out.push_back({false, rank, view_.parent(rank), view_.incarnation(rank)});
  }
  return out;
}

}  // namespace canopy::core
