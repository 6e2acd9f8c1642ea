// What a stream is made of: a communicator (a set of back-ends), an upstream
// filter, a synchronisation mode and a downstream filter (docs/filters.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "canopy/packet.h"
#include "canopy/topology.h"

namespace canopy {

// Streams are never closed, and each holds filter state at every node on its way:
// a network has at most this many (docs/protocol.md, "Resource bounds").
// Network::create_stream refuses the next one; a node refuses a stream past it.
inline constexpr std::size_t kMaxStreams = 16384;

// A node's own upstream filter (StreamOptions::upstream_filter_at).
struct NodeFilter {
  std::string filter;
  Packet params;  // given to its create
};

struct StreamOptions {
  std::vector<Rank> backends;  // the communicator; empty = every back-end
  // Open attach (docs/attach.md): the communicator is every back-end, those present
  // when the stream is made and those that join the tree later, each a member from
  // the moment its join reaches the nodes on its way (backends must be empty). A
  // stream made without it has the back-ends present at its making only.
  bool joiners = false;
  std::string upstream_filter = "sum";
  Packet upstream_params;      // given to the upstream filter's create
  // Per-node upstream filters (MRNet's filter assignment strings): a node named here
  // runs its own filter, made with its own parameters, in place of upstream_filter. A
  // back-end named here runs it over each packet it sends (a wave of one) before its
  // parent sees it: MRNet's back-end filters. A back-end not named runs none (but
  // for a state-recoverable upstream_filter, docs/filters.md "Where filters run").
  std::map<Rank, NodeFilter> upstream_filter_at;
  SyncMode sync = SyncMode::wait_for_all;
  // time_out mode: how long a node waits for the rest of a wave after its first packet.
  std::chrono::milliseconds sync_timeout{100};
  std::string downstream_filter;  // "" = packets go down unchanged
  Packet downstream_params;
  // After a heal, the state of a state-recoverable upstream filter that an adopted
  // orphan brings its new parent joins the adopter's next wave, filtered with that
  // wave's packets, rather than going up on its own as a result of no wave
  // (docs/fault-tolerance.md, "Waves after a failure"). Every result the front-end
  // receives is then one wave, as MRNet's tools count on (the MRNet layer sets it);
  // the state waits at the adopter until a wave closes there. Not for don't-wait
  // streams, whose packets are each filtered alone.
  bool fold_state = false;
};

}  // namespace canopy
