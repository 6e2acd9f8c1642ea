// MRNet 5.0.1's basic types, as its tools use them (docs/mrnet.md): part of Canopy's
// MRNet API layer, written for Canopy.
#pragma once

#include <cstdint>

namespace MRN {

typedef uint32_t Rank;
typedef uint16_t Port;

const Rank UnknownRank = static_cast<Rank>(-1);
const Port UnknownPort = 0;

// Tags below FirstApplicationTag are MRNet's own; a tool's tags start there.
#define FirstSystemTag 0
#define FirstApplicationTag 100

#ifndef MRNET_VERSION_MAJOR
#define MRNET_VERSION_MAJOR 5
#define MRNET_VERSION_MINOR 0
#define MRNET_VERSION_REV 1
#endif

// The MRNet version this layer implements: 5.0.1.
void get_Version(int& major, int& minor, int& revision);
// MRNet's debug output level (0 to 5). Canopy logs to files when CANOPY_LOG_DIR is
// set (docs/mrnet.md); the level is kept and otherwise ignored.
void set_OutputLevel(int level = 1);

}  // namespace MRN
