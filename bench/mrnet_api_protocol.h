// The tags canopy-mrnet-bench and its back-end agree on (bench/mrnet_api_bench.cpp,
// bench/mrnet_api_bench_be.cpp). Both programs use MRNet 5.0.1's API only, so that
// the same sources build against MRNet and against Canopy's MRNet layer.
#pragma once

#include "mrnet/MRNet.h"

namespace mrnet_api_bench {

// Front-end to back-ends, on the one sum stream; every packet is "%d".
const int kTagEcho = FirstApplicationTag;       // answer with the same value
const int kTagStream = FirstApplicationTag + 1;  // send waves 0..value-1, as fast as possible
const int kTagExit = FirstApplicationTag + 2;    // answer 1, then wait for the shutdown
// Back-ends to the front-end: one packet per wave, value = the wave's number.
const int kTagWave = FirstApplicationTag + 3;

}  // namespace mrnet_api_bench
