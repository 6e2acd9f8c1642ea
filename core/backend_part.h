// BackendPart: what a commnode (or the front-end) sends its back-end children of the
// tree, instead of the whole of it (docs/scale.md, "What a process holds").
//
// A back-end needs its ancestors and their children, with their endpoints, to find
// an adopter, and view 0's members: Topology::backend_part() and those members as
// ranges. Every back-end child of one parent gets the same part, built once and kept
// up to date with the ports learnt after it; so a launch sends each back-end
// O(fan-out x depth) bytes, whatever the tree's size. The ports learnt after launch
// go to a back-end only for the commnodes it may ask to adopt it: its ancestors and
// its parent's siblings (backend_needs_port), O(fan-out + depth) of them. Not with
// LaunchPlan::whole_tree (MRNet's model), nor where the part would be the whole tree
// anyway (a flat tree).
// Pure logic; on the node's io_context thread.
#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "canopy/topology.h"
#include "core/plan.h"
#include "core/rank_set.h"

namespace canopy::core {

// Whether a back-end child of `parent` needs the port of `rank` (held in `topology`)
// to find an adopter, paper 004's choice: `parent`, its ancestors, and its siblings
// (the failed parent's siblings, and the nearest live ancestor). The other commnodes
// of its part, its ancestors' siblings, come first only if its parent and
// grandparent fail together; without their ports it skips them and asks the
// nearest live ancestor next, the root there (docs/fault-tolerance.md). Their
// ports, two bytes each, made a back-end of fan-out 100 and depth 3 grow by 200
// bytes (docs/scale.md, "A back-end keeps its part folded").
bool backend_needs_port(const Topology& topology, Rank parent, Rank rank);
// Those of them whose port `part` (a back-end child of `parent`'s) does not hold yet.
std::vector<Rank> adopter_ports_missing(const Topology& part, Rank parent);

class BackendPart {
 public:
  // The part for a back-end child of `self` in `whole` (which must hold it), or null
  // when a back-end child gets the whole tree.
  const Topology* get(const Topology& whole, Rank self, const LaunchPlan& plan);
  // View 0's members, as ranges, for a back-end child that gets a part.
  const std::vector<std::pair<Rank, Rank>>& view_zero(const Topology& whole, const LaunchPlan& plan);
  // Whether a back-end child's part holds `rank` (true when it gets the whole tree).
  bool holds(const Topology& whole, Rank self, const LaunchPlan& plan, Rank rank);
  // Whether a back-end child is sent the port of `rank`: backend_needs_port, or any
  // rank when back-ends get the whole tree.
  bool sends_port(const Topology& whole, Rank self, const LaunchPlan& plan, Rank rank);
  // A port learnt after the part was built.
  void set_port(Rank rank, std::uint16_t port);
  // The tree changed shape (a back-end joined): build the part again when next asked.
  void invalidate() {
    part_.reset();
    ranks_.reset();
  }
  // Every back-end child has been sent its part: the part goes (about 100 bytes a
  // node, F x depth nodes), its ranks stay for holds(). Should one be asked for again
  // (a back-end child that rejoins or joins), it is built again from the tree then,
  // with the ports learnt since.
  void release() { part_.reset(); }

 private:
  std::unique_ptr<Topology> part_;  // on the heap: a back-end, which has no back-end children, holds none
  // The ranks of the part last built, as runs, which holds() reads; null until built.
  std::unique_ptr<RankSet> ranks_;
  bool whole_ = false;  // a back-end child gets the whole tree (decided with part_)
  std::optional<std::vector<std::pair<Rank, Rank>>> view_zero_;
};

}  // namespace canopy::core
