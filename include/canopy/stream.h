// What a stream is made of: a communicator (a set of back-ends), an upstream
// filter, a synchronisation mode and a downstream filter (docs/filters.md).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "canopy/packet.h"
#include "canopy/topology.h"

namespace canopy {

struct StreamOptions {
  std::vector<Rank> backends;  // the communicator; empty = every back-end
  std::string upstream_filter = "sum";
  Packet upstream_params;      // given to the upstream filter's create
  SyncMode sync = SyncMode::wait_for_all;
  // time_out mode: how long a node waits for the rest of a wave after its first packet.
  std::chrono::milliseconds sync_timeout{100};
  std::string downstream_filter;  // "" = packets go down unchanged
  Packet downstream_params;
};

}  // namespace canopy
