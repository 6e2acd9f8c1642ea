/* MRNet's network topology (lightweight C API): the live tree as this back-end knows
 * it (docs/mrnet.md). Network_get_NetworkTopology() brings it up to date and returns
 * it; it belongs to the Network_t, and so do the Node_t it gives, which stay valid
 * until delete_Network_t. A failed node is kept, marked, and not counted. The types
 * are opaque here: MRNet's structures' fields are not part of Canopy's API. */
#ifndef CANOPY_MRNET_LIGHTWEIGHT_NETWORKTOPOLOGY_H
#define CANOPY_MRNET_LIGHTWEIGHT_NETWORKTOPOLOGY_H

#include <stdio.h>

#include "mrnet_lightweight/Types.h"

typedef struct NetworkTopology_t NetworkTopology_t;
typedef struct Node_t Node_t;

#ifdef __cplusplus
extern "C" {
#endif

/* Nodes of the tree that have not failed. */
unsigned int NetworkTopology_get_NumNodes(NetworkTopology_t* net_top);
/* The front-end's node. */
Node_t* NetworkTopology_get_Root(NetworkTopology_t* net_top);
/* NULL if no node has that rank. */
Node_t* NetworkTopology_find_Node(NetworkTopology_t* net_top, Rank rank);
/* The tree in MRNet's topology file format ("host:rank => host:rank ... ;"), with
 * malloc()ed storage the caller frees. */
char* NetworkTopology_get_TopologyStringPtr(NetworkTopology_t* net_top);
void NetworkTopology_print(NetworkTopology_t* net_top, FILE* f);

char* NetworkTopology_Node_get_HostName(Node_t* node);
Port NetworkTopology_Node_get_Port(Node_t* node); /* UnknownPort: Canopy's ports are not part of the API */
Rank NetworkTopology_Node_get_Rank(Node_t* node);
Rank NetworkTopology_Node_get_Parent(Node_t* node); /* UnknownRank for the root */
unsigned int NetworkTopology_Node_find_SubTreeHeight(Node_t* node);
int NetworkTopology_Node_is_BackEnd(Node_t* node);

#ifdef __cplusplus
}
#endif

#endif
