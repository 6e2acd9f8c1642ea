// LiveTree: one process's view of the live tree and what follows from it: the
// routing table (back-end rank -> child), whether an orphan may be adopted here, the
// incarnation to ask for next, and the reports that a process joining late missed.
//
// Pure logic, no I/O: the node core floods the reports and owns the links. Not
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "canopy/topology.h"
#include "core/rank_map.h"
#include "core/tree_view.h"

namespace canopy::core {

class LiveTree {
 public:
  // The launch shape of `topology`, seen from process `self`, whose children get
  // child indexes in the order of the topology (0, 1, ...).
  LiveTree(const Topology& topology, Rank self);

  const TreeView& view() const { return view_; }
  // The child through which back-end `backend` is reached, if it is below.
  std::optional<std::size_t> route_to(Rank backend) const;
  std::size_t routes() const { return route_.size(); }
  // The routes, taken out of a tree about to be dropped (a commnode folding its
  // part: core/folded_part.h); it routes nothing after.
  RankMap take_routes() { return std::move(route_); }

  // `rank` has become this process's child `index` (an adopted orphan).
  void note_child(Rank rank, std::size_t index);

  // A failure report about `rank` at `incarnation` (if the reporter said); true if it
  // was news. A report about an incarnation older than the one known here (the
  // process was adopted since) is stale: false.
  bool apply_failure(Rank rank, std::optional<std::uint32_t> incarnation = std::nullopt);
  // An adoption report; true if it was news (reports are applied in one total
  // order, TreeView::apply_adoption). The back-ends below the orphan are then routed
  // through whichever child of this process is now their ancestor, if any.
  bool apply_adoption(Rank orphan, Rank adopter, std::uint32_t incarnation);
  // A back-end joining the running tree under `parent` (open attach), before the
  // adoption report of its join is applied: TreeView::add_backend. False if the view
  // refuses it (the rank is known, or the parent is not a commnode of it).
  bool add_backend(Rank rank, Rank parent);

  // Why `orphan` (of `role`, asking under `incarnation`) may not be adopted by this
  // process, or nothing if it may: it must be known and not the root, of its
  // topology role, outside whose subtree this process is, not deeper than this
  // process allows (the tree never gets deeper; but the heir, in the place of a lost
  // root, takes every process left without it), under an incarnation above every
  // one reported for it; and a back-end adopts no one.
  // An orphan this process does not hold is judged by `subtree`, which it sent (its
  // live subtree, rooted at it): it must hold no rank held here.
  std::optional<std::string> refuse_adoption(Rank orphan, Role role, std::uint32_t incarnation,
                                             const Topology* subtree = nullptr) const;

  // An orphan's subtree, held below `under` (TreeView::graft); its back-ends are
  // routed once the adoption report is applied. False, changing nothing, if the view
  // refuses it.
  bool graft(const Topology& subtree, Rank under);

  // The incarnation of this process's next adoption request: above its `current`
  // one, above any reported for it, and above any it asked for before (an adopter it
  // gave up on may still accept late and report that one).
  std::uint32_t next_incarnation(std::uint32_t current);

  struct Report {
    bool failure;             // true: `rank` is gone; false: `rank` adopted by `adopter`
    Rank rank;
    Rank adopter;
    std::uint32_t incarnation;
  };
  // Every report applied here, failures first, as a late joiner needs them.
  std::vector<Report> reports() const;

 private:
  void update_routes(Rank orphan);
  std::optional<std::string> refuse_subtree(Rank orphan, Role role, std::uint32_t incarnation,
                                            const Topology& subtree) const;

  Rank self_;
  TreeView view_;
  RankMap route_;                                       // back-end rank -> child index, as runs
  // (child rank, child index), ascending by rank: 8 bytes a child, where a hash map
  // took about 40 (docs/scale.md, "A commnode's state per child"). The order of the
  // processes held, which reports() follows, is the view's (TreeView::held_rank).
  std::vector<std::pair<Rank, std::uint32_t>> child_index_;
  std::uint32_t last_asked_ = 0;
};

}  // namespace canopy::core
