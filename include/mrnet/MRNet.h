// MRNet 5.0.1's API on Canopy (docs/mrnet.md): the one header tools include.
#pragma once

#include "mrnet/Communicator.h"
#include "mrnet/Error.h"
#include "mrnet/Event.h"
#include "mrnet/FilterIds.h"
#include "mrnet/Network.h"
#include "mrnet/NetworkTopology.h"
#include "mrnet/Packet.h"
#include "mrnet/Stream.h"
#include "mrnet/Types.h"
#include "xplat/Monitor.h"  // MRNet's headers bring both
#include "xplat/Mutex.h"
