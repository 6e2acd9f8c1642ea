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
//   3. offsets  (n + 1 x uint32): node i's rank runs are runs[offsets[i] ..
//                offsets[i+1]) (counted in runs); offsets[0] = 0, non-decreasing,
//                offsets[n] = the number of runs.
//   4. runs     (2 x uint32 per run): each node's rank set as runs of consecutive
//                ranks, FIRST LAST (inclusive), concatenated; within a node the runs
//                ascend and neither overlap nor touch (LAST + 1 < next FIRST).
// to_packet() writes the canonical form: nodes in depth-first pre-order, siblings
// sorted by name (byte-wise), so two trees with equal content encode identically.
// from_packet() accepts any node order that keeps parents first and merges
// siblings that share a name; it rejects everything else above with an error that
// names the offending node or value.
//
// Cost: a rank set costs 8 bytes per run of consecutive ranks, in memory and on the
// wire: the 1,000 ranks of a frame that every rank passes through are one run, and
// a tree stays small for large jobs as long as its classes are made of few runs
// (STAT's bit vectors cost one bit per rank of the job per node instead).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "canopy/packet.h"
#include "canopy/result.h"

namespace canopy {

// Ranks first..last, inclusive.
struct RankRun {
  Rank first = 0;
  Rank last = 0;
  bool operator==(const RankRun&) const = default;
};

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
  // The node's ranks, sorted and distinct (expanded from its runs).
  std::vector<Rank> ranks(NodeId node) const;
  // The same as runs of consecutive ranks: ascending, neither overlapping nor touching.
  std::span<const RankRun> rank_runs(NodeId node) const { return nodes_[node].runs; }
  // How many ranks the node has.
  std::size_t rank_count(NodeId node) const;
  // Sorted by name.
  std::span<const NodeId> children(NodeId node) const { return nodes_[node].children; }

  // Equal content: the same paths with the same rank sets (however built).
  bool operator==(const CallTree& other) const;

 private:
  struct Node {
    std::string name;
    std::vector<RankRun> runs;     // ascending, apart
    std::vector<NodeId> children;  // sorted by name
  };

  // The child of `parent` named `name`, created if absent.
  NodeId child(NodeId parent, std::string_view name);
  // ranks(node) ∪= runs (ascending, apart).
  void add_runs(NodeId node, std::span<const RankRun> runs);

  std::vector<Node> nodes_;
};

// Ranks (sorted, distinct) as ranges: {0,1,2,3,7,9,10} -> "0-3,7,9-10".
std::string format_rank_ranges(std::span<const Rank> ranks);
// Runs (ascending, apart) the same way: {{0,3},{7,7},{9,10}} -> "0-3,7,9-10".
std::string format_rank_ranges(std::span<const RankRun> runs);

}  // namespace canopy
