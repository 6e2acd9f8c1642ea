// MRNet's topology format (docs/topology.md): reading with `file:line` errors, and
// writing.
//
// A file is a list of statements "parent => child child ... ;" or "node ;", where a
// node is "host:instance"; `#` starts a comment; white space, line breaks included,
// separates tokens. The parser checks the shape itself, so that its errors name
// nodes as the file does (host:instance) rather than by the ranks it assigns after.
#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include "canopy/topology.h"
#include "tree_shape.h"

namespace canopy {
namespace {

bool is_name_start(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool is_name_char(char c) { return is_name_start(c) || c == '.' || c == '-' || c == '_'; }

// A host name MRNet's scanner reads as one: a letter or digit, then letters,
// digits, '.', '-' or '_', and not all digits (that would be a number).
bool is_mrnet_host(std::string_view name) {
  if (name.empty() || !is_name_start(name.front())) return false;
  bool all_digits = true;
  for (char c : name) {
    if (!is_name_char(c)) return false;
    all_digits = all_digits && std::isdigit(static_cast<unsigned char>(c));
  }
  return !all_digits;
}

struct Token {
  enum Kind { node, arrow, semicolon, end } kind = end;
  std::string host;
  std::uint32_t instance = 0;
  int line = 0;

  std::string text() const {
    switch (kind) {
      case node: return host + ":" + std::to_string(instance);
      case arrow: return "'=>'";
      case semicolon: return "';'";
      case end: return "the end of the file";
    }
    return "?";
  }
};

// A problem found in the text, already formatted; parse_topology_mrnet() turns it
// into an Error.
struct Invalid {
  std::string message;
};

class Lexer {
 public:
  Lexer(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  [[noreturn]] void fail(int line, const std::string& problem) const {
    std::string where(source_);
    if (line > 0) where += ":" + std::to_string(line);
    throw Invalid{where + ": " + problem};
  }

  Token next() {
    skip_blanks_and_comments();
    Token token;
    token.line = line_;
    if (at_ >= text_.size()) return token;
    char c = text_[at_];
    if (c == ';') {
      ++at_;
      token.kind = Token::semicolon;
    } else if (c == '=' && at_ + 1 < text_.size() && text_[at_ + 1] == '>') {
      at_ += 2;
      token.kind = Token::arrow;
    } else if (is_name_start(c)) {
      read_node(token);
    } else {
      fail(line_, "unexpected " + describe(c) + " (expected a node host:N, '=>' or ';')");
    }
    return token;
  }

 private:
  static std::string describe(char c) {
    if (std::isprint(static_cast<unsigned char>(c))) return std::string("character '") + c + "'";
    char code[8];
    std::snprintf(code, sizeof code, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
    return std::string("byte ") + code;
  }

  void skip_blanks_and_comments() {
    while (at_ < text_.size()) {
      char c = text_[at_];
      if (c == '\n') {
        ++line_;
        ++at_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++at_;
      } else if (c == '#') {
        while (at_ < text_.size() && text_[at_] != '\n') ++at_;
      } else {
        return;
      }
    }
  }

  std::string_view read_word() {
    std::size_t begin = at_;
    while (at_ < text_.size() && is_name_char(text_[at_])) ++at_;
    return text_.substr(begin, at_ - begin);
  }

  // host ':' instance, with optional blanks around ':' as MRNet's scanner allows.
  void read_node(Token& token) {
    token.kind = Token::node;
    std::string_view host = read_word();
    token.host = std::string(host);
    if (!is_mrnet_host(host)) {
      fail(token.line, "host name '" + token.host + "' is a number; a node is host:N with a host name, e.g. node01:0");
    }
    skip_blanks_and_comments();
    if (at_ >= text_.size() || text_[at_] != ':') {
      fail(token.line, "node '" + token.host + "' has no instance number; a node is host:N, e.g. " + token.host + ":0");
    }
    ++at_;
    skip_blanks_and_comments();
    std::string_view number = read_word();
    if (number.empty()) fail(token.line, "missing instance number after '" + token.host + ":'");
    auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), token.instance);
    bool whole = ec == std::errc() && end == number.data() + number.size();
    bool leading_zero = number.size() > 1 && number.front() == '0';
    if (!whole || leading_zero) {
      std::string why = ec == std::errc::result_out_of_range ? "too large" : "not a whole number without leading zeros";
      fail(token.line, "bad instance number '" + std::string(number) + "' in '" + token.host + ":" + std::string(number) +
                      "': " + why + " (0 to " + std::to_string(std::numeric_limits<std::uint32_t>::max()) + ")");
    }
  }

  std::string_view text_;
  std::string_view source_;
  std::size_t at_ = 0;
  int line_ = 1;
};

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : lexer_(text, source), source_(source) {}

  detail::Shape parse() {
    for (Token token = lexer_.next(); token.kind != Token::end; token = lexer_.next()) statement(token);
    if (shape_.empty()) {
      lexer_.fail(0, "the topology is empty; it needs at least one statement 'host:0 => host:1 ;'");
    }
    return check_tree();
  }

 private:
  struct Seen {
    std::size_t parent;
    int line;  // of the statement naming the parent
  };

  std::size_t node_of(const Token& token) {
    auto [it, fresh] = positions_.try_emplace({token.host, token.instance}, shape_.size());
    if (fresh) {
      detail::ShapeNode node;
      node.host = token.host;
      node.line = token.line;
      shape_.push_back(std::move(node));
      names_.push_back(token.text());
    }
    return it->second;
  }

  // parent "=>" child... ";"  or  node ";"
  void statement(const Token& first) {
    if (first.kind != Token::node) {
      lexer_.fail(first.line, first.kind == Token::semicolon
                                  ? "empty statement: ';' with no node before it"
                                  : "a statement must begin with a node host:N, not " + first.text());
    }
    std::size_t parent = node_of(first);
    Token token = lexer_.next();
    if (token.kind == Token::semicolon) return;
    if (token.kind == Token::end) missing_semicolon(first, first);
    if (token.kind == Token::node) {
      lexer_.fail(token.line, "missing '=>' between the parent " + first.text() + " and its children (found " +
                                  token.text() + ")");
    }
    std::optional<Token> last;
    for (token = lexer_.next(); token.kind == Token::node; token = lexer_.next()) {
      if (last) add_child(parent, *last, first.line);
      last = token;
    }
    if (token.kind == Token::arrow) {
      // "a:0 => a:1 a:2  a:2 => ..." : the node before this arrow is the next parent.
      if (!last) lexer_.fail(token.line, first.text() + " => has no children before the second '=>'");
      lexer_.fail(last->line, "missing ';' before " + last->text() + " => (the statement of " + first.text() +
                                  " at line " + std::to_string(first.line) + " does not end)");
    }
    if (!last) {
      if (token.kind == Token::end) missing_semicolon(first, first);
      lexer_.fail(token.line, first.text() + " => has no children; list them before ';'");
    }
    add_child(parent, *last, first.line);
    if (token.kind == Token::end) missing_semicolon(first, *last);
  }

  [[noreturn]] void missing_semicolon(const Token& first, const Token& last) {
    lexer_.fail(last.line, "missing ';' at the end of the statement of " + first.text() + " (line " +
                               std::to_string(first.line) + ")");
  }

  void add_child(std::size_t parent, const Token& token, int line) {
    std::size_t child = node_of(token);
    if (child == parent) lexer_.fail(token.line, "cycle: " + token.text() + " is its own child");
    auto [seen, fresh] = parent_of_.try_emplace(child, Seen{parent, line});
    if (!fresh) {
      std::string name = names_[child];
      if (seen->second.parent == parent) {
        lexer_.fail(token.line, "duplicate node: " + name + " is listed twice as a child of " + names_[parent] +
                                    " (lines " + std::to_string(seen->second.line) + " and " + std::to_string(line) +
                                    ")");
      }
      lexer_.fail(token.line, "node " + name + " has two parents (" + names_[seen->second.parent] + " at line " +
                                  std::to_string(seen->second.line) + " and " + names_[parent] + " at line " +
                                  std::to_string(line) + ")");
    }
    shape_[parent].children.push_back(child);
  }

  // The cycle of parent links at or above `start`, parent first: "a:1 -> a:2 -> a:1".
  // Precondition: every node on the way up has a parent.
  std::string cycle_above(std::size_t start) const {
    std::vector<std::size_t> upward;  // start, its parent, its grandparent, ...
    std::unordered_map<std::size_t, std::size_t> index;
    for (std::size_t at = start; index.emplace(at, upward.size()).second; at = parent_of_.at(at).parent) {
      upward.push_back(at);
    }
    std::size_t closing = parent_of_.at(upward.back()).parent;  // the first node met twice
    std::string path = names_[closing];
    for (std::size_t i = upward.size(); i-- > index.at(closing);) path += " -> " + names_[upward[i]];
    return path;
  }

  // One root (nobody's child) from which every node is reachable. The shape comes
  // back in breadth-first order, so that the root is at position 0 as
  // detail::number_tree() wants.
  detail::Shape check_tree() {
    std::vector<std::size_t> roots;
    for (std::size_t i = 0; i < shape_.size(); ++i) {
      if (!parent_of_.count(i)) roots.push_back(i);
    }
    if (roots.size() > 1) {
      const auto& a = shape_[roots[0]];
      const auto& b = shape_[roots[1]];
      lexer_.fail(b.line, "several front-ends: " + names_[roots[0]] + " (line " + std::to_string(a.line) + ") and " +
                              names_[roots[1]] + " (line " + std::to_string(b.line) +
                              ") are nobody's child; a tree has exactly one root, the front-end");
    }
    if (roots.empty()) {
      lexer_.fail(shape_[0].line, "no front-end: every node is the child of another; cycle: " + cycle_above(0));
    }
    std::vector<std::size_t> order = detail::breadth_first(shape_, roots[0]);
    if (order.size() < shape_.size()) {
      std::vector<bool> reached(shape_.size(), false);
      for (std::size_t at : order) reached[at] = true;
      for (std::size_t i = 0; i < shape_.size(); ++i) {
        if (reached[i]) continue;
        lexer_.fail(shape_[i].line, names_[i] + " is not reachable from the front-end " + names_[roots[0]] +
                                        "; it is on or below the cycle " + cycle_above(i));
      }
    }
    std::vector<std::size_t> position(shape_.size());
    for (std::size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
    detail::Shape tree;
    tree.reserve(shape_.size());
    for (std::size_t at : order) {
      tree.push_back(std::move(shape_[at]));
      for (std::size_t& child : tree.back().children) child = position[child];
    }
    return tree;
  }

  Lexer lexer_;
  std::string_view source_;
  detail::Shape shape_;
  std::vector<std::string> names_;  // "host:N" of each position
  std::map<std::pair<std::string, std::uint32_t>, std::size_t> positions_;
  std::unordered_map<std::size_t, Seen> parent_of_;
};

// Which leaves a topology has: Leaves::commnodes only when it has commnode leaves
// and no back-ends. Fails on leaves of both roles.
Result<Leaves> leaves_of(const Topology& topology) {
  const TopologyNode* backend_leaf = nullptr;
  const TopologyNode* commnode_leaf = nullptr;
  for (const TopologyNode& node : topology.nodes()) {
    if (node.role == Role::backend) backend_leaf = backend_leaf ? backend_leaf : &node;
    if (node.role == Role::commnode && node.children.empty()) commnode_leaf = commnode_leaf ? commnode_leaf : &node;
  }
  if (backend_leaf && commnode_leaf) {
    return Error{"MRNet's format cannot hold both back-ends and commnodes without children (such as commnode " +
                 std::to_string(commnode_leaf->rank) + "): its leaves all have one role; write YAML instead"};
  }
  return commnode_leaf ? Leaves::commnodes : Leaves::backends;
}

}  // namespace

Result<Topology> parse_topology_mrnet(std::string_view text, std::string_view source, Leaves leaves) {
  if (text.size() > kMaxTopologyBytes) return detail::too_large(source, text.size());
  try {
    detail::Shape shape = Parser(text, source).parse();
    return detail::number_tree(shape, leaves, source);
  } catch (const Invalid& invalid) {
    return Error{invalid.message};
  }
}

Result<std::string> to_mrnet(const Topology& topology) {
  auto leaves = leaves_of(topology);
  if (!leaves) return Error{leaves.error()};
  for (const Host& host : topology.hosts()) {
    if (!host.address.empty()) {
      return Error{"MRNet's format has no host addresses (host '" + host.name + "' has " + host.address +
                   "); write YAML instead"};
    }
  }
  const LinkSettings& links = topology.links();
  if (links != LinkSettings{}) {
    return Error{"MRNet's format has no link settings; write YAML instead"};
  }
  for (const TopologyNode& node : topology.nodes()) {
    if (node.link) {
      return Error{"MRNet's format has no link choices (node " + std::to_string(node.rank) + " has a " +
                   std::string(to_string(*node.link)) + " link); write YAML instead"};
    }
    if (node.port != 0) {
      return Error{"MRNet's format has no ports (node " + std::to_string(node.rank) + " has port " +
                   std::to_string(node.port) + "); write YAML instead"};
    }
    if (!is_mrnet_host(node.host)) {
      return Error{"host name '" + node.host + "' of node " + std::to_string(node.rank) +
                   " cannot be written in MRNet's format (letters, digits, '.', '-', '_', starting with a letter "
                   "or digit, not all digits)"};
    }
  }
  // The ranks must be those reading the text back would give.
  detail::Shape shape = detail::shape_of(topology);
  auto canonical = detail::number_tree(shape, *leaves, "<mrnet>");
  if (!canonical) return Error{canonical.error()};
  for (std::size_t i = 0; i < topology.size(); ++i) {
    Rank have = topology.nodes()[i].rank, want = canonical->nodes()[i].rank;
    if (have != want) {
      return Error{"MRNet's format has no ranks and node " + std::to_string(have) + " would read back as " +
                   std::to_string(want) + " (back-ends are numbered 0.. depth first, the front-end " +
                   std::to_string(kFirstInternalRank) + ", commnodes after it breadth first); write YAML instead"};
    }
  }

  std::unordered_map<std::string, std::uint32_t> next_instance;
  std::vector<std::string> names(topology.size());
  for (std::size_t i = 0; i < topology.size(); ++i) {
    const std::string& host = topology.nodes()[i].host;
    names[i] = host + ":" + std::to_string(next_instance[host]++);
  }
  std::string out = "# Canopy topology in MRNet's format: " + std::to_string(topology.size()) + " processes, " +
                    std::to_string(topology.backends().size()) + " back-ends";
  out += *leaves == Leaves::commnodes ? "; the leaves are commnodes (attach mode)\n" : "\n";
  if (topology.size() == 1) return out + names[0] + " ;\n";
  constexpr std::size_t kChildrenPerLine = 8;  // long child lists continue on the next lines
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i].children.empty()) continue;
    out += names[i] + " =>";
    for (std::size_t c = 0; c < shape[i].children.size(); ++c) {
      out += (c > 0 && c % kChildrenPerLine == 0) ? "\n    " : " ";
      out += names[shape[i].children[c]];
    }
    out += " ;\n";
  }
  return out;
}

}  // namespace canopy
