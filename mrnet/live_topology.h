// The live tree of canopy's status() as MRNet's NetworkTopology: one conversion for
// the C++ layer (front-end and back-ends) and the lightweight C back-end.
#pragma once

#include <set>
#include <vector>

#include "canopy/view.h"
#include "mrnet/NetworkTopology.h"

namespace MRN::layer {

// Resets `topology` to `status` (Network::status() or Backend::status()). A
// back-end is part of the tree once it has been a member of the view (at once when
// launched; in attach mode once it has attached) or once it failed: `attached`
// keeps the members seen so far, across calls.
void reset_topology(NetworkTopology& topology, const std::vector<canopy::NodeStatus>& status,
                    std::set<Rank>& attached);

}  // namespace MRN::layer
