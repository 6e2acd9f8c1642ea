// The tree model: which processes exist, where they run and who is whose parent.
//
// Pure logic, no I/O except reading a file in load_topology(). Every process of a
// Canopy network holds the whole Topology, so that routing, and later orphan
// re-adoption, can be computed locally.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "canopy/result.h"

namespace canopy {

using Rank = std::uint32_t;

enum class Role : std::uint8_t { frontend, commnode, backend };

std::string_view to_string(Role role);

struct Host {
  std::string name;     // how the launcher addresses it ({host} in the template)
  std::string address;  // IP address processes on it listen on; "" = resolve name
};

struct Node {
  Rank rank = 0;
  Role role = Role::backend;
  std::string host = "localhost";
  std::uint16_t port = 0;          // listening port; 0 = any free port, chosen at start
  std::optional<Rank> parent;      // empty only for the root (the front-end)
  std::vector<Rank> children;      // in the order the file lists them
  int line = 0;                    // line in the source file; 0 when generated
};

class Topology {
 public:
  // Builds and validates a tree. The error names `source:line` (when known) and the
  // problem: no root, several roots, a node with two parents, a cycle, a node
  // unreachable from the root, a duplicate rank, an edge to an unknown rank, a root
  // that is not a front-end, a back-end with children, a front-end that is not root.
  static Result<Topology> make(std::vector<Node> nodes, std::vector<Host> hosts,
                               std::string_view source = "<topology>");

  const Node& root() const;
  const Node* find(Rank rank) const;        // nullptr if unknown
  const Node& at(Rank rank) const;          // precondition: rank exists
  const std::vector<Node>& nodes() const { return nodes_; }  // root first, then BFS
  const std::vector<Host>& hosts() const { return hosts_; }
  std::vector<Rank> backends() const;       // ascending rank
  std::size_t size() const { return nodes_.size(); }
  std::size_t depth() const;                // edges on the longest root-to-leaf path

  // Back-end ranks below `rank` (inclusive if it is a back-end), ascending.
  std::vector<Rank> backends_below(Rank rank) const;

  // The address processes on `host` listen on: the host's address if given, else
  // 127.0.0.1 for "localhost", else the name itself (resolved by the OS).
  std::string address_of(std::string_view host) const;

 private:
  std::vector<Node> nodes_;
  std::vector<Host> hosts_;
  std::unordered_map<Rank, std::size_t> index_;  // rank -> position in nodes_
};

// Parses the YAML topology format of docs/topology.md. `source` names the text in
// error messages ("file.yaml:12: node 7 has two parents (3 and 5)").
Result<Topology> parse_topology_yaml(std::string_view text, std::string_view source);

// Reads and parses a topology file.
Result<Topology> load_topology(const std::string& path);

// Writes the YAML format; parse_topology_yaml(to_yaml(t)) gives back t.
std::string to_yaml(const Topology& topology);

// Generates a balanced tree from a spec: "b:F^D" (fan-out F, depth D) or
// "b:F1xF2x...". The prefix "b:" is optional. All processes on `host`.
// Ranks: back-ends are 0..N-1 left to right; the front-end is 1000000 and
// commnodes follow it in breadth-first order (1000001, ...).
Result<Topology> generate_topology(std::string_view spec, std::string_view host = "localhost");

inline constexpr Rank kFirstInternalRank = 1000000;

}  // namespace canopy
