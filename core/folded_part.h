// FoldedPart: a process's part of the tree while nothing needs it whole
// (docs/scale.md, "A back-end keeps its part folded", "A commnode folds its part").
//
// A back-end's part (its ancestors and their children) is what it needs to find an
// adopter. Until its parent fails, or news about its part arrives, or someone asks
// for its tree, it needs none of it but its parent and the root. Held as a Topology
// and a live tree, a part costs about 230 bytes a node (301 nodes, 69 KB, at fan-out
// 100 and depth 3); held as the message its parent sent (runs: a few bytes a node),
// about 1 KB. The node unfolds it into a Topology the first time anything reads the
// tree; what was learnt meanwhile (ports, from `endpoints`) is applied then. Once
// nothing has read it for a while, the node folds it again, keeping the live tree's
// changes since launch to apply when it next unfolds (set_live, Node::fold_part).
//
// A commnode's part adds its subtree: once that is up, a wave reads only its routes
// (back-end -> child) and its child table, so it folds too, keeping its routes here
// (set_routes) and its child table in the node. The subtrees of orphans it grafts
// are kept as messages too (add_graft), grafted again as it unfolds.
#pragma once

#include <capnp/common.h>
#include <kj/array.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "canopy.capnp.h"
#include "canopy/result.h"
#include "canopy/topology.h"
#include "core/live_tree.h"
#include "core/rank_map.h"
#include "core/rank_set.h"
#include "core/tree_view.h"

namespace canopy::core {

class FoldedPart {
 public:
  // `decoded` is `message` decoded (the node did, to check it), holding `self`, which
  // has a parent.
  FoldedPart(wire::Topology::Reader message, const Topology& decoded, Rank self);

  struct Held {
    Rank rank = 0;
    Role role = Role::backend;
    std::string host;
  };
  Rank parent() const { return parent_.rank; }
  Rank root() const { return root_; }
  // TreeView::place of this back-end in its part as launched, which is the live one
  // while it is folded: news about its part unfolds it.
  const TreeView::Place& place() const { return place_; }
  // This process and its parent, what Node::describe says of them; null for any
  // other rank, which only the unfolded part holds.
  const Held* held(Rank rank) const;
  // Listening ports learnt after launch, as the parent sent them (ranks as runs, a
  // port each: about 2 bytes a port); kept as they came, applied in order when it
  // unfolds, so that a later port for a rank replaces an earlier one.
  // `learnt`: what it says (read_endpoints, which the caller checked it with).
  void add_endpoints(wire::Endpoints::Reader endpoints, const std::vector<std::pair<Rank, std::uint16_t>>& learnt);
  // Whether it knows the port of every potential adopter (backend_needs_port): what
  // a process holding the part unfolded reads from its topology.
  bool ports_known() const { return unknown_ports_.empty(); }
  // The part as a Topology, with the ports learnt.
  Result<Topology> unfold() const;

  // A part unfolded to heal, folded again once the heal has settled
  // (Node::fold_part): what its live tree had changed since launch, as the reports a
  // late joiner is sent (LiveTree::reports), to apply again when it unfolds; and its
  // parent, that parent's incarnation and its place, as the live tree had them, for
  // what reads them while it is folded.
  void set_live(std::vector<LiveTree::Report> reports, Held parent, std::uint32_t parent_incarnation,
                TreeView::Place place);
  const std::vector<LiveTree::Report>& reports() const { return reports_; }
  // An orphan's subtree grafted below `under` while it was unfolded (Node::graft),
  // kept as a message (a few bytes a node); grafts() decodes them, in order.
  void add_graft(const Topology& subtree, Rank under);
  struct Graft {
    Topology subtree;
    Rank under;
  };
  std::vector<Graft> grafts() const;
  // A commnode's routes, as its live tree had them when it folded
  // (LiveTree::take_routes): what a wave reads.
  void set_routes(RankMap routes);
  std::optional<std::size_t> route_to(Rank backend) const;
  // 0 as launched.
  std::uint32_t parent_incarnation() const { return parent_incarnation_; }
  // Heap bytes it holds (for the log).
  std::size_t bytes() const;

 private:
  // The messages it keeps are packed (capnp's packed encoding: runs of zero bytes,
  // most of a small message's words, cost a byte), read as it unfolds: a back-end
  // orphan's subtree grafted took 360 bytes flat (stop 84).
  kj::Array<kj::byte> message_;  // a message whose root is the wire::Topology: what unfold() reads of it
  std::vector<kj::Array<kj::byte>> endpoints_;  // messages whose root is a wire::Endpoints
  RankSet unknown_ports_;  // the commnodes (and front-end) of the part whose port is not known yet
  Rank root_ = 0;
  Held self_, parent_;
  TreeView::Place place_;
  std::vector<LiveTree::Report> reports_;
  std::uint32_t parent_incarnation_ = 0;
  // What a commnode keeps of what is below it; null at a back-end (8 bytes, not 56).
  struct Below {
    RankMap routes;
    std::vector<std::pair<kj::Array<kj::byte>, Rank>> grafts;  // a wire::Topology (a subtree), and where it went
  };
  std::unique_ptr<Below> below_;
  Below& below();
};

}  // namespace canopy::core
