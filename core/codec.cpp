#include "core/codec.h"

#include <unistd.h>

#include "core/service.h"
#include "transport/frame.h"

#include <kj/debug.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_map>

namespace canopy::core {

void init_hello(wire::Hello::Builder h, const NodeIdentity& self, std::uint32_t incarnation) {
  h.setProtocolVersion(wire::PROTOCOL_VERSION);
  h.setNetworkId(self.network_id);
  h.setRole(to_wire(self.role));
  h.setRank(self.rank);
  h.setIncarnation(incarnation);
  h.setPid(getpid());
}
namespace {

template <typename List, typename Vector>
void fill_list(List list, const Vector& v) {
  for (std::size_t i = 0; i < v.size(); ++i) list.set(i, v[i]);
}

template <typename T, typename Reader>
std::vector<T> read_list(Reader list) {
  std::vector<T> out;
  out.reserve(list.size());
  for (auto x : list) out.push_back(T(x));
  return out;
}

void encode_value(const Value& value, wire::Value::Builder out) {
  std::visit(
      [&](const auto& v) {
        using T = std::remove_cvref_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::int32_t>) out.setInt32(v);
        else if constexpr (std::is_same_v<T, std::int64_t>) out.setInt64(v);
        else if constexpr (std::is_same_v<T, std::uint32_t>) out.setUint32(v);
        else if constexpr (std::is_same_v<T, std::uint64_t>) out.setUint64(v);
        else if constexpr (std::is_same_v<T, float>) out.setFloat32(v);
        else if constexpr (std::is_same_v<T, double>) out.setFloat64(v);
        else if constexpr (std::is_same_v<T, std::string>) out.setString(capnp::Text::Reader(v.data(), v.size()));
        else if constexpr (std::is_same_v<T, Bytes>) out.setBytes(capnp::Data::Reader(v.data.data(), v.data.size()));
        else if constexpr (std::is_same_v<T, std::vector<std::int32_t>>) fill_list(out.initInt32Array(v.size()), v);
        else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) fill_list(out.initInt64Array(v.size()), v);
        else if constexpr (std::is_same_v<T, std::vector<std::uint32_t>>) fill_list(out.initUint32Array(v.size()), v);
        else if constexpr (std::is_same_v<T, std::vector<std::uint64_t>>) fill_list(out.initUint64Array(v.size()), v);
        else if constexpr (std::is_same_v<T, std::vector<float>>) fill_list(out.initFloat32Array(v.size()), v);
        else if constexpr (std::is_same_v<T, std::vector<double>>) fill_list(out.initFloat64Array(v.size()), v);
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          auto list = out.initStringArray(v.size());
          for (std::size_t i = 0; i < v.size(); ++i) list.set(i, capnp::Text::Reader(v[i].data(), v[i].size()));
        } else {
          static_assert(sizeof(T) == 0, "every Value alternative needs an encoding");
        }
      },
      value);
}

Value decode_value(wire::Value::Reader in) {
  using W = wire::Value;
  switch (in.which()) {
    case W::INT32: return in.getInt32();
    case W::INT64: return in.getInt64();
    case W::UINT32: return in.getUint32();
    case W::UINT64: return in.getUint64();
    case W::FLOAT32: return in.getFloat32();
    case W::FLOAT64: return in.getFloat64();
    case W::STRING: { auto t = in.getString(); return std::string(t.begin(), t.size()); }
    case W::BYTES: { auto d = in.getBytes(); return Bytes{{d.begin(), d.end()}}; }
    case W::INT32_ARRAY: return read_list<std::int32_t>(in.getInt32Array());
    case W::INT64_ARRAY: return read_list<std::int64_t>(in.getInt64Array());
    case W::UINT32_ARRAY: return read_list<std::uint32_t>(in.getUint32Array());
    case W::UINT64_ARRAY: return read_list<std::uint64_t>(in.getUint64Array());
    case W::FLOAT32_ARRAY: return read_list<float>(in.getFloat32Array());
    case W::FLOAT64_ARRAY: return read_list<double>(in.getFloat64Array());
    case W::STRING_ARRAY: {
      std::vector<std::string> out;
      for (auto t : in.getStringArray()) out.emplace_back(t.begin(), t.size());
      return out;
    }
  }
  KJ_FAIL_REQUIRE("unknown value type in data packet", static_cast<int>(in.which()));
}

}  // namespace

void encode_values(const std::vector<Value>& values, capnp::List<wire::Value>::Builder out) {
  for (std::size_t i = 0; i < values.size(); ++i) encode_value(values[i], out[i]);
}

Packet decode_values(capnp::List<wire::Value>::Reader in) {
  std::vector<Value> values;
  values.reserve(in.size());
  for (auto v : in) values.push_back(decode_value(v));
  return Packet(0, std::move(values));
}

wire::Role to_wire(Role role) {
  switch (role) {
    case Role::frontend: return wire::Role::FRONTEND;
    case Role::commnode: return wire::Role::COMMNODE;
    case Role::backend: return wire::Role::BACKEND;
  }
  return wire::Role::BACKEND;
}

Role from_wire(wire::Role role) {
  switch (role) {
    case wire::Role::FRONTEND: return Role::frontend;
    case wire::Role::COMMNODE: return Role::commnode;
    case wire::Role::BACKEND: return Role::backend;
  }
  KJ_FAIL_REQUIRE("unknown role", static_cast<int>(role));
}

void encode_packet(const Packet& packet, wire::DataPacket::Builder out) {
  out.setTag(packet.tag());
  out.setSourceRank(packet.source());
  out.setContributors(packet.contributors());
  auto values = out.initValues(packet.size());
  for (std::size_t i = 0; i < packet.size(); ++i) encode_value(packet[i], values[i]);
}

Packet decode_packet(wire::DataPacket::Reader in) {
  std::vector<Value> values;
  auto list = in.getValues();
  values.reserve(list.size());
  for (auto v : list) values.push_back(decode_value(v));
  Packet packet(in.getTag(), std::move(values));
  packet.set_source(in.getSourceRank());
  packet.set_contributors(in.getContributors());
  return packet;
}

// The wire's enums are the API's, value for value.
static_assert(static_cast<int>(wire::Topology::LinkKind::AUTOMATIC) == static_cast<int>(LinkKind::automatic) &&
              static_cast<int>(wire::Topology::LinkKind::PLAIN) == static_cast<int>(LinkKind::plain) &&
              static_cast<int>(wire::Topology::LinkKind::STRIPED) == static_cast<int>(LinkKind::striped));
static_assert(static_cast<int>(wire::Topology::Checksum::CRC32C) == static_cast<int>(LinkChecksum::crc32c) &&
              static_cast<int>(wire::Topology::Checksum::ADDITIVE) == static_cast<int>(LinkChecksum::additive) &&
              static_cast<int>(wire::Topology::Checksum::NONE) == static_cast<int>(LinkChecksum::none));

namespace {

// The tree breadth-first from the root, each node's children in their order: the
// index in topology.nodes() of each node in that order, and of its parent in it.
struct Order {
  std::vector<std::uint32_t> node;
  std::vector<std::uint32_t> parent;
};

Order breadth_first(const Topology& topology) {
  const auto& nodes = topology.nodes();
  std::unordered_map<Rank, std::uint32_t> index;
  index.reserve(nodes.size());
  for (std::uint32_t i = 0; i < nodes.size(); ++i) index.emplace(nodes[i].rank, i);
  Order order;
  order.node.reserve(nodes.size());
  order.parent.reserve(nodes.size());
  order.node.push_back(static_cast<std::uint32_t>(index.at(topology.root().rank)));
  order.parent.push_back(0);
  for (std::uint32_t at = 0; at < order.node.size(); ++at) {
    for (Rank child : nodes[order.node[at]].children) {
      order.node.push_back(index.at(child));  // a Topology holds every child it names
      order.parent.push_back(at);
    }
  }
  return order;
}

// Runs of a column (protocol version 16): (value, count) pairs of equal values, or,
// with `step`, (first, count) pairs of values one above the one before.
std::vector<std::uint32_t> runs_of(const std::vector<std::uint32_t>& column, std::size_t from, bool step) {
  std::vector<std::uint32_t> out;
  for (std::size_t i = from; i < column.size(); ++i) {
    // In 64 bits: rank 2^32 - 1 followed by rank 0 is no run.
    const bool extends = !out.empty() &&
                         column[i] == std::uint64_t{out[out.size() - 2]} + (step ? out.back() : 0) &&
                         out.back() < std::numeric_limits<std::uint32_t>::max();
    if (extends) {
      ++out.back();
    } else {
      out.push_back(column[i]);
      out.push_back(1);
    }
  }
  return out;
}

void write_words(const std::vector<std::uint32_t>& words, capnp::List<std::uint32_t>::Builder out) {
  for (unsigned i = 0; i < words.size(); ++i) out.set(i, words[i]);
}

void encode_compact(const Topology& topology, wire::Topology::Compact::Builder out) {
  const auto& all = topology.nodes();
  const Order order = breadth_first(topology);
  auto node_at = [&](unsigned i) -> const TopologyNode& { return all[order.node[i]]; };
  const auto n = static_cast<unsigned>(order.node.size());
  std::vector<std::uint32_t> ranks(n), roles(n), host_of(n);
  std::vector<std::string_view> names;
  std::unordered_map<std::string_view, std::uint32_t> name_index;
  bool any_port = false;
  unsigned links = 0;
  std::vector<std::uint32_t> frontiers;  // quads
  for (unsigned i = 0; i < n; ++i) {
    const TopologyNode& node = node_at(i);
    ranks[i] = node.rank;
    roles[i] = static_cast<std::uint32_t>(to_wire(node.role));
    auto [at, added] = name_index.emplace(node.host, static_cast<std::uint32_t>(names.size()));
    if (added) names.push_back(node.host);
    host_of[i] = at->second;
    any_port |= node.port != 0;
    links += node.link.has_value();
    if (const auto* f = topology.frontier(node.rank)) {
      const std::size_t q = frontiers.size();
      if (q >= 4 && frontiers[q - 4] + frontiers[q - 3] == i && frontiers[q - 2] == f->height &&
          frontiers[q - 1] == f->fanout) {
        ++frontiers[q - 3];
      } else {
        frontiers.insert(frontiers.end(), {i, 1, f->height, f->fanout});
      }
    }
  }
  const auto rank_runs = runs_of(ranks, 0, true);
  const auto parent_runs = runs_of(order.parent, 1, false);
  const auto role_runs = runs_of(roles, 0, false);
  write_words(rank_runs, out.initRankRuns(static_cast<unsigned>(rank_runs.size())));
  write_words(parent_runs, out.initParentRuns(static_cast<unsigned>(parent_runs.size())));
  write_words(role_runs, out.initRoleRuns(static_cast<unsigned>(role_runs.size())));
  auto host_names = out.initHostNames(static_cast<unsigned>(names.size()));
  for (unsigned i = 0; i < names.size(); ++i) host_names.set(i, capnp::Text::Reader(names[i].data(), names[i].size()));
  if (names.size() > 1) {  // one host: no runs
    const auto host_runs = runs_of(host_of, 0, false);
    write_words(host_runs, out.initHostRuns(static_cast<unsigned>(host_runs.size())));
  }
  if (any_port) {  // the known ports only: runs of the nodes that have one, their ports in order
    std::vector<std::uint32_t> known;
    std::vector<std::uint16_t> values;
    for (unsigned i = 0; i < n; ++i) {
      if (node_at(i).port == 0) continue;
      known.push_back(i);
      values.push_back(node_at(i).port);
    }
    const auto runs = runs_of(known, 0, true);
    write_words(runs, out.initPortRuns(static_cast<unsigned>(runs.size())));
    auto ports = out.initPortValues(static_cast<unsigned>(values.size()));
    for (unsigned i = 0; i < values.size(); ++i) ports.set(i, values[i]);
  }
  write_words(frontiers, out.initFrontierRuns(static_cast<unsigned>(frontiers.size())));
  auto link_list = out.initLinks(links);
  unsigned l = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (node_at(i).link) {
      link_list[l].setNode(i);
      link_list[l++].setKind(static_cast<wire::Topology::LinkKind>(*node_at(i).link));
    }
  }
}

// A column from its runs (runs_of): false if they are not pairs, a count is 0, or
// they do not make `expected` values (or, with `expected` unset, more than
// kMaxTopologyNodes).
bool expand_runs(capnp::List<std::uint32_t>::Reader in, bool step, std::optional<std::size_t> expected,
                 std::vector<std::uint32_t>& out) {
  if (in.size() % 2 != 0) return false;
  const std::size_t limit = expected ? *expected : kMaxTopologyNodes;
  out.clear();
  for (unsigned i = 0; i < in.size(); i += 2) {
    const std::uint32_t first = in[i], count = in[i + 1];
    if (count == 0 || count > limit - out.size()) return false;
    if (step && first > std::numeric_limits<std::uint32_t>::max() - (count - 1)) return false;
    for (std::uint32_t k = 0; k < count; ++k) out.push_back(step ? first + k : first);
  }
  return !expected || out.size() == *expected;
}

// The nodes of a compact topology, and its frontiers by rank; an error for anything
// that is not a list of nodes in runs of one length with parents before them.
Result<std::vector<TopologyNode>> decode_compact(wire::Topology::Compact::Reader in,
                                                 std::vector<std::pair<Rank, Topology::Frontier>>& frontiers) {
  std::vector<std::uint32_t> ranks, parents, roles, host_of;
  if (!expand_runs(in.getRankRuns(), true, std::nullopt, ranks)) {
    return Error{"topology from parent: its ranks are not runs of at most " + std::to_string(kMaxTopologyNodes) +
                 " nodes"};
  }
  const std::size_t n = ranks.size();
  auto names = in.getHostNames();
  if (!expand_runs(in.getParentRuns(), false, n == 0 ? 0 : n - 1, parents) ||
      !expand_runs(in.getRoleRuns(), false, n, roles) ||
      (in.getHostRuns().size() != 0 && !expand_runs(in.getHostRuns(), false, n, host_of))) {
    return Error{"topology from parent: its columns differ in length"};
  }
  // The known ports: each run's nodes ascending, within the tree, one port each.
  std::vector<std::uint16_t> port(n, 0);
  {
    auto runs = in.getPortRuns();
    auto values = in.getPortValues();
    if (runs.size() % 2 != 0) return Error{"topology from parent: its ports are not runs"};
    std::size_t next = 0, value = 0;
    for (unsigned r = 0; r < runs.size(); r += 2) {
      const std::uint32_t first = runs[r], count = runs[r + 1];
      if (first < next || first >= n || count == 0 || count > n - first || count > values.size() - value) {
        return Error{"topology from parent: a run of ports names no node, or overlaps another"};
      }
      for (std::uint32_t k = 0; k < count; ++k) port[first + k] = values[static_cast<unsigned>(value++)];
      next = std::size_t{first} + count;
    }
    if (value != values.size()) return Error{"topology from parent: more ports than its runs hold"};
  }
  if (names.size() == 0 && n != 0) return Error{"topology from parent: no host names"};
  std::vector<TopologyNode> nodes(n);
  for (std::size_t i = 0; i < n; ++i) {
    TopologyNode& node = nodes[i];
    node.rank = ranks[i];
    if (roles[i] > static_cast<std::uint32_t>(wire::Role::BACKEND)) return Error{"topology from parent: unknown role"};
    node.role = from_wire(static_cast<wire::Role>(roles[i]));
    const std::uint32_t host = host_of.empty() ? 0 : host_of[i];
    if (host >= names.size()) return Error{"topology from parent: a node's host is not in the list of hosts"};
    node.host = names[host];
    node.port = port[i];
    if (i == 0) continue;
    const std::uint32_t parent = parents[i - 1];
    if (parent >= i) return Error{"topology from parent: a node comes before its parent"};
    node.parent = ranks[parent];
    nodes[parent].children.push_back(node.rank);
  }
  for (auto l : in.getLinks()) {
    if (l.getNode() >= n || l.getKind() > wire::Topology::LinkKind::STRIPED) {
      return Error{"topology from parent: a link names no node, or an unknown kind"};
    }
    nodes[l.getNode()].link = static_cast<LinkKind>(l.getKind());
  }
  auto quads = in.getFrontierRuns();
  if (quads.size() % 4 != 0) return Error{"topology from parent: its frontiers are not runs"};
  for (unsigned q = 0; q < quads.size(); q += 4) {
    const std::uint32_t first = quads[q], count = quads[q + 1];
    if (first >= n || count == 0 || count > n - first) return Error{"topology from parent: a frontier names no node"};
    for (std::uint32_t k = 0; k < count; ++k) {
      frontiers.emplace_back(ranks[first + k], Topology::Frontier{quads[q + 2], quads[q + 3]});
    }
  }
  return nodes;
}

}  // namespace

void encode_topology(const Topology& topology, wire::Topology::Builder out) {
  encode_compact(topology, out.initCompact());
  auto hosts = out.initHosts(topology.hosts().size());
  for (std::size_t i = 0; i < topology.hosts().size(); ++i) {
    const Host& host = topology.hosts()[i];
    hosts[i].setName(host.name);
    hosts[i].setAddress(host.address);
    auto nics = hosts[i].initNics(host.nics.size());
    for (std::size_t j = 0; j < host.nics.size(); ++j) nics.set(j, host.nics[j]);
  }
  auto links = out.initLinks();
  links.setKind(static_cast<wire::Topology::LinkKind>(topology.links().kind));
  links.setChecksum(static_cast<wire::Topology::Checksum>(topology.links().checksum));
  links.setReliable(topology.links().reliable);
  links.setCorruptFraction(topology.links().corrupt_fraction);
  out.setPortsFirst(topology.ports().first);
  out.setPortsLast(topology.ports().last);
}

namespace {

Result<Topology> decode_tree(wire::Topology::Reader in, bool subtree) {
  std::vector<std::pair<Rank, Topology::Frontier>> frontiers;
  if (!in.hasCompact()) return Error{"topology from parent: it holds no nodes"};
  auto nodes = decode_compact(in.getCompact(), frontiers);
  if (!nodes) return Error{nodes.error()};
  std::vector<Host> hosts;
  for (auto h : in.getHosts()) {
    Host host{h.getName(), h.getAddress(), {}, 0};
    for (auto nic : h.getNics()) host.nics.emplace_back(nic);
    hosts.push_back(std::move(host));
  }
  auto topology = subtree ? Topology::make_subtree(std::move(*nodes), std::move(hosts), "subtree of an orphan")
                         : Topology::make(std::move(*nodes), std::move(hosts), "topology from parent");
  if (!topology) return topology;
  for (const auto& [rank, frontier] : frontiers) {
    if (frontier.height == 0 || !topology->set_frontier(rank, frontier)) {
      return Error{"topology from parent: rank " + std::to_string(rank) +
                   " is held without its children, but is not a commnode without children"};
    }
  }
  auto w = in.getLinks();
  LinkSettings links;
  if (w.getKind() > wire::Topology::LinkKind::STRIPED) return Error{"topology from parent: unknown link kind"};
  links.kind = static_cast<LinkKind>(w.getKind());
  if (w.getChecksum() > wire::Topology::Checksum::NONE) return Error{"topology from parent: unknown checksum"};
  links.checksum = static_cast<LinkChecksum>(w.getChecksum());
  links.reliable = w.getReliable();
  links.corrupt_fraction = w.getCorruptFraction();
  if (auto ok = topology->set_links(links); !ok) return Error{"topology from parent: " + ok.error()};
  const PortRange ports{in.getPortsFirst(), in.getPortsLast()};
  if (!ports.any() && ports.first > ports.last) {
    return Error{"topology from parent: the range of ports " + std::to_string(ports.first) + "-" +
                 std::to_string(ports.last) + " is empty"};
  }
  topology->set_ports(ports);
  return topology;
}

}  // namespace

Result<Topology> decode_topology(wire::Topology::Reader in) { return decode_tree(in, false); }

Result<Topology> decode_subtree(wire::Topology::Reader in) { return decode_tree(in, true); }

void encode_plan(const LaunchPlan& plan, wire::Topology::Builder t, bool launches) {
  t.setStartupTimeoutMs(static_cast<std::uint32_t>(plan.startup_timeout.count()));
  if (launches) {
    const LaunchCommands& commands = plan.commands.get();
    t.setLauncher(commands.launcher);
    t.setCommnodeExe(commands.commnode_exe);
    auto argv = t.initBackendArgv(commands.backend_argv.size());
    for (std::size_t i = 0; i < commands.backend_argv.size(); ++i) argv.set(i, commands.backend_argv[i]);
    t.setReattachFile(commands.reattach_file);
  }
  t.setAttachMode(plan.attach);
  t.setOpenAttach(plan.open_attach);
  t.setMrnetBackendArgs(plan.mrnet_backend_args);
  t.setBulkLaunch(plan.bulk);
  auto ft = t.initFaultTolerance();
  ft.setEnabled(plan.fault.enabled);
  ft.setHeartbeatMs(static_cast<std::uint32_t>(plan.fault.heartbeat.count()));
  ft.setSuspectMs(static_cast<std::uint32_t>(plan.fault.suspect.count()));
  ft.setLostMs(static_cast<std::uint32_t>(plan.fault.lost.count()));
  ft.setAdoptionTimeoutMs(static_cast<std::uint32_t>(plan.fault.adoption_timeout.count()));
  ft.setStandbyLinks(plan.fault.standby_links);
  ft.setKeepTreeForMs(static_cast<std::uint32_t>(plan.fault.keep_tree_for.count()));
  t.setWholeTree(plan.whole_tree);
  encode_view_zero(plan.view_zero, t);
  auto options = t.initServiceOptions(static_cast<unsigned>(plan.service_options.size()));
  unsigned i = 0;
  for (const auto& [id, bytes] : plan.service_options) {
    options[i].setId(id);
    options[i].setBytes(kj::arrayPtr(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size()));
    ++i;
  }
}

void encode_view_zero(const std::vector<std::pair<Rank, Rank>>& ranges, wire::Topology::Builder t) {
  write_ranges(ranges, t.initMembers(static_cast<unsigned>(2 * ranges.size())));
}

void write_ranges(const std::vector<std::pair<Rank, Rank>>& ranges, capnp::List<std::uint32_t>::Builder out) {
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    out.set(static_cast<unsigned>(2 * i), ranges[i].first);
    out.set(static_cast<unsigned>(2 * i + 1), ranges[i].second);
  }
}

bool read_ranges(capnp::List<std::uint32_t>::Reader in, RankSet& out) {
  if (in.size() % 2 != 0) return false;
  std::vector<RankSet::Range> ranges;
  ranges.reserve(in.size() / 2);
  for (unsigned i = 0; i < in.size(); i += 2) ranges.emplace_back(in[i], in[i + 1]);
  return RankSet::from_ranges(ranges, out);
}

Result<LaunchPlan> decode_plan(wire::Topology::Reader t) {
  using std::chrono::milliseconds;
  LaunchPlan plan;
  plan.whole_tree = t.getWholeTree();
  auto members = t.getMembers();
  if (members.size() % 2 != 0) return Error{"topology from parent: view 0's members are not ranges"};
  RankSet view_zero;
  if (!read_ranges(members, view_zero)) {
    return Error{"topology from parent: view 0's members are not ascending ranges"};
  }
  if (view_zero.size() > kMaxViewZero) {
    return Error{"topology from parent: view 0 has " + std::to_string(view_zero.size()) + " members, more than " +
                 std::to_string(kMaxViewZero)};
  }
  plan.view_zero = view_zero.ranges();
  plan.startup_timeout = milliseconds(t.getStartupTimeoutMs());
  if (t.hasLauncher() || t.hasCommnodeExe() || t.hasBackendArgv() || t.hasReattachFile()) {
    LaunchCommands& commands = plan.commands.set();  // none sent to a back-end
    commands.launcher = t.getLauncher();
    commands.commnode_exe = t.getCommnodeExe();
    for (auto a : t.getBackendArgv()) commands.backend_argv.emplace_back(a);
    commands.reattach_file = t.getReattachFile();
  }
  plan.attach = t.getAttachMode();
  plan.open_attach = plan.attach && t.getOpenAttach();
  plan.mrnet_backend_args = t.getMrnetBackendArgs();
  plan.bulk = t.getBulkLaunch();
  auto ft = t.getFaultTolerance();
  plan.fault.enabled = ft.getEnabled();
  plan.fault.heartbeat = milliseconds(std::max<std::uint32_t>(10, ft.getHeartbeatMs()));
  plan.fault.suspect = milliseconds(std::max<std::uint32_t>(20, ft.getSuspectMs()));
  plan.fault.lost = milliseconds(std::max<std::uint32_t>(30, ft.getLostMs()));
  plan.fault.adoption_timeout = milliseconds(ft.getAdoptionTimeoutMs());
  plan.fault.standby_links = ft.getStandbyLinks();
  plan.fault.keep_tree_for = milliseconds(ft.getKeepTreeForMs());
  for (auto o : t.getServiceOptions()) {
    auto bytes = o.getBytes();
    plan.service_options[o.getId()] = std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
  }
  return plan;
}

std::vector<std::uint32_t> rank_runs(const std::vector<Rank>& ascending) { return runs_of(ascending, 0, true); }

bool expand_rank_runs(capnp::List<std::uint32_t>::Reader runs, std::size_t expected, std::vector<Rank>& out) {
  return expected <= kMaxTopologyNodes && expand_runs(runs, true, expected, out);
}

bool read_endpoints(wire::Endpoints::Reader in, std::vector<std::pair<Rank, std::uint16_t>>& out) {
  auto ports = in.getPorts();
  std::vector<Rank> ranks;
  if (!expand_rank_runs(in.getRankRuns(), ports.size(), ranks)) return false;
  out.clear();
  out.reserve(ranks.size());
  for (unsigned i = 0; i < ranks.size(); ++i) out.emplace_back(ranks[i], ports[i]);
  return true;
}

std::vector<std::pair<Rank, Rank>> rank_ranges(const std::vector<Rank>& ascending) {
  std::vector<std::pair<Rank, Rank>> ranges;
  for (Rank r : ascending) {
    if (!ranges.empty() && ranges.back().second + 1 == r) ranges.back().second = r;
    else ranges.emplace_back(r, r);
  }
  return ranges;
}

std::vector<Rank> expand_ranges(const std::vector<std::pair<Rank, Rank>>& ranges) {
  std::vector<Rank> ranks;
  for (auto [first, last] : ranges) {
    for (std::uint64_t r = first; r <= last; ++r) ranks.push_back(static_cast<Rank>(r));
  }
  return ranks;
}

std::size_t packet_payload_bytes(const Packet& packet) {
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < packet.size(); ++i) {
    bytes += std::visit(
        [](const auto& v) -> std::size_t {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            return v.size();
          } else if constexpr (std::is_same_v<T, Bytes>) {
            return v.data.size();
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            std::size_t n = 0;
            for (const auto& s : v) n += s.size();
            return n;
          } else if constexpr (requires { v.size(); }) {
            return v.size() * sizeof(typename T::value_type);
          } else {
            return sizeof(T);
          }
        },
        packet[i]);
  }
  return bytes;
}

std::optional<std::string> oversized(const Packet& packet) {
  const std::size_t bytes = packet_payload_bytes(packet);
  if (bytes <= transport::kDefaultMaxFrameBytes) return std::nullopt;
  return "a packet of " + std::to_string(bytes) + " bytes is over the frame limit of " +
         std::to_string(transport::kDefaultMaxFrameBytes) + " bytes (docs/protocol.md, \"Resource bounds\")";
}

}  // namespace canopy::core
