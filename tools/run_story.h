// The events of a run told in plain sentences, for the dashboard and the report of
// `canopy run` (docs/fault-tolerance.md, "Watching a run"). Pure: no I/O.
//
// A process's failure and what followed it are one entry: the failure of commnode X,
// then the recovered events of its orphans (each names X as the parent it lost),
// read as "commnode X on H was killed by signal 9 (Killed); back-ends 4–7 moved to
// commnodes Y, Z; recovered in 2.1 ms". The entry is kept up to date as its orphans
// are adopted, in whichever order the front-end hears of them (an orphan's recovery
// may come before its parent's failure: docs/fault-tolerance.md). The lines
// `canopy run` prints for those events stay with the entry, as its detail.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "canopy/event.h"
#include "canopy/view.h"

namespace canopy::tools {

struct StoryEntry {
  std::uint64_t number = 0;         // the entries' count before it: an entry's lasting name
  double at_s = 0;                  // when it began, in seconds since the run started
  std::string kind;                 // "failure" (a loss and its recoveries), "view", "gossip", ... (Event::Kind)
  std::string headline;             // a plain sentence
  std::vector<std::string> detail;  // the developer's lines (event_text), oldest first
};

class EventStory {
 public:
  explicit EventStory(std::chrono::system_clock::time_point run_start) : start_(run_start) {}

  // The tree as the front-end last saw it: who each rank is (role, host), and the
  // children a process had while it was alive (its orphans, once it fails).
  void observe(const std::vector<NodeStatus>& tree);
  // One event, with its developer line.
  void add(const Event& event, std::string detail);
  // Oldest first; at most kKept (the oldest go first).
  const std::deque<StoryEntry>& entries() const { return entries_; }
  static constexpr std::size_t kKept = 50;

 private:
  struct Incident {  // a process's loss and its orphans' recoveries
    Rank lost = 0;
    std::optional<std::string> reason;  // from the failure event, once heard
    std::vector<Rank> orphans;          // its children as last seen alive
    std::map<Rank, Rank> moved_to;      // orphan -> adopter
    std::chrono::microseconds slowest{0};  // the slowest orphan's recovery
    std::uint64_t entry = 0;            // the number of its entry
  };
  StoryEntry* entry(std::uint64_t number);
  StoryEntry& open(const Event& event);
  Incident& incident_of(Rank lost, const Event& event);
  std::string headline(const Incident& incident) const;
  // "back-end 4", "commnode 1000002 on n3", "the front-end"
  std::string who(Rank rank, bool with_host = false) const;

  std::chrono::system_clock::time_point start_;
  std::map<Rank, NodeStatus> known_;               // each rank as last seen
  std::map<Rank, std::vector<Rank>> children_;     // each process's children while alive
  std::map<Rank, Incident> incidents_;             // the latest incident of each lost rank
  std::deque<StoryEntry> entries_;
  std::uint64_t first_number_ = 0;                 // the number of entries_.front()
};

// "back-ends 4–7, 9", "commnode 1000002", "commnodes 1000001, 1000003", "the
// front-end", joined with "and" across roles. `known` tells each rank's role.
std::string describe_ranks(const std::vector<Rank>& ranks, const std::map<Rank, NodeStatus>& known);
// "2.1 ms", "850 us", "1.20 s"
std::string describe_duration(std::chrono::microseconds d);

}  // namespace canopy::tools
