#include "mrnet/live_topology.h"

namespace MRN::layer {

void reset_topology(NetworkTopology& topology, const std::vector<canopy::NodeStatus>& status,
                    std::set<Rank>& attached) {
  for (const auto& node : status) {
    if (node.member) attached.insert(node.rank);
  }
  std::vector<NetworkTopology::Entry> entries;
  for (const auto& node : status) {
    if (node.role == canopy::Role::backend && node.alive && !attached.count(node.rank)) continue;
    entries.push_back({node.rank, node.host, node.parent ? *node.parent : UnknownRank,
                       node.role == canopy::Role::backend, !node.alive, node.port});
  }
  topology.reset_Nodes(entries);
}

}  // namespace MRN::layer
