// The YAML topology format (docs/topology.md): reading with `file:line` errors,
// and writing.
//
// The parser checks what only the text knows (types, unknown keys, which edge gave
// a node its parent) and leaves the shape of the tree to Topology::make().
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>

#include "canopy/topology.h"
#include "decimal.h"
#include "tree_shape.h"

namespace canopy {
namespace {

// A problem found by the parser, already formatted. yaml-cpp reports its own
// problems by throwing, so the parser throws too; parse_topology_yaml() turns both
// into an Error and nothing escapes the API.
struct Invalid {
  std::string message;
};

using Fields = std::map<std::string, YAML::Node, std::less<>>;
using Keys = std::initializer_list<std::string_view>;

int line_of(const YAML::Node& node) {
  YAML::Mark mark = node.Mark();
  return mark.is_null() ? 0 : mark.line + 1;
}

std::string describe(const YAML::Node& value) {
  constexpr std::size_t kShown = 40;  // enough to recognise a value, short enough for one line
  if (value.IsScalar() && value.Scalar().size() > kShown) return "'" + value.Scalar().substr(0, kShown) + "...'";
  if (value.IsScalar()) return "'" + value.Scalar() + "'";
  if (value.IsSequence()) return "a list";
  if (value.IsMap()) return "a map";
  return "empty";
}

std::string join(Keys keys) {
  std::string names;
  for (std::string_view key : keys) names += (names.empty() ? "" : ", ") + std::string(key);
  return names;
}

bool contains(Keys keys, std::string_view key) {
  for (std::string_view k : keys) {
    if (k == key) return true;
  }
  return false;
}

// Records whether a document has content, and the line where it begins.
struct DocumentStart final : YAML::EventHandler {
  bool started = false;
  int line = 0;
  void at(const YAML::Mark& mark) {
    if (started) return;
    started = true;
    line = mark.is_null() ? 0 : mark.line + 1;
  }
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { at(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override { at(mark); }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    at(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    at(mark);
  }
  void OnMapEnd() override {}
};

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  Result<Topology> parse(std::string_view text) {
    YAML::Node document = read_document(text);
    Fields top = fields(document, "the topology", {"nodes"}, {"hosts", "edges", "links", "gossip", "ports"});
    for (const YAML::Node& host : list(top, "hosts")) read_host(host);
    for (const YAML::Node& node : list(top, "nodes")) read_node(node);
    for (const YAML::Node& edge : list(top, "edges")) read_edge(edge);
    LinkSettings links;
    if (auto it = top.find("links"); it != top.end()) links = read_links(it->second);
    auto topology = Topology::make(std::move(nodes_), std::move(hosts_), source_);
    if (!topology) return topology;
    if (auto ok = topology->set_links(links); !ok) fail(top.at("links"), ok.error());
    if (auto it = top.find("gossip"); it != top.end()) topology->set_gossip(read_gossip(it->second));
    if (auto it = top.find("ports"); it != top.end()) {
      if (!it->second.IsScalar()) fail(it->second, "'ports' is a range LO-HI, not " + describe(it->second));
      auto ports = parse_port_range(it->second.Scalar(), "'ports'");
      if (!ports) fail(it->second, ports.error());
      topology->set_ports(*ports);
    }
    return topology;
  }

 private:
  [[noreturn]] void fail(int line, const std::string& problem) const {
    std::string where(source_);
    if (line > 0) where += ":" + std::to_string(line);
    throw Invalid{where + ": " + problem};
  }
  [[noreturn]] void fail(const YAML::Node& at, const std::string& problem) const { fail(line_of(at), problem); }

  // One document, and whether another follows. Not YAML::LoadAll: the yaml-cpp of
  // Debian 12 (0.7) loops without end, allocating at every turn, on some malformed
  // input such as a stray ',' (jbeder/yaml-cpp#1040; fuzz_topology found it, 20 GB
  // in a minute). YAML::Load reads the first document only; the parser is then asked
  // for the next document twice at most, which is bounded.
  YAML::Node read_document(std::string_view text) const {
    const std::string owned(text);
    YAML::Node document = YAML::Load(owned);
    if (document.IsNull()) fail(0, "the topology is empty; it needs at least 'nodes'");
    std::istringstream stream(owned);
    YAML::Parser parser(stream);
    DocumentStart first, second;
    if (parser.HandleNextDocument(first) && parser.HandleNextDocument(second) && second.started) {
      fail(second.line, "a topology file holds one YAML document, this one has several");
    }
    return document;
  }

  // The entries of a map that must have the `required` keys and may have the
  // `optional` ones. Any other key, or a key given twice, is an error: typos in
  // a topology should not pass silently.
  Fields fields(const YAML::Node& map, std::string_view what, Keys required, Keys optional) const {
    std::string expected = join(required) + (optional.size() ? ", " + join(optional) : "");
    if (!map.IsMap()) fail(map, std::string(what) + " must be a map with keys " + expected + ", not " + describe(map));
    Fields found;
    for (const auto& entry : map) {
      const YAML::Node& key = entry.first;
      if (!key.IsScalar()) fail(key, "a key in " + std::string(what) + " must be a name, not " + describe(key));
      if (!contains(required, key.Scalar()) && !contains(optional, key.Scalar())) {
        fail(key, "unknown key '" + key.Scalar() + "' in " + std::string(what) + " (expected " + expected + ")");
      }
      if (!found.emplace(key.Scalar(), entry.second).second) {
        fail(key, "key '" + key.Scalar() + "' appears twice in " + std::string(what));
      }
    }
    for (std::string_view key : required) {
      if (!found.count(key)) fail(map, std::string(what) + " needs '" + std::string(key) + "'");
    }
    return found;
  }

  // The list under `key`; absent or empty means no entries.
  std::vector<YAML::Node> list(const Fields& map, std::string_view key) const {
    auto it = map.find(key);
    if (it == map.end() || it->second.IsNull()) return {};
    if (!it->second.IsSequence()) fail(it->second, "'" + std::string(key) + "' must be a list, not " + describe(it->second));
    return {it->second.begin(), it->second.end()};
  }

  std::uint64_t read_number(const YAML::Node& value, std::uint64_t max, std::string_view what) const {
    std::uint64_t number = 0;
    std::errc error = std::errc::invalid_argument;
    if (value.IsScalar()) {
      const std::string& text = value.Scalar();
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
      error = (ec == std::errc() && end != text.data() + text.size()) ? std::errc::invalid_argument : ec;
    }
    if (error == std::errc() && number <= max) return number;
    std::string range = "from 0 to " + std::to_string(max);
    if (error == std::errc::invalid_argument) {
      fail(value, std::string(what) + " must be a whole number " + range + ", not " + describe(value));
    }
    fail(value, std::string(what) + " " + value.Scalar() + " is out of range (" + range + ")");
  }

  Rank read_rank(const YAML::Node& value) const {
    return static_cast<Rank>(read_number(value, std::numeric_limits<Rank>::max(), "rank"));
  }

  std::string read_name(const YAML::Node& value, std::string_view what) const {
    if (!value.IsScalar() || value.Scalar().empty()) {
      fail(value, std::string(what) + " must be a non-empty string, not " + describe(value));
    }
    return value.Scalar();
  }

  Role read_role(const YAML::Node& value) const {
    for (Role role : {Role::frontend, Role::commnode, Role::backend}) {
      if (value.IsScalar() && value.Scalar() == to_string(role)) return role;
    }
    fail(value, "unknown role " + describe(value) + " (expected frontend, commnode or backend)");
  }

  LinkKind read_link_kind(const YAML::Node& value) const {
    if (auto kind = value.IsScalar() ? link_kind_from(value.Scalar()) : std::nullopt) return *kind;
    fail(value, "unknown link kind " + describe(value) + " (expected auto, plain or striped)");
  }

  bool read_bool(const YAML::Node& value, std::string_view what) const {
    if (value.IsScalar() && (value.Scalar() == "true" || value.Scalar() == "false")) return value.Scalar() == "true";
    fail(value, std::string(what) + " must be true or false, not " + describe(value));
  }

  GossipOptions read_gossip(const YAML::Node& item) const {
    Fields f = fields(item, "'gossip'", {"schedule"}, {"period_ms", "max_hangup_ms", "ping_timeout_ms"});
    GossipOptions gossip;
    const YAML::Node& schedule = f.at("schedule");
    auto s = schedule.IsScalar() ? gossip_schedule_from(schedule.Scalar()) : std::nullopt;
    if (!s) fail(schedule, "unknown gossip schedule " + describe(schedule) + " (expected off, random, rr, brr or dbrr)");
    gossip.schedule = *s;
    auto ms = [&](std::string_view key, std::uint64_t min, std::chrono::milliseconds& out) {
      auto it = f.find(std::string(key));
      if (it == f.end()) return;
      const std::uint64_t v = read_number(it->second, 3600000, "'" + std::string(key) + "'");
      if (v < min) fail(it->second, "'" + std::string(key) + "' must be at least " + std::to_string(min));
      out = std::chrono::milliseconds(v);
    };
    ms("period_ms", 10, gossip.period);
    ms("max_hangup_ms", 0, gossip.max_hangup);
    ms("ping_timeout_ms", 0, gossip.ping_timeout);
    return gossip;
  }

  LinkSettings read_links(const YAML::Node& item) const {
    Fields f = fields(item, "'links'", {}, {"default", "checksum", "reliable", "corrupt"});
    LinkSettings links;
    if (auto it = f.find("default"); it != f.end()) links.kind = read_link_kind(it->second);
    if (auto it = f.find("checksum"); it != f.end()) {
      auto checksum = it->second.IsScalar() ? link_checksum_from(it->second.Scalar()) : std::nullopt;
      if (!checksum) fail(it->second, "unknown checksum " + describe(it->second) + " (expected crc32c, additive or none)");
      links.checksum = *checksum;
    }
    if (auto it = f.find("reliable"); it != f.end()) links.reliable = read_bool(it->second, "'reliable'");
    if (auto it = f.find("corrupt"); it != f.end()) {
      const auto read = canopy::topology::parse_double(it->second.IsScalar() ? it->second.Scalar() : "");
      const double fraction = read.value_or(-1);
      if (!(fraction >= 0 && fraction < 1)) {
        fail(it->second, "'corrupt' must be a fraction at least 0 and below 1, not " + describe(it->second));
      }
      links.corrupt_fraction = fraction;
    }
    return links;
  }

  void read_host(const YAML::Node& item) {
    Fields f = fields(item, "a host", {"name"}, {"address", "nics"});
    Host host{read_name(f.at("name"), "host name"), "", {}, line_of(item)};
    if (auto it = f.find("address"); it != f.end()) host.address = read_name(it->second, "host address");
    for (const YAML::Node& nic : list(f, "nics")) host.nics.push_back(read_name(nic, "NIC address"));
    auto [first, fresh] = host_lines_.emplace(host.name, line_of(item));
    if (!fresh) fail(item, "host '" + host.name + "' is listed twice (first at line " + std::to_string(first->second) + ")");
    hosts_.push_back(std::move(host));
  }

  void read_node(const YAML::Node& item) {
    Fields f = fields(item, "a node", {"rank", "role"}, {"host", "port"});
    TopologyNode node;
    node.line = line_of(item);
    node.rank = read_rank(f.at("rank"));
    node.role = read_role(f.at("role"));
    if (auto it = f.find("host"); it != f.end()) node.host = read_name(it->second, "host");
    if (auto it = f.find("port"); it != f.end()) node.port = static_cast<std::uint16_t>(read_number(it->second, 65535, "port"));
    auto [first, fresh] = index_.emplace(node.rank, nodes_.size());
    if (!fresh) {
      fail(item, "duplicate rank " + std::to_string(node.rank) + " (first at line " +
                     std::to_string(nodes_[first->second].line) + ")");
    }
    nodes_.push_back(std::move(node));
  }

  TopologyNode& node_named_by(const YAML::Node& value) {
    Rank rank = read_rank(value);
    auto it = index_.find(rank);
    if (it == index_.end()) fail(value, "edge refers to unknown rank " + std::to_string(rank));
    return nodes_[it->second];
  }

  // Sets parent and children together, so Topology::make() finds them agreeing; a
  // second parent is reported here, where both edges' lines are known.
  void read_edge(const YAML::Node& item) {
    Fields f = fields(item, "an edge", {"parent", "children"}, {"link"});
    int line = line_of(item);
    TopologyNode& parent = node_named_by(f.at("parent"));
    std::optional<LinkKind> link;
    if (auto it = f.find("link"); it != f.end()) link = read_link_kind(it->second);
    const YAML::Node& children = f.at("children");
    if (!children.IsSequence()) fail(children, "'children' must be a list of ranks, not " + describe(children));
    for (const YAML::Node& value : children) {
      TopologyNode& child = node_named_by(value);
      auto [first, fresh] = parent_lines_.emplace(child.rank, line);
      if (!fresh) {
        std::string child_rank = std::to_string(child.rank), first_line = std::to_string(first->second);
        if (*child.parent == parent.rank) {
          fail(value, "node " + child_rank + " is listed twice as a child of " + std::to_string(parent.rank) +
                          " (lines " + first_line + " and " + std::to_string(line) + ")");
        }
        fail(value, "node " + child_rank + " has two parents (" + std::to_string(*child.parent) + " at line " +
                        first_line + " and " + std::to_string(parent.rank) + " at line " + std::to_string(line) + ")");
      }
      child.parent = parent.rank;
      child.link = link;
      parent.children.push_back(child.rank);
    }
  }

  std::string_view source_;
  std::vector<Host> hosts_;
  std::vector<TopologyNode> nodes_;
  std::unordered_map<Rank, std::size_t> index_;    // rank -> position in nodes_
  std::unordered_map<Rank, int> parent_lines_;     // child -> line of the edge naming its parent
  std::unordered_map<std::string, int> host_lines_;
};

// A host name or address as a YAML scalar: plain when it is an ordinary name,
// else double-quoted, so that parsing gives back exactly the same string.
std::string scalar(std::string_view text) {
  bool plain = !text.empty() && text != "null" && text != "Null" && text != "NULL";
  for (char c : text) {
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_');
  }
  if (plain) return std::string(text);
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escape[5];
      std::snprintf(escape, sizeof escape, "\\x%02x", static_cast<unsigned>(c));
      quoted += escape;
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

}  // namespace

Result<Topology> parse_topology_yaml(std::string_view text, std::string_view source) {
  if (text.size() > kMaxTopologyBytes) return detail::too_large(source, text.size());
  std::size_t items = 0;
  for (char c : text) items += c == ',' || c == '[' || c == '{' || c == '\n';
  if (items > kMaxYamlItems) {
    return Error{std::string(source) + ": the YAML topology has " + std::to_string(items) + " items (',', '[', '{' "
                 "and line breaks), over the limit of " + std::to_string(kMaxYamlItems) + " that keeps the YAML "
                 "parser under about 2 GB; write a tree this large in MRNet's format (canopy topgen --format mrnet)"};
  }
  try {
    return Parser(source).parse(text);
  } catch (const Invalid& invalid) {
    return Error{invalid.message};
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own message for it is only "bad file".
    std::string where(source);
    if (!e.mark.is_null()) where += ":" + std::to_string(e.mark.line + 1);
    return Error{where + ": the YAML is nested " + std::to_string(e.depth()) +
                 " levels deep, past the parser's limit (a topology needs 4)"};
  } catch (const YAML::Exception& e) {
    std::string where(source);
    if (!e.mark.is_null()) where += ":" + std::to_string(e.mark.line + 1);
    bool syntax = dynamic_cast<const YAML::ParserException*>(&e) != nullptr;
    return Error{where + ": " + (syntax ? "YAML syntax error: " : "") + e.msg};
  }
}

std::string to_yaml(const Topology& topology) {
  std::string out = "# Canopy topology: " + std::to_string(topology.size()) + " processes, " +
                    std::to_string(topology.backends().size()) + " back-ends\n";
  bool any_address = false;
  for (const Host& host : topology.hosts()) any_address = any_address || !host.address.empty();
  if (any_address || topology.hosts().size() > 1) {
    out += "hosts:\n";
    for (const Host& host : topology.hosts()) {
      out += "  - {name: " + scalar(host.name);
      if (!host.address.empty()) out += ", address: " + scalar(host.address);
      if (!host.nics.empty()) {
        out += ", nics: [";
        for (std::size_t i = 0; i < host.nics.size(); ++i) out += (i ? ", " : "") + scalar(host.nics[i]);
        out += "]";
      }
      out += "}\n";
    }
  }
  const LinkSettings& links = topology.links();
  if (links != LinkSettings{}) {
    out += "links: {default: " + std::string(to_string(links.kind)) + ", checksum: " +
           std::string(to_string(links.checksum)) + ", reliable: " + (links.reliable ? "true" : "false") +
           ", corrupt: " + canopy::topology::format_double(links.corrupt_fraction) + "}\n";
  }
  if (!topology.ports().any()) out += "ports: " + to_string(topology.ports()) + "\n";
  if (const auto& gossip = topology.gossip()) {
    out += "gossip: {schedule: " + std::string(to_string(gossip->schedule)) +
           ", period_ms: " + std::to_string(gossip->period.count()) +
           ", max_hangup_ms: " + std::to_string(gossip->max_hangup.count()) +
           ", ping_timeout_ms: " + std::to_string(gossip->ping_timeout.count()) + "}\n";
  }
  out += "nodes:\n";
  for (const TopologyNode& node : topology.nodes()) {
    out += "  - {rank: " + std::to_string(node.rank) + ", role: " + std::string(to_string(node.role));
    if (node.host != "localhost") out += ", host: " + scalar(node.host);
    if (node.port != 0) out += ", port: " + std::to_string(node.port);
    out += "}\n";
  }
  // One edge entry per run of children with the same link choice.
  bool any_edge = false;
  for (const TopologyNode& node : topology.nodes()) {
    for (std::size_t i = 0; i < node.children.size();) {
      const std::optional<LinkKind> link = topology.at(node.children[i]).link;
      if (!any_edge) out += "edges:\n";
      any_edge = true;
      out += "  - {parent: " + std::to_string(node.rank) + ", children: [";
      for (std::size_t first = i; i < node.children.size() && topology.at(node.children[i]).link == link; ++i) {
        out += (i > first ? ", " : "") + std::to_string(node.children[i]);
      }
      out += "]";
      if (link) out += ", link: " + std::string(to_string(*link));
      out += "}\n";
    }
  }
  return out;
}

}  // namespace canopy
