// MRNet 5.0.1's basic types, as its tools use them (docs/mrnet.md): part of Canopy's
// MRNet API layer, written for Canopy.
#pragma once

#include <cstdint>

namespace MRN {

typedef uint32_t Rank;
typedef uint16_t Port;

const Rank UnknownRank = static_cast<Rank>(-1);
const Port UnknownPort = 0;

// Tags below this are MRNet's own; a tool's tags start here.
const int FirstApplicationTag = 100;

}  // namespace MRN
