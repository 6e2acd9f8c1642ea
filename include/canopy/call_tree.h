// CallTree: a call-path prefix tree in the style of STAT, and its packet encoding.
//
// Each back-end adds its stack traces (frames outermost first, e.g. {"_start",
// "main", "MPI_Barrier"}) under its rank; trees from many back-ends merge into one
// whose nodes say which ranks passed through them. Ranks with the same set form an
// equivalence class of process behaviour. The built-in `prefix_tree` filter merges
// these trees inside the network; a front-end reads the result back with
// from_packet() and renders it with to_dot().
//
//   canopy::CallTree tree;
//   tree.add_path({"_start", "main", "solve", "MPI_Allreduce"}, backend.rank());
//   backend.send(stream, tree.to_packet(kStackTag));
//   ...
//   auto merged = canopy::CallTree::from_packet(received.packet);
//   if (merged) std::cout << merged->to_dot();
//
// Semantics. Node 0 is the root, a virtual frame with an empty name. Every node
// carries the set of ranks whose call paths pass through it: the root holds every
// rank that added a path (an empty path too), and a node's set is a subset of its
// parent's. Merging is a union of paths and of rank sets, so it is associative,
// commutative and idempotent: merging the same tree twice changes nothing, and
// merge order does not matter.
//
// Packet encoding, "%aud %as %aud %aud" (four arrays, n >= 1 nodes):
//   1. parents  (n x uint32): the index of each node's parent; node 0 is the root
//                and has parent 0xFFFFFFFF (kNoParent); every other node's parent
//                is an earlier node (parents[i] < i).
//   2. names    (n x string): the frame of each node; the root's is "".
//   3. offsets  (n + 1 x uint32): node i's ranks are ranks[offsets[i] .. offsets[i+1]);
//                offsets[0] = 0, non-decreasing, offsets[n] = the length of ranks.
//   4. ranks    (uint32): the rank sets, concatenated; each sorted and distinct.
// to_packet() writes the canonical form: nodes in depth-first pre-order, siblings
// sorted by name (byte-wise), so two trees with equal content encode identically.
// from_packet() accepts any node order that keeps parents first and merges
// siblings that share a name; it rejects everything else above with an error that
// names the offending node or value.
//
// Cost: ranks are stored as sorted arrays, 4 bytes per rank per node; fine for
// the thousands of ranks of a typical job, heavy for a million ranks on a deep tree
// (STAT uses bit vectors there).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "canopy/packet.h"
#include "canopy/result.h"

namespace canopy {

class CallTree {
 public:
  using NodeId = std::uint32_t;
  static constexpr NodeId kRoot = 0;
  static constexpr std::uint32_t kNoParent = 0xFFFFFFFFu;
  // The packet format, for error messages and for users who unpack by hand.
  static constexpr const char* kFormat = "%aud %as %aud %aud";

  // An empty tree: the root alone, with no ranks.
  CallTree();

  // Adds one call path of `rank`, outermost frame first. An empty path records the
  // rank at the root only.
  void add_path(const std::vector<std::string>& frames_outermost_first, Rank rank);

  // Adds every path of `other` (union of paths and rank sets).
  void merge(const CallTree& other);

  // Merges a tree in the packet encoding. Validates the whole packet first, so a
  // malformed packet leaves this tree unchanged. Packets come from the network:
  // the error names what is wrong, never trusts a size or an index.
  Result<void> merge(const Packet& packet);

  // The canonical encoding (see above) with tag `tag`.
  Packet to_packet(Tag tag) const;
  static Result<CallTree> from_packet(const Packet& packet);

  // Graphviz DOT: one node per frame, each edge labelled with the child's rank
  // count and ranges, e.g. "5:[0-3,7]".
  std::string to_dot() const;

  std::size_t node_count() const { return nodes_.size(); }
  const std::string& name(NodeId node) const { return nodes_[node].name; }
  // Sorted, distinct.
  std::span<const Rank> ranks(NodeId node) const { return nodes_[node].ranks; }
  // Sorted by name.
  std::span<const NodeId> children(NodeId node) const { return nodes_[node].children; }

  // Equal content: the same paths with the same rank sets (however built).
  bool operator==(const CallTree& other) const;

 private:
  struct Node {
    std::string name;
    std::vector<Rank> ranks;       // sorted, distinct
    std::vector<NodeId> children;  // sorted by name
  };

  // The child of `parent` named `name`, created if absent.
  NodeId child(NodeId parent, std::string_view name);
  // ranks(node) ∪= ranks (sorted, distinct).
  void add_ranks(NodeId node, std::span<const Rank> ranks);

  std::vector<Node> nodes_;
};

// Ranks (sorted, distinct) as ranges: {0,1,2,3,7,9,10} -> "0-3,7,9-10".
std::string format_rank_ranges(std::span<const Rank> ranks);

}  // namespace canopy
