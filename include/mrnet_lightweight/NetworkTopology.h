/* MRNet's network topology (lightweight C API): declared so that tools that name
 * the types build. Canopy's lightweight back-end does not keep the tree's topology:
 * Network_get_NetworkTopology() returns NULL, and the NetworkTopology_ functions are
 * not provided (docs/mrnet.md). */
#ifndef CANOPY_MRNET_LIGHTWEIGHT_NETWORKTOPOLOGY_H
#define CANOPY_MRNET_LIGHTWEIGHT_NETWORKTOPOLOGY_H

#include "mrnet_lightweight/Types.h"

typedef struct NetworkTopology_t NetworkTopology_t;
typedef struct Node_t Node_t;

#endif
