// Failures grouped by message. A request or a stream creation that fails alike at
// many nodes (a plugin missing on every host) is acknowledged up the tree with one
// entry per distinct message and the ranks that reported it, merged at each level,
// and shown once: "commnodes 1000001-1000016 and the front-end: cannot load filter
// plugin: /x.so: file too short" instead of one line per node.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include <capnp/list.h>

#include "canopy.capnp.h"
#include "canopy/topology.h"

namespace canopy::core {

class Failures {
 public:
  // Bounds, whatever a subtree sends: distinct messages kept, and a message's length.
  static constexpr std::size_t kMaxMessages = 32;
  static constexpr std::size_t kMaxMessageBytes = 1024;

  void add(Rank rank, std::string message);
  void merge(capnp::List<wire::Failure>::Reader failures);
  void merge(const Failures& other);
  void write(capnp::List<wire::Failure>::Builder out) const;
  std::size_t size() const { return groups_.size(); }  // for initFailures()
  bool empty() const { return groups_.empty() && dropped_ == 0; }
  // Whether there are failures and every one says `message`.
  bool only(std::string_view message) const {
    return dropped_ == 0 && groups_.size() == 1 && groups_.begin()->first == message;
  }
  // The ranks that reported `message` (none if none did).
  std::set<Rank> ranks_of(const std::string& message) const {
    auto it = groups_.find(message);
    return it == groups_.end() ? std::set<Rank>{} : it->second;
  }

  // Every group, "WHO: MESSAGE" joined by "; ", WHO naming the ranks by role as
  // ranges ("back-ends 0-3,7", "commnodes 1000001-1000004", "the front-end"), or, for
  // one node, as "commnode 1000003 on host". "" when empty.
  std::string describe(const Topology* topology) const;

 private:
  std::map<std::string, std::set<Rank>> groups_;
  std::size_t dropped_ = 0;  // failures past kMaxMessages distinct messages
};

// "0-3,7,9-10"
std::string rank_ranges(const std::set<Rank>& ranks);

}  // namespace canopy::core
