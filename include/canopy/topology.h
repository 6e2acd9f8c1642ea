// The tree model: which processes exist, where they run and who is whose parent.
//
// Pure logic, no I/O except reading a file in load_topology(). The front-end holds
// the whole Topology; a commnode and a back-end hold the part of it they need to
// route and to choose adopters locally (Topology::part, Topology::backend_part;
// docs/scale.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "canopy/fault_tolerance.h"
#include "canopy/rank_index.h"
#include "canopy/result.h"

namespace canopy {

using Rank = std::uint32_t;

enum class Role : std::uint8_t { frontend, commnode, backend };

std::string_view to_string(Role role);

struct Host {
  std::string name;     // how the launcher addresses it ({host} in the template)
  std::string address;  // IP address processes on it listen on; "" = the first NIC, else resolve name
  // Numeric IP addresses of the host's NICs (at most kMaxNics). Processes on the host
  // listen on each, and striped links run one path per NIC (docs/striping.md).
  // Empty: the one address above.
  std::vector<std::string> nics;
  int line = 0;  // in the source file; 0 when generated
};

inline constexpr std::size_t kMaxNics = 8;

// How a child and its parent (or an orphan and its adopter) are connected.
enum class LinkKind : std::uint8_t {
  automatic,  // striped when both hosts list two NICs or more, else plain
  plain,      // one TCP connection (TcpLink)
  striped,    // one TCP connection per NIC pair, checksummed (StripedLink)
};
std::string_view to_string(LinkKind kind);

enum class LinkChecksum : std::uint8_t { crc32c, additive, none };
std::string_view to_string(LinkChecksum checksum);
// The inverses of to_string(): "auto", "plain", "striped"; "crc32c", "additive", "none".
std::optional<LinkKind> link_kind_from(std::string_view name);
std::optional<LinkChecksum> link_checksum_from(std::string_view name);

// The tree-wide choices for links (`links:` in YAML; docs/topology.md).
struct LinkSettings {
  LinkKind kind = LinkKind::automatic;   // for every edge that does not choose its own
  LinkChecksum checksum = LinkChecksum::crc32c;  // striped links
  bool reliable = true;                  // striped links: resend on time-outs and checksum failures
  // Fault injection for demonstrations (docs/striping.md): this fraction of the
  // fragments every striped link sends is corrupted after checksumming. 0 in real use.
  double corrupt_fraction = 0.0;

  bool operator==(const LinkSettings&) const = default;
};

// One process of a topology: its place in the tree and where it runs. (The node
// core of a running process is core::Node, not this.)
struct TopologyNode {
  Rank rank = 0;
  Role role = Role::backend;
  std::string host = "localhost";
  std::uint16_t port = 0;          // listening port; 0 = any free port, chosen at start
  // The link to the parent; empty: the topology's LinkSettings::kind.
  std::optional<LinkKind> link;
  std::optional<Rank> parent;      // empty only for the root (the front-end)
  std::vector<Rank> children;      // in the order the file lists them
  int line = 0;                    // line in the source file; 0 when generated
};

// The old name, kept (deprecated) for tools written against it.
using Node [[deprecated("canopy::Node is now canopy::TopologyNode")]] = TopologyNode;

// A range of TCP ports, first to last inclusive; first == 0: any port.
struct PortRange {
  std::uint16_t first = 0;
  std::uint16_t last = 0;
  bool any() const { return first == 0; }
  std::size_t size() const { return any() ? 0 : std::size_t{last} - first + 1; }
  bool operator==(const PortRange&) const = default;
};

// Parses "LO-HI" (1 <= LO <= HI <= 65535, or one port "P"); errors name `source`.
Result<PortRange> parse_port_range(std::string_view text, std::string_view source);
std::string to_string(const PortRange& ports);  // "LO-HI"

class Topology {
 public:
  // Builds and validates a tree. The error names `source:line` (when known) and the
  // problem: no root, several roots, a node with two parents, a cycle, a node
  // unreachable from the root, a duplicate rank, an edge to an unknown rank, a root
  // that is not a front-end, a back-end with children, a front-end that is not root.
  static Result<Topology> make(std::vector<TopologyNode> nodes, std::vector<Host> hosts,
                               std::string_view source = "<topology>");

  const TopologyNode& root() const;
  const TopologyNode* find(Rank rank) const;        // nullptr if unknown
  const TopologyNode& at(Rank rank) const;          // precondition: rank exists
  const std::vector<TopologyNode>& nodes() const { return nodes_; }  // root first, then BFS
  // Each node's position in nodes(), by rank (the live tree keeps its entries in the
  // same order and takes this index as it is).
  const RankIndex& rank_index() const { return index_; }
  const std::vector<Host>& hosts() const { return hosts_; }
  std::vector<Rank> backends() const;       // ascending rank
  std::size_t size() const { return nodes_.size(); }
  std::size_t depth() const;                // edges on the longest root-to-leaf path

  // Back-end ranks below `rank` (inclusive if it is a back-end), ascending.
  std::vector<Rank> backends_below(Rank rank) const;

  // The address processes on `host` listen on: the host's address if given, else
  // 127.0.0.1 for "localhost", else the name itself (resolved by the OS).
  std::string address_of(std::string_view host) const;
  // The NIC addresses of `host`: its `nics`, else just address_of(host).
  std::vector<std::string> nics_of(std::string_view host) const;

  const LinkSettings& links() const { return links_; }
  // The ports every process of the tree listens on, if confined (`ports: LO-HI` in
  // YAML, `canopy run --ports`; docs/launch.md, "Ports and firewalls"): a process
  // without a port of its own takes a free one in the range. Any port when `first`
  // is 0.
  const PortRange& ports() const { return ports_; }
  void set_ports(PortRange ports) { ports_ = ports; }
  // The gossip detector's settings (`gossip:` in YAML; docs/gossip.md), if the
  // topology gives them: the front-end launches with them unless told otherwise.
  const std::optional<GossipOptions>& gossip() const { return gossip_; }
  void set_gossip(std::optional<GossipOptions> gossip) { gossip_ = gossip; }
  // Checked: a corrupt fraction in [0, 1).
  Result<void> set_links(LinkSettings links);
  // Sets the address processes on `host` listen on and are reached at (the front-end
  // choosing one its children can reach: core/reachable.h); false, changing
  // nothing, if no node is on `host` or the host lists NICs (they are its addresses).
  bool set_address(std::string_view host, std::string address);
  // The port the process of `rank` listens on, once known (ports are learnt after
  // launch); false, changing nothing, if no node has that rank.
  bool set_port(Rank rank, std::uint16_t port);
  // A back-end that joined the running tree (open attach, docs/attach.md): `rank`,
  // below kFirstInternalRank and not in the tree, becomes the last child of commnode
  // (or front-end) `parent`, on its parent's host (nothing connects to a back-end).
  // Appended after every node, so a parent still comes before its children.
  Result<void> add_backend(Rank rank, Rank parent);
  // Plain or striped: the link between a child and its parent (the child's own
  // choice, else the tree's), or, with no edge between them (an orphan and its
  // adopter), the tree's. `automatic` resolves by the two hosts' NIC counts.
  LinkKind link_between(const TopologyNode& child, const TopologyNode& parent) const;

  // A part of a tree holds some commnodes without their children; it keeps their
  // height (hops down to their deepest back-end) and fan-out at launch instead.
  struct Frontier {
    std::uint32_t height = 1;
    std::uint32_t fanout = 0;
    bool operator==(const Frontier&) const = default;
  };
  // The height at launch of each node, by its place in nodes(): 0 for a back-end;
  // for a commnode the most of 1 (it holds back-ends, if only joined ones), its
  // frontier's height, and each child's plus one.
  std::vector<std::uint32_t> heights() const;
  // Whether this is a part of a tree rather than the whole (some commnode is held
  // without its children). Its backends() are then only the back-ends it holds.
  bool partial() const { return !frontier_.empty(); }
  // The launch height and fan-out of `rank`, a commnode held without its children;
  // null for every other node.
  const Frontier* frontier(Rank rank) const;
  // Marks `rank`, a commnode held without children, as such (a part received from a
  // parent); false, changing nothing, if no such commnode is held.
  bool set_frontier(Rank rank, Frontier frontier);
  // The part of this tree that a back-end child of `parent` holds (docs/scale.md):
  // every ancestor of it, from the root down to `parent`, each with all its
  // children; a child that is not on that path is held without children of its own
  // (a frontier). That is what the back-end needs to find its adopters: its
  // parent's siblings and every ancestor above (whose ports it is sent as they are
  // learnt: core/backend_part.h), and their siblings as a last resort. Its size is
  // the sum of the ancestors' fan-outs, whatever the tree's; building it walks the
  // whole tree once. Tree-wide settings (links, hosts of the nodes it holds) come
  // along. Precondition: `parent` is a commnode or the front-end of this tree, and
  // this topology holds the children of its ancestors.
  Topology backend_part(Rank parent) const;
  // The part of this tree that process `self` holds where commnodes hold parts
  // (docs/scale.md): as backend_part() of its parent, and its own subtree whole. For
  // a back-end, backend_part() of its parent; for the root, the whole tree. The same
  // precondition, and this topology holds `self`'s subtree.
  Topology part(Rank self) const;

  // A subtree of a tree, rooted at a commnode or a back-end (an orphan's, which it
  // sends its adopter): validated as make() does, but its root is no front-end.
  static Result<Topology> make_subtree(std::vector<TopologyNode> nodes, std::vector<Host> hosts,
                                       std::string_view source);
  // Holds `subtree` (make_subtree's) below `under`, a commnode or the front-end held
  // here: its root becomes the last child of `under`, or, held already without its
  // children (a frontier), gets them. An error, changing nothing, if any other of
  // its ranks is held here. Its hosts are added.
  Result<void> graft(Rank under, const Topology& subtree);

 private:
  static Result<Topology> assemble(std::vector<TopologyNode> nodes, std::vector<Host> hosts, std::string_view source,
                                   bool subtree);
  // backend_part(parent), holding `whole`, a child of `parent`, with its subtree.
  Topology part_below(Rank parent, std::optional<Rank> whole) const;

  std::vector<TopologyNode> nodes_;
  std::vector<Host> hosts_;
  // Its position in nodes_, by rank: runs of ranks (a generated tree's are two), not
  // a hash map's 40 bytes a process.
  RankIndex index_;
  std::size_t position(Rank rank) const;  // std::out_of_range if not held
  // Commnodes held without children, ascending by rank (topology/rank_pairs.h): 12
  // bytes each, where a hash map took about 40 (a commnode's part holds every sibling
  // so: docs/scale.md).
  std::vector<std::pair<Rank, Frontier>> frontier_;
  LinkSettings links_;
  std::optional<GossipOptions> gossip_;
  PortRange ports_;
};

inline constexpr Rank kFirstInternalRank = 1000000;

// The largest topology text the parsers accept. A tree of a million processes takes
// about 40 MiB of YAML and 17 MiB in MRNet's format; the limit stops a stray file (or
// /dev/zero) early.
inline constexpr std::size_t kMaxTopologyBytes = std::size_t{64} << 20;

// YAML costs the parser (yaml-cpp) about 1 KB of memory per item, so YAML text is
// also limited in items, counted as ',', '[', '{' and line breaks: at most about 2
// GB of parser memory, and room for 500,000 processes in to_yaml()'s output (4 items
// a process). Larger trees take MRNet's format, at about 350 bytes a process.
inline constexpr std::size_t kMaxYamlItems = 2'000'000;

// The role of the leaves of a tree described only by its shape, as MRNet's format
// and the topgen specs describe it.
enum class Leaves : std::uint8_t {
  backends,   // every leaf is a back-end (MRNet's meaning)
  commnodes,  // every leaf is a commnode and there are no back-ends: attach mode,
              // where back-ends are added by attach_backends() and started by others
};

// Trees read from MRNet's format and generated from specs are numbered by one rule:
// back-ends 0..N-1 in depth-first, left-to-right order (the order of the leaves in
// a drawing of the tree, so that each subtree holds a contiguous block of ranks);
// the front-end kFirstInternalRank; commnodes kFirstInternalRank+1 and up in
// breadth-first order. Children keep the order in which the source lists them.

// Parses the YAML topology format of docs/topology.md. `source` names the text in
// error messages ("file.yaml:12: node 7 has two parents (3 and 5)").
Result<Topology> parse_topology_yaml(std::string_view text, std::string_view source);

// Parses MRNet's topology format: statements "host:N => host:N host:N ;", `#`
// comments. The front-end is the one node that is nobody's child; the leaves take
// the role `leaves`; ranks follow the rule above. Errors name `source:line`.
Result<Topology> parse_topology_mrnet(std::string_view text, std::string_view source,
                                      Leaves leaves = Leaves::backends);

enum class TopologyFormat : std::uint8_t { yaml, mrnet };

// MRNet's format when, outside `#` comments, the text contains "=>" or begins with
// a node "host:N"; YAML otherwise.
TopologyFormat detect_topology_format(std::string_view text);

// Parses either format, chosen by detect_topology_format(). `leaves` applies to
// MRNet's format only: a YAML file states every node's role.
Result<Topology> parse_topology(std::string_view text, std::string_view source,
                                Leaves leaves = Leaves::backends);

// Reads a topology file of either format. Files over kMaxTopologyBytes are refused.
Result<Topology> load_topology(const std::string& path, Leaves leaves = Leaves::backends);

// Writes the YAML format; parse_topology_yaml(to_yaml(t)) gives back t.
std::string to_yaml(const Topology& topology);

// Writes MRNet's format, instance numbers counted per host in breadth-first order.
// parse_topology_mrnet(text, source, leaves) gives back the topology, `leaves` being
// Leaves::commnodes for a tree without back-ends. Refuses (naming the node or host)
// what the format cannot carry: ranks other than those of the numbering rule, ports,
// host addresses, host names MRNet cannot read, and leaves of both roles.
Result<std::string> to_mrnet(const Topology& topology);

// A host of a host list, and how many processes it takes: 0 when the list gives no
// counts (then a tree is spread evenly over its hosts).
struct HostSlots {
  std::string name;
  std::uint32_t slots = 0;
};

// Parses a host list: entries "host" or "host:slots" separated by commas or white
// space, `#` comments to the end of the line. In a list that gives no count every
// slot count is 0; in one that gives some, an entry without one counts 1. A host
// named twice gets the sum of its slots, at its first place. Errors name `source`
// (and the line when the text has several).
Result<std::vector<HostSlots>> parse_host_list(std::string_view text, std::string_view source);

// Generates a tree from a spec (docs/topology.md), every process on `host`:
//   b:F^D       balanced: fan-out F at each of D levels ("b:" may be left out)
//   b:F1xF2x... balanced with a fan-out per level
//   k:K@N       k-nomial tree of N processes, front-end included (MRNet's k:)
//   g:N:N,N:... generic: child counts per node, level by level (MRNet's g:)
// Ranks follow the numbering rule above.
Result<Topology> generate_topology(std::string_view spec, std::string_view host = "localhost");

// Generates a tree from a spec and places it on `hosts`, the front-end on the
// first of them: generate_topology_on_hosts(spec, hosts[0].name, hosts, leaves).
// An empty list puts every process on "localhost". With Leaves::commnodes the tree
// has no back-ends; see attach_backends().
Result<Topology> generate_topology(std::string_view spec, const std::vector<HostSlots>& hosts,
                                   Leaves leaves = Leaves::backends);

// Generates a tree from a spec, the front-end on `frontend_host`, every other
// process on `hosts` (docs/topology.md, "Placing a tree on hosts"):
// - with no slot counts (every `slots` 0), spread evenly, each subtree at one level
//   on one host, as generate_spread_topology() does;
// - with counts, at most `slots` processes on each host (the front-end takes one of
//   its host's if that is in the list), each commnode with its leaf children on the
//   first host with room for them all, in depth-first order; a group that fits on
//   no host starts on the host with the most room. Fails when the slots are too few.
// Fails on an empty list, a name that is empty or given twice, and a list where some
// hosts have counts and others not.
Result<Topology> generate_topology_on_hosts(std::string_view spec, std::string_view frontend_host,
                                            const std::vector<HostSlots>& hosts, Leaves leaves = Leaves::backends);

// Where the processes of `topology` run, for a person to check: one line per host
// ("h1: 1 commnode (1000001), 3 back-ends (0-2)"), then how many commnodes have all
// their back-end children on their own host, naming the first few that have not.
std::vector<std::string> describe_placement(const Topology& topology);

// Generates a tree from a spec and spreads it over `nodes` (a cluster allocation's,
// in order, each with the address it is reached by) for a launch by level
// (docs/launch.md), keeping whole subtrees on one node so that a commnode's children
// are local to it: at the shallowest level of commnodes with at least as many of
// them as there are nodes (else the deepest), commnode j and everything below it go
// on node floor(j * N / count); a commnode above that level goes on its first
// child's node, and a leaf above it (in an uneven tree) on the next node in turn. A
// tree without commnodes spreads its back-ends that way. The front-end is on `frontend_host`: one of `nodes` by name, or a host of its own whose
// name must resolve. Fails on an empty node list, an empty or repeated name.
Result<Topology> generate_spread_topology(std::string_view spec, std::string_view frontend_host,
                                          const std::vector<Host>& nodes);

// Adds `count` back-ends, ranks 0..count-1, to a tree whose leaves are commnodes:
// with L leaf commnodes in depth-first, left-to-right order, back-end r goes below
// leaf floor(r*L/count), so each leaf gets a contiguous block of ranks. A back-end
// runs on its parent's host. Fails when `commnode_tree` already has back-ends or
// has no leaf commnode, when count is 0, or when it exceeds kFirstInternalRank.
Result<Topology> attach_backends(const Topology& commnode_tree, std::size_t count);

}  // namespace canopy
