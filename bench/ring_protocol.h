// The ring-token benchmark's packets, shared by canopy-ring-bench (the driver, a
// front-end) and canopy-ring-backend (docs/benchmarks.md, "Ring of tokens").
//
// The back-ends talk to each other with Backend::send_to, on a stream over every
// back-end that the driver opens for it and names in kStart (no packet goes up it):
// a commnode passes a point-to-point packet down only on a stream it knows (stream 0,
// "no stream", is dropped there with "dropping a packet for unknown stream 0"). A
// back-end forwards on the stream a packet came on. Rank 0 talks to the driver over
// a stream whose only back-end is rank 0 (concat filter, dont_wait), with int64
// arrays so that concat passes them through unchanged.
#pragma once

#include <cstdint>

#include "canopy/packet.h"

namespace canopy::ring {

enum RingTag : canopy::Tag {
  kToken = 1,    // {uint64 id, int64 send time (CLOCK_REALTIME us), uint32 hops so far}
  kPing = 2,     // rank 0 -> a back-end: {uint64 seq}
  kPong = 3,     // the answer, back to the sender: {uint64 seq}
  kStart = 10,   // driver -> rank 0: {uint32 stream for send_to}: do the pings, then inject the tokens
  kStarted = 11, // rank 0 -> driver: {int64[]{CLOCK_REALTIME us of the first token}}
  kDone = 12,    // rank 0 -> driver: {int64[]{tokens sent, tokens back}}; its files are written
};

}  // namespace canopy::ring
