// The YAML topology format (docs/topology.md): parsing with file:line errors, and
// writing.
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "canopy/topology.h"

namespace canopy {
namespace {

struct ParseError {
  std::string message;
};

int line_of(const YAML::Node& node) { return node.Mark().is_null() ? 0 : node.Mark().line + 1; }

[[noreturn]] void fail(std::string_view source, const YAML::Node& at, const std::string& problem) {
  int line = line_of(at);
  throw ParseError{std::string(source) + (line ? ":" + std::to_string(line) : std::string()) + ": " + problem};
}

void check_keys(std::string_view source, const YAML::Node& map, std::initializer_list<const char*> allowed,
                const char* what) {
  if (!map.IsMap()) fail(source, map, std::string(what) + " must be a map");
  for (const auto& kv : map) {
    auto key = kv.first.as<std::string>();
    bool ok = false;
    for (const char* a : allowed) ok = ok || key == a;
    if (!ok) {
      std::string names;
      for (const char* a : allowed) names += std::string(names.empty() ? "" : ", ") + a;
      fail(source, kv.first, "unknown key '" + key + "' in " + what + " (expected " + names + ")");
    }
  }
}

std::uint64_t read_unsigned(std::string_view source, const YAML::Node& node, std::uint64_t max, const char* what) {
  std::string text = node.IsScalar() ? node.Scalar() : "";
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 19) {
    fail(source, node, std::string(what) + " must be a whole number from 0 to " + std::to_string(max) +
                           ", not '" + text + "'");
  }
  std::uint64_t value = std::stoull(text);
  if (value > max) fail(source, node, std::string(what) + " " + text + " is larger than " + std::to_string(max));
  return value;
}

std::string read_string(std::string_view source, const YAML::Node& node, const char* what) {
  if (!node.IsScalar() || node.Scalar().empty()) fail(source, node, std::string(what) + " must be a non-empty string");
  return node.Scalar();
}

Role read_role(std::string_view source, const YAML::Node& node) {
  std::string role = node.IsScalar() ? node.Scalar() : "";
  if (role == "frontend" || role == "front-end") return Role::frontend;
  if (role == "commnode") return Role::commnode;
  if (role == "backend" || role == "back-end") return Role::backend;
  fail(source, node, "unknown role '" + role + "' (expected frontend, commnode or backend)");
}

Topology parse(std::string_view text, std::string_view source) {
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    throw ParseError{std::string(source) + ":" + std::to_string(e.mark.line + 1) + ": YAML syntax error: " + e.msg};
  }
  if (!doc.IsDefined() || doc.IsNull()) throw ParseError{std::string(source) + ": the file is empty"};
  check_keys(source, doc, {"hosts", "nodes", "edges"}, "the topology");

  std::vector<Host> hosts;
  if (auto list = doc["hosts"]) {
    if (!list.IsSequence()) fail(source, list, "'hosts' must be a list");
    for (const auto& h : list) {
      check_keys(source, h, {"name", "address"}, "a host");
      if (!h["name"]) fail(source, h, "a host needs a name");
      Host host{read_string(source, h["name"], "host name"), ""};
      if (h["address"]) host.address = read_string(source, h["address"], "host address");
      for (const auto& other : hosts) {
        if (other.name == host.name) fail(source, h, "host '" + host.name + "' is listed twice");
      }
      hosts.push_back(std::move(host));
    }
  }

  auto list = doc["nodes"];
  if (!list || !list.IsSequence() || list.size() == 0) {
    fail(source, list ? list : doc, "the topology needs a non-empty list 'nodes'");
  }
  std::vector<Node> nodes;
  std::map<Rank, std::size_t> at;
  for (const auto& n : list) {
    check_keys(source, n, {"rank", "role", "host", "port"}, "a node");
    if (!n["rank"]) fail(source, n, "a node needs a rank");
    if (!n["role"]) fail(source, n, "a node needs a role");
    Node node;
    node.line = line_of(n);
    node.rank = static_cast<Rank>(read_unsigned(source, n["rank"], std::numeric_limits<Rank>::max(), "rank"));
    node.role = read_role(source, n["role"]);
    if (n["host"]) node.host = read_string(source, n["host"], "host");
    if (n["port"]) node.port = static_cast<std::uint16_t>(read_unsigned(source, n["port"], 65535, "port"));
    if (auto [it, fresh] = at.emplace(node.rank, nodes.size()); !fresh) {
      fail(source, n, "duplicate rank " + std::to_string(node.rank) + " (first at line " +
                          std::to_string(nodes[it->second].line) + ")");
    }
    nodes.push_back(std::move(node));
  }

  std::map<Rank, int> parent_line;
  if (auto edges = doc["edges"]) {
    if (!edges.IsSequence()) fail(source, edges, "'edges' must be a list");
    for (const auto& e : edges) {
      check_keys(source, e, {"parent", "children"}, "an edge");
      if (!e["parent"] || !e["children"]) fail(source, e, "an edge needs 'parent' and 'children'");
      Rank parent = static_cast<Rank>(read_unsigned(source, e["parent"], std::numeric_limits<Rank>::max(), "rank"));
      auto p = at.find(parent);
      if (p == at.end()) fail(source, e, "edge refers to unknown rank " + std::to_string(parent));
      auto children = e["children"];
      if (!children.IsSequence()) fail(source, children, "'children' must be a list of ranks");
      for (const auto& c : children) {
        Rank child = static_cast<Rank>(read_unsigned(source, c, std::numeric_limits<Rank>::max(), "rank"));
        auto it = at.find(child);
        if (it == at.end()) fail(source, e, "edge refers to unknown rank " + std::to_string(child));
        if (child == parent) fail(source, e, "node " + std::to_string(child) + " is its own parent (cycle)");
        Node& node = nodes[it->second];
        if (node.parent) {
          fail(source, e, "node " + std::to_string(child) + " has two parents (" + std::to_string(*node.parent) +
                              " at line " + std::to_string(parent_line[child]) + " and " + std::to_string(parent) +
                              " at line " + std::to_string(line_of(e)) + ")");
        }
        node.parent = parent;
        parent_line[child] = line_of(e);
        nodes[p->second].children.push_back(child);
      }
    }
  }
  auto topology = Topology::make(std::move(nodes), std::move(hosts), source);
  if (!topology) throw ParseError{topology.error()};
  return std::move(*topology);
}

}  // namespace

Result<Topology> parse_topology_yaml(std::string_view text, std::string_view source) {
  try {
    return parse(text, source);
  } catch (const ParseError& e) {
    return Error{e.message};
  } catch (const YAML::Exception& e) {
    return Error{std::string(source) + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg};
  }
}

Result<Topology> load_topology(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"cannot read topology file " + path + ": " + std::strerror(errno)};
  std::stringstream text;
  text << in.rdbuf();
  return parse_topology_yaml(text.str(), path);
}

std::string to_yaml(const Topology& topology) {
  std::ostringstream out;
  out << "# Canopy topology: " << topology.size() << " processes, " << topology.backends().size()
      << " back-ends\n";
  bool any_address = false;
  for (const auto& h : topology.hosts()) any_address = any_address || !h.address.empty();
  if (any_address || topology.hosts().size() > 1) {
    out << "hosts:\n";
    for (const auto& h : topology.hosts()) {
      out << "  - {name: " << h.name;
      if (!h.address.empty()) out << ", address: " << h.address;
      out << "}\n";
    }
  }
  out << "nodes:\n";
  for (const auto& n : topology.nodes()) {
    out << "  - {rank: " << n.rank << ", role: " << to_string(n.role) << ", host: " << n.host;
    if (n.port) out << ", port: " << n.port;
    out << "}\n";
  }
  out << "edges:\n";
  for (const auto& n : topology.nodes()) {
    if (n.children.empty()) continue;
    out << "  - {parent: " << n.rank << ", children: [";
    for (std::size_t i = 0; i < n.children.size(); ++i) out << (i ? ", " : "") << n.children[i];
    out << "]}\n";
  }
  return out.str();
}

}  // namespace canopy
