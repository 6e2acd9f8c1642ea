// MRNet's lightweight NetworkTopology_ functions (include/mrnet_lightweight/
// NetworkTopology.h) over the C++ layer's NetworkTopology. A Node_t* is a
// NetworkTopology::Node*.
#include "mrnet/lightweight/topology.h"

#include <cstdlib>
#include <cstring>

#include "mrnet/lightweight/export.h"
#include "mrnet/live_topology.h"
#include "mrnet_lightweight/NetworkTopology.h"

using Node = MRN::NetworkTopology::Node;

void NetworkTopology_t::reset(const std::vector<canopy::NodeStatus>& status) {
  MRN::layer::reset_topology(tree, status, attached);
}

namespace {

Node* of(Node_t* node) { return reinterpret_cast<Node*>(node); }
Node_t* of(Node* node) { return reinterpret_cast<Node_t*>(node); }

}  // namespace

CANOPY_MRNET_LW_EXPORT unsigned int NetworkTopology_get_NumNodes(NetworkTopology_t* net_top) {
  return net_top ? net_top->tree.get_NumNodes() : 0;
}

CANOPY_MRNET_LW_EXPORT Node_t* NetworkTopology_get_Root(NetworkTopology_t* net_top) {
  return net_top ? of(net_top->tree.get_Root()) : nullptr;
}

CANOPY_MRNET_LW_EXPORT Node_t* NetworkTopology_find_Node(NetworkTopology_t* net_top, Rank rank) {
  return net_top ? of(net_top->tree.find_Node(rank)) : nullptr;
}

CANOPY_MRNET_LW_EXPORT char* NetworkTopology_get_TopologyStringPtr(NetworkTopology_t* net_top) {
  return net_top ? strdup(net_top->tree.get_TopologyString().c_str()) : nullptr;
}

CANOPY_MRNET_LW_EXPORT void NetworkTopology_print(NetworkTopology_t* net_top, FILE* f) {
  if (net_top) net_top->tree.print(f);
}

CANOPY_MRNET_LW_EXPORT char* NetworkTopology_Node_get_HostName(Node_t* node) {
  // The node's own string: a host never changes, and the node lives as long as its
  // topology (MRNet hands out its node's storage too).
  return node ? const_cast<char*>(of(node)->get_HostName().c_str()) : nullptr;
}

CANOPY_MRNET_LW_EXPORT Port NetworkTopology_Node_get_Port(Node_t* node) {
  return node ? of(node)->get_Port() : UnknownPort;
}

CANOPY_MRNET_LW_EXPORT Rank NetworkTopology_Node_get_Rank(Node_t* node) {
  return node ? of(node)->get_Rank() : UnknownRank;
}

CANOPY_MRNET_LW_EXPORT Rank NetworkTopology_Node_get_Parent(Node_t* node) {
  return node ? of(node)->get_Parent() : UnknownRank;
}

CANOPY_MRNET_LW_EXPORT unsigned int NetworkTopology_Node_find_SubTreeHeight(Node_t* node) {
  return node ? of(node)->find_SubTreeHeight() : 0;
}

CANOPY_MRNET_LW_EXPORT int NetworkTopology_Node_is_BackEnd(Node_t* node) {
  return node && of(node)->is_BackEnd() ? 1 : 0;
}
