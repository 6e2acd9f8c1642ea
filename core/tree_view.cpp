#include "core/tree_view.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace canopy::core {

TreeView::TreeView(const Topology& topology) {
  const auto& nodes = topology.nodes();
  const std::vector<std::uint32_t> heights = topology.heights();
  entries_.reserve(nodes.size());
  index_ = topology.rank_index();  // entries_ follow the topology's order
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const TopologyNode& n = nodes[i];
    Entry e;
    e.rank = n.rank;
    e.parent = n.parent ? *n.parent : kNone;
    e.role = n.role;
    e.height = heights[i];
    e.launch_fanout = static_cast<std::uint32_t>(n.children.size());
    if (const auto* f = topology.frontier(n.rank)) e.launch_fanout = f->fanout;  // held without its children
    entries_.push_back(std::move(e));
  }
  // Each node's children listed in the topology's order: put in front, last first.
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto& children = nodes[i].children;
    for (auto c = children.rbegin(); c != children.rend(); ++c) {
      const std::uint32_t at = position(*c);
      entries_[at].next_sibling = entries_[i].first_child;
      entries_[i].first_child = at;
    }
  }
  root_ = topology.root().rank;
  for (const auto& n : nodes) {
    if (n.role != Role::backend) by_weight_.push_back(n.rank);
  }
  std::sort(by_weight_.begin(), by_weight_.end(), [&](Rank a, Rank b) { return lighter(a, b); });
}

std::uint32_t TreeView::position(Rank rank) const {
  if (auto at = index_.find(rank)) return *at;
  throw std::out_of_range("TreeView: rank " + std::to_string(rank) + " is not held");
}

TreeView::Entry* TreeView::find(Rank rank) {
  auto at = index_.find(rank);
  return at ? &entries_[*at] : nullptr;
}

std::vector<Rank> TreeView::children(Rank rank) const { return children_of(entry(rank)); }

std::vector<Rank> TreeView::children_of(const Entry& e) const {
  std::vector<Rank> out;
  each_child(e, [&](Rank c) { out.push_back(c); });
  return out;
}

void TreeView::append_child(Rank parent, Rank child) {
  const std::uint32_t at = position(child);
  entries_[at].next_sibling = kNoPosition;
  std::uint32_t* link = &entry(parent).first_child;
  while (*link != kNoPosition) link = &entries_[*link].next_sibling;
  *link = at;
}

void TreeView::remove_child(Rank parent, Rank child) {
  const std::uint32_t at = position(child);
  for (std::uint32_t* link = &entry(parent).first_child; *link != kNoPosition; link = &entries_[*link].next_sibling) {
    if (*link == at) {
      *link = entries_[at].next_sibling;
      entries_[at].next_sibling = kNoPosition;
      return;
    }
  }
}

const std::vector<Rank>& TreeView::orphans_of(Rank failed) const {
  static const std::vector<Rank> none;
  auto it = orphans_.find(failed);
  return it == orphans_.end() ? none : it->second;
}

void TreeView::make_room(std::size_t more) {
  // By an eighth at least, not the vector's doubling: a commnode that adopts one
  // orphan's subtree should not hold room for its whole part again.
  const std::size_t needed = entries_.size() + more;
  if (needed > entries_.capacity()) entries_.reserve(std::max(needed, entries_.size() + entries_.size() / 8));
}

void TreeView::hold(Entry e) {
  make_room(1);
  index_.add(e.rank);
  entries_.push_back(std::move(e));
}

bool TreeView::lighter(Rank a, Rank b) const {
  const auto &x = entry(a), &y = entry(b);
  if (x.height != y.height) return x.height < y.height;
  if (x.launch_fanout != y.launch_fanout) return x.launch_fanout < y.launch_fanout;
  return a < b;
}

bool TreeView::graft(const Topology& subtree, Rank under) {
  const auto& nodes = subtree.nodes();
  const TopologyNode& top = nodes.front();
  const Entry* up = find(under);
  if (!up || up->role == Role::backend) return false;
  const Entry* held = find(top.rank);
  const bool known = held != nullptr;
  if (known && (held->role != top.role || held->first_child != kNoPosition)) return false;
  for (std::size_t i = 1; i < nodes.size(); ++i) {
    if (contains(nodes[i].rank)) return false;
  }
  const std::vector<std::uint32_t> height = subtree.heights();
  make_room(nodes.size());
  auto weigh = [&](Rank r) {
    by_weight_.insert(std::upper_bound(by_weight_.begin(), by_weight_.end(), r,
                                       [&](Rank a, Rank b) { return lighter(a, b); }),
                      r);
  };
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const TopologyNode& n = nodes[i];
    if (i == 0 && known) {  // held without its children: they come now
      Entry& e = entry(n.rank);
      if (n.role == Role::backend) continue;
      std::erase(by_weight_, n.rank);  // its weight may change
      e.launch_fanout = std::max(e.launch_fanout, static_cast<std::uint32_t>(n.children.size()));
      e.height = std::max(e.height, height[0]);
      weigh(n.rank);
      continue;
    }
    Entry e;
    e.rank = n.rank;
    e.parent = i == 0 ? under : *n.parent;
    e.role = n.role;
    e.launch_fanout = static_cast<std::uint32_t>(n.children.size());
    e.height = height[i];
    if (const auto* f = subtree.frontier(n.rank)) e.launch_fanout = f->fanout;
    hold(std::move(e));
    if (i == 0) append_child(under, n.rank);
    if (n.role != Role::backend) weigh(n.rank);
  }
  // Every node held: each one's children listed, in the subtree's order.
  for (const TopologyNode& n : nodes) {
    for (Rank c : n.children) append_child(n.rank, c);
  }
  return true;
}

bool TreeView::in_subtree(Rank node, Rank top) const {
  // Bounded walk: a view built from stale reports must not loop forever.
  std::size_t steps = 0;
  for (Rank r = node; r != kNone && steps <= entries_.size(); r = entry(r).parent, ++steps) {
    if (r == top) return true;
  }
  return false;
}

Rank TreeView::live_ancestor(Rank rank) const {
  std::size_t steps = 0;
  for (Rank r = entry(rank).parent; r != kNone && steps <= entries_.size(); r = entry(r).parent, ++steps) {
    if (entry(r).alive) return r;
  }
  return kNone;
}

std::vector<Rank> TreeView::backends_below(Rank rank) const {
  std::vector<Rank> out, stack{rank};
  while (!stack.empty() && stack.size() <= entries_.size()) {
    Rank r = stack.back();
    stack.pop_back();
    const Entry& e = entry(r);
    if (e.role == Role::backend) out.push_back(r);
    each_child(e, [&](Rank c) { stack.push_back(c); });
  }
  std::sort(out.begin(), out.end());
  return out;
}

TreeView::Place TreeView::place(Rank rank) const {
  Place out;
  const Entry& me = entry(rank);
  if (me.parent != kNone) {
    each_child(entry(me.parent), [&](Rank sibling) { out.siblings += sibling != rank && entry(sibling).alive ? 1 : 0; });
  }
  std::size_t steps = 0;  // bounded walks, as in_subtree's
  for (Rank r = me.parent; r != kNone && steps <= entries_.size(); r = entry(r).parent, ++steps) ++out.depth;
  // Depth first, each live process with its distance below `rank`.
  std::vector<std::pair<Rank, std::uint32_t>> stack{{rank, 0}};
  while (!stack.empty() && stack.size() <= entries_.size()) {
    const auto [r, below] = stack.back();
    stack.pop_back();
    if (r != rank) {
      ++out.descendants;
      out.backends += entry(r).role == Role::backend ? 1 : 0;
      out.height = std::max(out.height, below);
    }
    each_child(entry(r), [&, below = below](Rank child) {
      if (entry(child).alive) stack.emplace_back(child, below + 1);
    });
  }
  return out;
}

bool TreeView::attached(Rank rank) const {
  if (!contains(rank)) return false;
  for (std::size_t steps = 0; steps <= entries_.size() && rank != root_; ++steps) {
    const Entry& e = entry(rank);
    if (!e.alive || e.parent == kNone) return false;
    rank = e.parent;
  }
  return rank == root_;
}

bool TreeView::apply_failure(Rank rank) {
  Entry* failed = find(rank);
  if (!failed || !failed->alive) return false;
  Entry& e = *failed;
  e.alive = false;
  // Its children as they stood: each orphan's place among them spreads the orphans
  // over the adopters, and must not shift as adoptions take them away one by one.
  if (e.first_child == kNoPosition) orphans_.erase(rank);
  else orphans_[rank] = children_of(e);
  // Its parent lets go of it; its own children stay attached until adopted.
  if (e.parent != kNone) remove_child(e.parent, rank);
  return true;
}

bool TreeView::apply_adoption(Rank orphan, Rank adopter, std::uint32_t incarnation) {
  Entry* found = find(orphan);
  if (!found || !contains(adopter) || orphan == root_) return false;
  Entry& o = *found;
  // One total order on reports, whatever order they arrive in: by incarnation, then
  // by adopter rank (a tie needs a forged or buggy report; every process must still
  // end with the same tree).
  if (incarnation < o.incarnation || (incarnation == o.incarnation && adopter <= o.parent)) return false;
  if (in_subtree(adopter, orphan)) return false;
  if (adopter == root_) entry(root_).alive = true;  // a front-end re-attached
  if (o.parent != kNone) remove_child(o.parent, orphan);
  o.parent = adopter;
  o.incarnation = incarnation;
  o.alive = true;
  append_child(adopter, orphan);  // in no list now
  return true;
}

bool TreeView::add_backend(Rank rank, Rank parent) {
  Entry* up = find(parent);
  if (contains(rank) || !up || up->role == Role::backend) return false;
  Entry e;
  e.rank = rank;
  e.parent = parent;
  hold(std::move(e));
  append_child(parent, rank);
  return true;
}

bool TreeView::adoptable_by(Rank candidate, Rank orphan, std::uint32_t min_height) const {
  const Entry& c = entry(candidate);
  return c.alive && c.role != Role::backend && c.height >= min_height && candidate != orphan &&
         !in_subtree(candidate, orphan);
}

std::size_t TreeView::spread_slot(Rank orphan) const {
  const Entry& o = entry(orphan);
  if (o.parent == kNone) return orphan;
  const Entry& p = entry(o.parent);
  const std::vector<Rank> siblings = p.alive ? children_of(p) : orphans_of(o.parent);
  std::size_t slot = 0;
  for (Rank s : siblings) {
    if (s == orphan) return slot;
    // Only siblings of the orphan's height share its candidates.
    if (entry(s).height == o.height) ++slot;
  }
  return orphan;  // not among them (a view built from odd reports): any spread will do
}

Rank TreeView::heir() const {
  if (entry(root_).alive) return kNone;
  Rank best = kNone;
  for (const Entry& e : entries_) {
    if (e.rank < best && e.role == Role::commnode && without_root(e.rank)) best = e.rank;
  }
  return best;
}

bool TreeView::without_root(Rank rank) const {
  return contains(rank) && rank != root_ && !entry(root_).alive && entry(rank).alive && live_ancestor(rank) == kNone;
}

std::vector<Rank> TreeView::left_without_root() const {
  std::vector<Rank> out;
  if (entry(root_).alive) return out;
  for (const Entry& e : entries_) {
    if (without_root(e.rank)) out.push_back(e.rank);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Rank> TreeView::potential_adopters(Rank orphan, std::size_t limit) const {
  std::vector<Rank> out;
  if (!contains(orphan) || limit == 0) return out;
  if (without_root(orphan)) {
    if (const Rank h = heir(); h != kNone && h != orphan && !in_subtree(h, orphan)) out.push_back(h);
    return out;
  }
  const std::uint32_t min_height = entry(orphan).height + 1;
  const Rank failed = entry(orphan).parent;
  const std::size_t slot = spread_slot(orphan);
  auto listed = [&](Rank r) { return std::find(out.begin(), out.end(), r) != out.end(); };

  // 1. The live children of the nearest live ancestor (the failed parent's siblings
  //    when only the parent failed), then the ancestor itself: close to where the
  //    orphan was, so paths to the root stay short and the shape balanced.
  Rank ancestor = live_ancestor(orphan);
  if (ancestor == failed && failed != kNone) ancestor = live_ancestor(failed);  // asked in advance
  if (ancestor != kNone) {
    std::vector<Rank> local;
    each_child(entry(ancestor), [&](Rank s) {
      if (s != failed && adoptable_by(s, orphan, min_height)) local.push_back(s);
    });
    std::sort(local.begin(), local.end(), [&](Rank a, Rank b) { return lighter(a, b); });
    for (std::size_t i = 0; i < local.size() && out.size() < limit; ++i) {
      out.push_back(local[(slot + i) % local.size()]);
    }
    if (out.size() < limit && adoptable_by(ancestor, orphan, min_height)) out.push_back(ancestor);
  }

  // 2. Everyone else who qualifies, by weight, round-robin from the orphan's slot.
  auto first = std::partition_point(by_weight_.begin(), by_weight_.end(),
                                    [&](Rank r) { return entry(r).height < min_height; });
  const std::size_t count = static_cast<std::size_t>(by_weight_.end() - first);
  for (std::size_t i = 0; i < count && out.size() < limit; ++i) {
    Rank r = first[(slot + i) % count];
    if (r != failed && !listed(r) && adoptable_by(r, orphan, min_height)) out.push_back(r);
  }
  return out;
}

}  // namespace canopy::core
