// Where the processes of a generated tree run (docs/topology.md, "Placing a tree on
// hosts"): spread evenly over hosts with no slot counts, packed into the slots of a
// host list with counts, a commnode with its children on one host wherever the
// counts allow; and the placement said in a few lines for a person to check.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "canopy/topology.h"
#include "tree_shape.h"

namespace canopy {
namespace detail {
namespace {

std::string describe(const std::vector<HostSlots>& hosts) {
  constexpr std::size_t kShown = 4;
  std::string list;
  for (std::size_t i = 0; i < hosts.size() && i < kShown; ++i) {
    list += (i ? "," : "") + hosts[i].name + ":" + std::to_string(hosts[i].slots);
  }
  return hosts.size() > kShown ? list + ",..." : list;
}

}  // namespace

void spread_over(Shape& shape, std::string_view frontend_host, const std::vector<std::string>& nodes) {
  shape[0].host = std::string(frontend_host);
  // The levels, and the one whose subtrees are spread: the shallowest with at least
  // as many commnodes as nodes, else the deepest with commnodes; level 1 when the
  // root's children are all leaves (then they are spread one by one).
  std::vector<std::vector<std::size_t>> levels{{0}};
  while (true) {
    std::vector<std::size_t> next;
    for (std::size_t at : levels.back()) next.insert(next.end(), shape[at].children.begin(), shape[at].children.end());
    if (next.empty()) break;
    levels.push_back(std::move(next));
  }
  auto commnodes = [&](std::size_t level) {
    std::vector<std::size_t> out;
    for (std::size_t at : levels[level]) {
      if (!shape[at].children.empty()) out.push_back(at);
    }
    return out;
  };
  std::size_t spread = 1;
  for (std::size_t level = 1; level < levels.size() && !commnodes(level).empty(); ++level) {
    spread = level;
    if (commnodes(level).size() >= nodes.size()) break;
  }
  std::vector<std::size_t> roots = commnodes(spread);
  if (roots.empty()) roots = levels.at(1);  // a flat tree: its back-ends
  for (std::size_t j = 0; j < roots.size(); ++j) {
    const std::string& host = nodes[j * nodes.size() / roots.size()];
    for (std::size_t at : breadth_first(shape, roots[j])) shape[at].host = host;
  }
  // Leaves above the spread level (in an uneven tree): the next node in turn, so that
  // no node gets them all.
  std::vector<bool> placed(shape.size(), false);
  for (std::size_t root : roots) {
    for (std::size_t at : breadth_first(shape, root)) placed[at] = true;
  }
  std::size_t turn = 0;
  for (std::size_t at : breadth_first(shape)) {
    if (at != 0 && !placed[at] && shape[at].children.empty()) shape[at].host = nodes[turn++ % nodes.size()];
  }
  // Commnodes above it, from the bottom up: each where its first child is.
  for (std::size_t level = spread; level-- > 1;) {
    for (std::size_t at : levels[level]) {
      auto& node = shape[at];
      if (!node.children.empty()) node.host = shape[node.children.front()].host;
    }
  }
}

Result<void> pack_on_hosts(Shape& shape, std::string_view frontend_host, const std::vector<HostSlots>& hosts,
                           std::string_view spec) {
  std::vector<std::uint32_t> free;
  std::uint64_t slots = 0;
  for (const HostSlots& host : hosts) {
    free.push_back(host.slots);
    slots += host.slots;
  }
  auto fe = std::find_if(hosts.begin(), hosts.end(), [&](const HostSlots& h) { return h.name == frontend_host; });
  const std::uint64_t needed = fe == hosts.end() ? shape.size() - 1 : shape.size();
  if (slots < needed) {
    const std::string besides = fe == hosts.end() ? ", " + std::to_string(needed) + " of them besides the front-end on " +
                                                        std::string(frontend_host) + ","
                                                  : "";
    return Error{"topology spec '" + std::string(spec) + "' gives " + std::to_string(shape.size()) + " processes" +
                 besides + " but the hosts have " + std::to_string(slots) + " slots (" + describe(hosts) +
                 "); add hosts or slots (host:slots)"};
  }
  shape[0].host = std::string(frontend_host);
  if (fe != hosts.end()) --free[static_cast<std::size_t>(fe - hosts.begin())];
  auto put = [&](std::size_t at, std::size_t host) {
    shape[at].host = hosts[host].name;
    --free[host];
  };
  auto first_with = [&](std::uint32_t room) {
    return static_cast<std::size_t>(
        std::find_if(free.begin(), free.end(), [&](std::uint32_t f) { return f >= room; }) - free.begin());
  };
  // Groups: a commnode with its leaf children, in depth-first order; the front-end's
  // leaf children one by one. Each group goes whole on the first host with room for
  // it; one that fits nowhere starts on the host with the most room left, and what
  // does not fit there takes the next free slots.
  for (std::size_t at : depth_first(shape)) {
    const auto& node = shape[at];
    if (node.children.empty()) continue;  // a leaf: placed with its parent's group
    std::vector<std::size_t> group;
    if (at != 0) group.push_back(at);
    for (std::size_t c : node.children) {
      if (shape[c].children.empty()) group.push_back(c);
    }
    if (group.empty()) continue;
    std::size_t host = first_with(at == 0 ? 1 : static_cast<std::uint32_t>(group.size()));
    if (host == hosts.size()) host = static_cast<std::size_t>(std::max_element(free.begin(), free.end()) - free.begin());
    for (std::size_t member : group) {
      if (free[host] == 0) host = first_with(1);
      put(member, host);
    }
  }
  return {};
}

}  // namespace detail

namespace {

// "0-2, 5, 7-9": ascending ranks as runs, the first few.
std::string runs_text(const std::vector<Rank>& ranks) {
  constexpr std::size_t kShown = 4;
  std::string out;
  std::size_t shown = 0;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (shown++ == kShown) return out + ", ...";
    out += (out.empty() ? "" : ", ") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return out;
}

std::string counted(std::size_t n, const std::string& what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

}  // namespace

std::vector<std::string> describe_placement(const Topology& topology) {
  struct OnHost {
    bool frontend = false;
    std::vector<Rank> commnodes, backends;
  };
  std::vector<std::string> order;
  std::unordered_map<std::string, OnHost> on;
  for (const TopologyNode& node : topology.nodes()) {
    auto [it, fresh] = on.try_emplace(node.host);
    if (fresh) order.push_back(node.host);
    if (node.role == Role::frontend) it->second.frontend = true;
    if (node.role == Role::commnode) it->second.commnodes.push_back(node.rank);
    if (node.role == Role::backend) it->second.backends.push_back(node.rank);
  }
  std::vector<std::string> lines;
  for (const std::string& host : order) {
    OnHost& here = on[host];
    std::sort(here.commnodes.begin(), here.commnodes.end());
    std::sort(here.backends.begin(), here.backends.end());
    std::vector<std::string> parts;
    if (here.frontend) parts.push_back("the front-end");
    if (!here.commnodes.empty()) parts.push_back(counted(here.commnodes.size(), "commnode") + " (" + runs_text(here.commnodes) + ")");
    if (!here.backends.empty()) parts.push_back(counted(here.backends.size(), "back-end") + " (" + runs_text(here.backends) + ")");
    std::string line = host + ": ";
    for (std::size_t i = 0; i < parts.size(); ++i) line += (i ? ", " : "") + parts[i];
    lines.push_back(line);
  }
  // Whether each commnode's back-end children are its local processes.
  std::size_t commnodes = 0, whole = 0;
  std::vector<std::string> split;
  for (const TopologyNode& node : topology.nodes()) {
    if (node.role != Role::commnode) continue;
    ++commnodes;
    std::size_t backends = 0, away = 0;
    std::map<std::string, std::size_t> elsewhere;
    for (Rank c : node.children) {
      const TopologyNode& child = topology.at(c);
      if (child.role != Role::backend) continue;
      ++backends;
      if (child.host != node.host) {
        ++away;
        ++elsewhere[child.host];
      }
    }
    if (away == 0) {
      ++whole;
      continue;
    }
    if (split.size() < 4) {
      std::string where;
      for (const auto& [host, n] : elsewhere) where += (where.empty() ? "" : ", ") + std::to_string(n) + " on " + host;
      split.push_back("commnode " + std::to_string(node.rank) + " on " + node.host + " has " + std::to_string(away) +
                      " of its " + counted(backends, "back-end") + " elsewhere (" + where + ")");
    }
  }
  if (commnodes > 0) {
    std::string summary = std::to_string(whole) + " of " + counted(commnodes, "commnode") +
                          " have all their back-ends on their own host";
    for (const std::string& s : split) summary += "; " + s;
    if (commnodes - whole > split.size()) summary += "; ...";
    lines.push_back(summary);
  }
  return lines;
}

}  // namespace canopy
