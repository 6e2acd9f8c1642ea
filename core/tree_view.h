// TreeView: the live shape of the tree as one process knows it.
//
// Every process starts from the launch topology and applies the failure and
// adoption reports that flood the tree. Reports may arrive duplicated, late or out
// of order: applying a failure twice changes nothing, and an adoption report
// carries the orphan's incarnation number, so an older adoption of the same orphan
// never overrides a newer one.
//
// It also answers the orphan's question: "my parent died; whom do I ask to adopt
// me?" (potential_adopters). Pure logic, no I/O; not thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <unordered_map>
#include <vector>

#include "canopy/rank_index.h"
#include "canopy/topology.h"

namespace canopy::core {

class TreeView {
 public:
  static constexpr Rank kNone = std::numeric_limits<Rank>::max();

  explicit TreeView(const Topology& topology);

  bool contains(Rank rank) const { return index_.contains(rank); }
  // The processes held, in the order held: the topology's, then grafts and joins.
  std::size_t held() const { return entries_.size(); }
  Rank held_rank(std::size_t position) const { return entries_[position].rank; }
  Role role(Rank rank) const { return entry(rank).role; }
  Rank root() const { return root_; }
  // The current parent (kNone for the root).
  Rank parent(Rank rank) const { return entry(rank).parent; }
  // Its children in the live tree, in order (the topology's, then as adopted).
  std::vector<Rank> children(Rank rank) const;
  bool alive(Rank rank) const { return entry(rank).alive; }
  std::uint32_t incarnation(Rank rank) const { return entry(rank).incarnation; }
  // Height of the node's subtree at launch (0 for a back-end; at least 1 for a
  // commnode, even one launched without children for back-ends to join under, as in
  // open attach). Adoption never lets a subtree grow beyond it, so it bounds the
  // current height.
  std::uint32_t height(Rank rank) const { return entry(rank).height; }

  // Whether `rank` is held with what is below it: a back-end, or a commnode with
  // children (not one held without them, a frontier of a part).
  bool holds_below(Rank rank) const {
    return contains(rank) && (role(rank) == Role::backend || entry(rank).first_child != kNoPosition);
  }
  // True if `node` is `top` or below it, following current parents.
  bool in_subtree(Rank node, Rank top) const;
  // Whether `rank` hangs from the root through live processes only (an orphan, or
  // anything below one, does not).
  bool attached(Rank rank) const;
  // The nearest live ancestor of `rank` (kNone if none).
  Rank live_ancestor(Rank rank) const;
  // The back-ends in `rank`'s current subtree (itself, if a back-end).
  std::vector<Rank> backends_below(Rank rank) const;

  // Where a process stands in the live tree, as a filter is told it (FilterContext,
  // MRNet's TopologyLocalInfo). Live processes only: a failed one, and whatever still
  // hangs below it until adopted, are not counted.
  struct Place {
    std::uint32_t siblings = 0;     // the other live children of its parent
    std::uint32_t descendants = 0;  // live processes below it
    std::uint32_t backends = 0;     // live back-ends below it
    std::uint32_t depth = 0;        // hops up to the root
    std::uint32_t height = 0;       // hops down to its deepest live descendant
  };
  // O(size of its subtree + depth).
  Place place(Rank rank) const;

  // A failure report: `rank` is gone. Returns false if it was already known. The
  // root may fail too (a front-end lost while FaultToleranceOptions::keep_tree_for
  // keeps the tree): its children stay attached to it until adopted, and the first
  // adoption of a process by the root (a front-end re-attached) makes it alive again.
  bool apply_failure(Rank rank);

  // While the root is gone: the process that acts as the root (paper 004 §IV-C's
  // promoted child), the lowest-ranked live commnode none of whose ancestors is
  // alive (at first the lowest live child of the front-end; once it is lost too, the
  // lowest of the processes it left). Every process computes it alone from its own
  // view, so they agree once the same failure reports have reached them. kNone while
  // the root is alive, or if no commnode qualifies. O(size of the tree).
  Rank heir() const;
  // Whether `rank` is live and hangs from no live process while the root is gone:
  // a process that lost the front-end (or the promoted root) above it, and that the
  // heir adopts, or the heir itself.
  bool without_root(Rank rank) const;
  // Every live process without_root(), ascending. O(size of the tree).
  std::vector<Rank> left_without_root() const;

  // An adoption report: `orphan`, with its new `incarnation`, is now a child of
  // `adopter`. Reports are applied in one total order, (incarnation, adopter rank):
  // ignored (false) when the view already has a report of the orphan that is not
  // lower, when a rank is unknown, or when the adopter is inside the orphan's
  // subtree (a stale report that would make a cycle).
  bool apply_adoption(Rank orphan, Rank adopter, std::uint32_t incarnation);

  // The subtree of an orphan this view does not hold (Topology::make_subtree: it
  // came with the orphan's request, or with the report of its adoption), held below
  // `under`, a commnode or the root of this view; the adoption report that follows
  // gives the orphan its incarnation. Its root may be held already without its
  // children (a frontier): it gets them, and keeps its parent until that report.
  // False, changing nothing, if `under` is not a commnode here or any other of its
  // ranks is held.
  bool graft(const Topology& subtree, Rank under);

  // A back-end that joined the running tree (open attach): `rank`, not in the view,
  // becomes a live child of `parent` (a commnode or the front-end in the view) at
  // incarnation 0; its join's adoption report then gives it its incarnation. False,
  // changing nothing, otherwise.
  bool add_backend(Rank rank, Rank parent);

  // Up to `limit` potential adopters for `orphan`, whose parent has failed, in the
  // order to try them. Every one is a live commnode or the front-end, outside the
  // orphan's subtree, whose launch height exceeds the orphan's, so the tree never
  // gets deeper. First the live children of the orphan's nearest live ancestor
  // (other than the failed parent: its siblings, when only the parent failed), by
  // weight (subtree height, then fan-out at launch, then rank); then that ancestor;
  // then every other candidate by weight. Within the first group and within the
  // rest, the orphan starts at its slot, its place among the failed parent's
  // children of its height as they stood at the failure (round-robin): each orphan
  // computes it alone, and the orphans of one failed parent get consecutive slots,
  // so their first choices differ in count by at most one, whatever their ranks.
  // Cost: O(fan-out + limit) subtree checks, independent of the tree's size.
  // Asked while the parent is alive, it answers as if the parent had failed (the
  // first of them is where a standby link goes). An orphan without_root() has one
  // potential adopter: the heir (none if it is the heir).
  std::vector<Rank> potential_adopters(Rank orphan, std::size_t limit = 16) const;

 private:
  // A position in entries_ (entries are never removed, so positions stay).
  static constexpr std::uint32_t kNoPosition = std::numeric_limits<std::uint32_t>::max();
  // 32 bytes: a node's children are a list through their entries (first_child, then
  // each one's next_sibling), where a std::vector of their ranks took 24 bytes in
  // every entry and an allocation in each commnode's (docs/scale.md, "A commnode's
  // state per child"). A process is in at most one list, its parent's; a failed
  // one leaves it and keeps its own children listed until they are adopted.
  struct Entry {
    Rank rank = kNone;
    Rank parent = kNone;
    std::uint32_t first_child = kNoPosition;
    std::uint32_t next_sibling = kNoPosition;
    std::uint32_t incarnation = 0;
    std::uint32_t height = 0;
    std::uint32_t launch_fanout = 0;
    Role role = Role::backend;
    bool alive = true;
  };
  // Calls `f` with the rank of each child of `e`, in order; `f` must not change lists.
  template <class F>
  void each_child(const Entry& e, F&& f) const {
    for (std::uint32_t p = e.first_child; p != kNoPosition; p = entries_[p].next_sibling) f(entries_[p].rank);
  }
  std::vector<Rank> children_of(const Entry& e) const;
  // Lists `child` (held, in no list) last among `parent`'s children.
  void append_child(Rank parent, Rank child);
  // Takes `child` out of `parent`'s list, if it is there.
  void remove_child(Rank parent, Rank child);
  // The entry of a held rank; std::out_of_range for any other.
  const Entry& entry(Rank rank) const { return entries_[position(rank)]; }
  Entry& entry(Rank rank) { return entries_[position(rank)]; }
  std::uint32_t position(Rank rank) const;
  // The entry of `rank`, or null if it is not held.
  Entry* find(Rank rank);
  const Entry* find(Rank rank) const { return const_cast<TreeView*>(this)->find(rank); }
  // A failed commnode's children as they stood when it failed (empty if none).
  const std::vector<Rank>& orphans_of(Rank failed) const;
  // Holds `e` (of a rank not held).
  void hold(Entry e);
  // Room for `more` entries, grown by at least an eighth.
  void make_room(std::size_t more);
  bool adoptable_by(Rank candidate, Rank orphan, std::uint32_t min_height) const;
  // The order of by_weight_: (launch height, launch fan-out, rank).
  bool lighter(Rank a, Rank b) const;
  // The orphan's place among its (failed) parent's children of its own height, as
  // they stood when the parent failed; its rank if it is not among them.
  std::size_t spread_slot(Rank orphan) const;

  // Every process held, in the order held (the topology's, then grafts and joins),
  // found by rank through index_: 48 bytes a process, where a hash map of entries
  // took about 100 (docs/scale.md, "What a process of the tree holds").
  std::vector<Entry> entries_;
  RankIndex index_;
  // A failed commnode's children as they stood when it failed, in order (see
  // spread_slot); apart from the entries, which most processes never need it in.
  std::unordered_map<Rank, std::vector<Rank>> orphans_;
  Rank root_ = kNone;
  // Commnodes and the front-end ordered by (height, launch fan-out, rank); the
  // candidates of height >= h are a suffix found by binary search.
  std::vector<Rank> by_weight_;
};

}  // namespace canopy::core
