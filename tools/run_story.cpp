#include "run_story.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace canopy::tools {

namespace {

const char* role_word(Role role, bool many) {
  switch (role) {
    case Role::frontend: return many ? "front-ends" : "front-end";
    case Role::commnode: return many ? "commnodes" : "commnode";
    case Role::backend: return many ? "back-ends" : "back-end";
  }
  return many ? "processes" : "process";
}

// "4–7, 9, 12": runs of three or more consecutive ranks as ranges.
std::string ranges(std::vector<Rank> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    const auto piece = [&](std::size_t k) { out += (out.empty() ? "" : ", ") + std::to_string(ranks[k]); };
    if (j - i >= 2) {
      out += (out.empty() ? "" : ", ") + std::to_string(ranks[i]) + "\u2013" + std::to_string(ranks[j]);
    } else {
      for (std::size_t k = i; k <= j; ++k) piece(k);
    }
    i = j + 1;
  }
  return out;
}

std::string join_and(const std::vector<std::string>& parts) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return out;
}

}  // namespace

std::string describe_ranks(const std::vector<Rank>& ranks, const std::map<Rank, NodeStatus>& known) {
  std::map<int, std::vector<Rank>> by_role;  // -1: not known
  bool frontend = false;
  for (Rank r : ranks) {
    const auto it = known.find(r);
    if (it != known.end() && it->second.role == Role::frontend) {
      frontend = true;
    } else {
      by_role[it == known.end() ? -1 : static_cast<int>(it->second.role)].push_back(r);
    }
  }
  std::vector<std::string> parts;
  if (frontend) parts.push_back("the front-end");
  for (const auto& [role, list] : by_role) {
    const bool many = list.size() > 1;
    const std::string word = role < 0 ? (many ? "processes" : "process") : role_word(static_cast<Role>(role), many);
    parts.push_back(word + " " + ranges(list));
  }
  return join_and(parts);
}

std::string describe_duration(std::chrono::microseconds d) {
  char text[32];
  const double us = static_cast<double>(d.count());
  if (us < 1000) {
    std::snprintf(text, sizeof text, "%.0f us", us);
  } else if (us < 1e6) {
    std::snprintf(text, sizeof text, "%.1f ms", us / 1e3);
  } else {
    std::snprintf(text, sizeof text, "%.2f s", us / 1e6);
  }
  return text;
}

void EventStory::observe(const std::vector<NodeStatus>& tree) {
  for (const auto& n : tree) {
    known_[n.rank] = n;
    // A lost process's children are its orphans: keep those it had while alive.
    if (n.alive) children_[n.rank] = n.children;
  }
}

std::string EventStory::who(Rank rank, bool with_host) const {
  const auto it = known_.find(rank);
  if (it == known_.end()) return "process " + std::to_string(rank);
  if (it->second.role == Role::frontend) return "the front-end";
  std::string out = std::string(role_word(it->second.role, false)) + " " + std::to_string(rank);
  if (with_host && !it->second.host.empty()) out += " on " + it->second.host;
  return out;
}

StoryEntry* EventStory::entry(std::uint64_t number) {
  if (number < first_number_ || number - first_number_ >= entries_.size()) return nullptr;  // dropped since
  return &entries_[number - first_number_];
}

StoryEntry& EventStory::open(const Event& event) {
  if (entries_.size() == kKept) {
    entries_.pop_front();
    ++first_number_;
  }
  StoryEntry e;
  e.number = first_number_ + entries_.size();
  e.at_s = std::chrono::duration<double>(event.time - start_).count();
  e.kind = std::string(to_string(event.kind));
  entries_.push_back(std::move(e));
  return entries_.back();
}

EventStory::Incident& EventStory::incident_of(Rank lost, const Event& event) {
  auto it = incidents_.find(lost);
  // A second failure of the same rank (a back-end declared failed again at a later
  // epoch) is a new incident; so is an incident whose entry has been dropped.
  const bool fresh = it == incidents_.end() || !entry(it->second.entry) ||
                     (event.kind == Event::Kind::failure && it->second.reason);
  if (fresh) {
    Incident incident;
    incident.lost = lost;
    if (auto c = children_.find(lost); c != children_.end()) incident.orphans = c->second;
    // A loss, whichever of its events came first (an orphan's adoption often does).
    open(event).kind = std::string(to_string(Event::Kind::failure));
    incident.entry = first_number_ + entries_.size() - 1;
    it = incidents_.insert_or_assign(lost, std::move(incident)).first;
  }
  return it->second;
}

std::string EventStory::headline(const Incident& incident) const {
  std::string out = who(incident.lost, true);
  if (incident.reason) {
    // The reason names the process itself ("commnode 1000002 on n3 was killed by
    // signal 9 (Killed)") when the tree saw it die, else it says why it was declared lost.
    const std::string& reason = *incident.reason;
    const std::string named = out + " ";
    if (reason.rfind(named, 0) == 0) {
      out = reason;
    } else {
      out += " was lost: " + reason;
    }
  } else {
    out += " was lost";
  }
  std::vector<Rank> orphans = incident.orphans;
  for (const auto& [orphan, adopter] : incident.moved_to) {
    if (std::find(orphans.begin(), orphans.end(), orphan) == orphans.end()) orphans.push_back(orphan);
  }
  std::vector<Rank> moved, adopters, waiting;
  for (Rank orphan : orphans) {
    const auto it = incident.moved_to.find(orphan);
    if (it != incident.moved_to.end()) {
      moved.push_back(orphan);
      if (std::find(adopters.begin(), adopters.end(), it->second) == adopters.end()) adopters.push_back(it->second);
      continue;
    }
    // Orphans lost themselves (a back-end killed with its commnode) wait for nothing.
    const auto k = known_.find(orphan);
    if (k == known_.end() || k->second.alive) waiting.push_back(orphan);
  }
  if (!moved.empty()) {
    out += "; " + describe_ranks(moved, known_) + " moved to " + describe_ranks(adopters, known_);
  }
  if (!waiting.empty()) {
    out += "; " + describe_ranks(waiting, known_) + (waiting.size() == 1 ? " waits" : " wait") + " for an adopter";
  } else if (!moved.empty()) {
    out += "; recovered in " + describe_duration(incident.slowest);
  }
  return out;
}

void EventStory::add(const Event& event, std::string detail) {
  using Kind = Event::Kind;
  if (event.kind == Kind::failure || event.kind == Kind::recovered || event.kind == Kind::adoption) {
    // Adoption events carry no lost parent; the orphan's parent as last seen is it.
    Rank lost = event.rank;
    if (event.kind == Kind::recovered) {
      lost = event.failed_parent;
    } else if (event.kind == Kind::adoption) {
      const auto k = known_.find(event.rank);
      if (k == known_.end() || !k->second.parent) {
        auto& e = open(event);
        e.headline = who(event.rank) + " was adopted by " + who(event.adopter);
        e.detail.push_back(std::move(detail));
        return;
      }
      lost = *k->second.parent;
    }
    Incident& incident = incident_of(lost, event);
    if (event.kind == Kind::failure) {
      incident.reason = event.reason;
    } else {
      incident.moved_to[event.rank] = event.adopter;
      const auto took = event.choose + event.connect + event.compensate + event.cleanup;
      incident.slowest = std::max(incident.slowest, std::chrono::duration_cast<std::chrono::microseconds>(took));
    }
    StoryEntry* e = entry(incident.entry);
    e->headline = headline(incident);
    e->detail.push_back(std::move(detail));
    return;
  }
  auto& e = open(event);
  e.detail.push_back(std::move(detail));
  switch (event.kind) {
    case Kind::view: {
      e.headline = std::to_string(event.view.members.size()) + " back-end" +
                   (event.view.members.size() == 1 ? "" : "s") + " in the membership view (view " +
                   std::to_string(event.view.id) + ")";
      std::vector<std::string> changes;
      if (!event.left.empty()) changes.push_back(describe_ranks(event.left, known_) + " left");
      if (!event.joined.empty()) changes.push_back(describe_ranks(event.joined, known_) + " joined");
      if (!changes.empty()) e.headline += ": " + join_and(changes);
      e.headline += "; every process agreed in " + describe_duration(event.stabilise);
      break;
    }
    case Kind::gossip:
      e.headline = who(event.detector) + " found " + who(event.rank, true) + " failed: its heartbeat had stood still for " +
                   describe_duration(std::chrono::duration_cast<std::chrono::microseconds>(event.silent));
      break;
    case Kind::frontend_lost:
      e.headline = "the front-end was lost: " + event.reason;
      break;
    case Kind::promoted:
      e.headline = who(event.rank, true) + " took the root's place and adopted " + std::to_string(event.adopted) +
                   " process" + (event.adopted == 1 ? "" : "es") + " in " + describe_duration(event.after);
      break;
    case Kind::reattached:
      e.headline = "this front-end took the run over from " + who(event.rank, true) + ", " +
                   describe_duration(event.after) + " after the last one was lost";
      break;
    case Kind::service:
      e.headline = "service " + event.service + " of " + who(event.rank) + ": " + event.detail;
      break;
    default:
      e.headline = e.detail.front();
  }
}

}  // namespace canopy::tools
