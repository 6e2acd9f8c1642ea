#include "core/failures.h"

#include <algorithm>
#include <vector>

namespace canopy::core {

void Failures::add(Rank rank, std::string message) {
  if (message.size() > kMaxMessageBytes) message = message.substr(0, kMaxMessageBytes) + "...";
  auto it = groups_.find(message);
  if (it == groups_.end()) {
    if (groups_.size() >= kMaxMessages) {
      ++dropped_;
      return;
    }
    it = groups_.emplace(std::move(message), std::set<Rank>{}).first;
  }
  it->second.insert(rank);
}

void Failures::merge(capnp::List<wire::Failure>::Reader failures) {
  for (auto f : failures) {
    std::string message = f.getMessage();
    for (auto rank : f.getRanks()) add(rank, message);
  }
}

void Failures::merge(const Failures& other) {
  for (const auto& [message, ranks] : other.groups_) {
    for (Rank r : ranks) add(r, message);
  }
  dropped_ += other.dropped_;
}

void Failures::write(capnp::List<wire::Failure>::Builder out) const {
  std::size_t i = 0;
  for (const auto& [message, ranks] : groups_) {
    if (i >= out.size()) break;
    auto f = out[static_cast<unsigned>(i++)];
    f.setMessage(message);
    auto list = f.initRanks(static_cast<unsigned>(ranks.size()));
    unsigned k = 0;
    for (Rank r : ranks) list.set(k++, r);
  }
}

std::string rank_ranges(const std::set<Rank>& ranks) {
  std::string out;
  for (auto it = ranks.begin(); it != ranks.end();) {
    Rank first = *it, last = first;
    for (++it; it != ranks.end() && *it == last + 1; ++it) last = *it;
    out += (out.empty() ? "" : ",") + std::to_string(first);
    if (last != first) out += "-" + std::to_string(last);
  }
  return out;
}

namespace {

std::string who(const std::set<Rank>& ranks, const Topology* topology) {
  const auto find = [&](Rank r) { return topology ? topology->find(r) : nullptr; };
  if (ranks.size() == 1) {
    const canopy::TopologyNode* n = find(*ranks.begin());
    if (!n) return "node " + std::to_string(*ranks.begin());
    return std::string(n->role == Role::frontend ? "front-end" : n->role == Role::commnode ? "commnode" : "back-end") +
           " " + std::to_string(n->rank) + " on " + n->host;
  }
  std::set<Rank> backends, commnodes, unknown;
  bool frontend = false;
  for (Rank r : ranks) {
    const canopy::TopologyNode* n = find(r);
    if (!n) {
      unknown.insert(r);
    } else if (n->role == Role::frontend) {
      frontend = true;
    } else {
      (n->role == Role::commnode ? commnodes : backends).insert(r);
    }
  }
  std::vector<std::string> parts;
  const auto group = [&](const std::set<Rank>& set, const char* one, const char* many) {
    if (!set.empty()) parts.push_back(std::string(set.size() == 1 ? one : many) + " " + rank_ranges(set));
  };
  group(commnodes, "commnode", "commnodes");
  group(backends, "back-end", "back-ends");
  group(unknown, "node", "nodes");
  if (frontend) parts.push_back("the front-end");
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  }
  return out;
}

}  // namespace

std::string Failures::describe(const Topology* topology) const {
  // In rank order of each group's first node: the same failures read the same way.
  std::vector<std::pair<Rank, std::string>> lines;
  for (const auto& [message, ranks] : groups_) lines.emplace_back(*ranks.begin(), who(ranks, topology) + ": " + message);
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& [rank, line] : lines) out += (out.empty() ? "" : "; ") + line;
  if (dropped_) out += "; and " + std::to_string(dropped_) + " more failures";
  return out;
}

}  // namespace canopy::core
