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

#include <poll.h>

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

// Whether `fd` (event_fd(), events_fd()) is readable, i.e. whether receive() or
// next_event() would return at once. Ask this before receive(0ms) or next_event(0ms):
// on an empty queue those wait on a condition variable with a time-out of zero,
// which costs about 80 us on this project's machines (a futex wait whose expired
// time-out still goes through the kernel's timer slack), more than a hop of the tree.
inline bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

}  // namespace canopy::ring
