/* MRNet 5.0.1's lightweight C back-end API on Canopy (docs/mrnet.md): link with
 * Canopy::mrnet_lightweight (CMake). */
#ifndef CANOPY_MRNET_LIGHTWEIGHT_MRNET_H
#define CANOPY_MRNET_LIGHTWEIGHT_MRNET_H

#include "mrnet_lightweight/Types.h"

#include "mrnet_lightweight/DataElement.h"
#include "mrnet_lightweight/Error.h"
#include "mrnet_lightweight/FilterIds.h"
#include "mrnet_lightweight/Network.h"
#include "mrnet_lightweight/NetworkTopology.h"
#include "mrnet_lightweight/Packet.h"
#include "mrnet_lightweight/Stream.h"

#endif
