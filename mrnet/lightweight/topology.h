// NetworkTopology_t of MRNet's lightweight C API: the C++ layer's NetworkTopology
// (mrnet/topology.cpp), kept by each Network_t and brought up to date from
// canopy::Backend::status() by Network_get_NetworkTopology().
#pragma once

#include <set>
#include <vector>

#include "canopy/view.h"
#include "mrnet/NetworkTopology.h"

struct NetworkTopology_t {
  void reset(const std::vector<canopy::NodeStatus>& status);

  // Its Node objects live as long as it: a Node_t* stays valid.
  MRN::NetworkTopology tree;
  std::set<MRN::Rank> attached;  // layer::reset_topology's
};
