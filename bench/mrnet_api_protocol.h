/* The tags canopy-mrnet-bench and its back-ends agree on (bench/mrnet_api_bench.cpp,
 * bench/mrnet_api_bench_be.cpp, and the lightweight C back-end
 * bench/mrnet_api_bench_lw.c). All use MRNet 5.0.1's API only, so that the same
 * sources build against MRNet and against Canopy's MRNet layer. */
#pragma once

#ifdef __cplusplus
#include "mrnet/MRNet.h"
#else
#include "mrnet_lightweight/MRNet.h"
#endif

enum {
  /* Front-end to back-ends, on the one sum stream; every packet is "%d". */
  kTagEcho = FirstApplicationTag,       /* answer with the same value */
  kTagStream = FirstApplicationTag + 1, /* send waves 0..value-1, as fast as possible */
  kTagExit = FirstApplicationTag + 2,   /* answer 1, then wait for the shutdown */
  /* Back-ends to the front-end: one packet per wave, value = the wave's number. */
  kTagWave = FirstApplicationTag + 3
};
