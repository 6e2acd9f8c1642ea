// DownLog: the root's copy of the broadcasts it sent down its streams, so that an
// adopted orphan can be sent again those its failed parent had not passed on
// (docs/fault-tolerance.md, "Broadcasts across a failure").
//
// Bounded in bytes over all streams (FaultToleranceOptions::broadcast_log_bytes):
// past the bound the oldest broadcasts go first, whatever their stream. Pure bookkeeping, no I/O; not thread-safe.
#pragma once

#include <capnp/message.h>
#include <kj/array.h>

#include <boost/container/deque.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>

#include "canopy.capnp.h"
#include "canopy/stream.h"

namespace canopy::services {

// A broadcast's number on its stream (streams.capnp, Broadcast.seq): the root's generation in
// the top 16 bits (a front-end that re-attached counts on above every one before
// it), the count from 1 below.
using DownSeq = std::uint64_t;
constexpr DownSeq down_generation(DownSeq seq) { return seq >> 48; }
constexpr DownSeq down_start(DownSeq generation) { return generation << 48; }

class DownLog {
 public:
  // Keeps a copy of broadcast `seq` of `stream` (above any kept for it), then drops
  // the oldest until the log holds at most `bound_bytes`.
  void add(StreamId stream, DownSeq seq, wire::DataPacket::Reader packet, std::size_t bound_bytes);
  // Of the broadcasts of `stream` after `after` up to `last` (the stream's latest):
  // the latest of those no longer kept, or 0 if none is missing. Those of an earlier
  // generation than `last`'s were never sent by this root: they are not counted.
  DownSeq lost(StreamId stream, DownSeq after, DownSeq last) const;
  // Calls `each` with every kept broadcast of `stream` after `after`, oldest first.
  void replay(StreamId stream, DownSeq after,
              const std::function<void(DownSeq, wire::DataPacket::Reader)>& each) const;
  std::size_t bytes() const { return bytes_; }
  std::size_t size() const { return order_.size(); }

 private:
  struct Entry {
    DownSeq seq;
    kj::Array<capnp::word> words;  // the DataPacket, one flat message
  };
  void drop_oldest();

  // Boost's deques allocate at their first element: every process has a log, only
  // the root keeps broadcasts in it.
  std::unordered_map<StreamId, boost::container::deque<Entry>> streams_;
  boost::container::deque<StreamId> order_;  // the stream of every kept broadcast, oldest first
  std::size_t bytes_ = 0;
};

}  // namespace canopy::services
