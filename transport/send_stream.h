// SendStream: a link's outgoing byte stream, framed messages (frame.h) numbered by
// byte, from the oldest byte not yet released to the newest queued one. Frames are
// written into blocks that never move, so appending never copies what is queued and
// a write in flight keeps pointing at its bytes; released blocks are kept for reuse.
// A TCP link releases what it has written; a striped link what is acknowledged.
// Not thread-safe: the link's io_context thread owns it.
#pragma once

#include <capnp/message.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "transport/frame.h"

namespace canopy::transport {

class SendStream {
 public:
  // Frames are appended to blocks of at most `block_bytes` (a larger frame gets a
  // block of its own). The first block after the stream was empty is small
  // (kFirstBlockBytes) and each next one twice the last, so that a few small frames
  // do not take a large block. Released blocks are kept for reuse while the stream
  // holds bytes, and freed with the last one: a stream with nothing to send holds no
  // memory (a process of the tree has a link to each neighbour, idle most of the
  // time; each kept a block of 256 KB for ever before).
  explicit SendStream(std::size_t block_bytes = 1u << 20);
  static constexpr std::size_t kFirstBlockBytes = 4096;

  // Appends one frame holding `message`, encoded as append_frame() (frame.h) does but
  // straight into the block: one copy of the message, no zero-filling first.
  // Returns one past its last sequence number.
  std::uint64_t append(capnp::MessageBuilder& message);

  std::uint64_t begin() const { return blocks_.empty() ? end_ : blocks_.front().seq; }
  std::uint64_t end() const { return end_; }
  std::uint64_t held_bytes() const { return end_ - begin(); }

  // The held bytes from `seq` to the end of its block, at most `max`: a fragment
  // never spans two blocks, so it is one contiguous buffer. Requires
  // begin() <= seq < end(). Valid until release() frees the block.
  std::span<const std::byte> contiguous(std::uint64_t seq, std::size_t max) const;

  // Frees every block that ends at or below `seq`.
  void release(std::uint64_t seq);

  // Bytes of the blocks it holds, queued, spare or free room.
  std::size_t allocated_bytes() const;

 private:
  struct Block {
    std::uint64_t seq = 0;                // of its first byte
    std::unique_ptr<Word[]> bytes;        // never reallocated: writes in flight point into it
    std::size_t size = 0, capacity = 0;
    std::uint64_t end() const { return seq + size; }
  };
  std::size_t block_bytes_;
  std::size_t next_block_bytes_;  // of the next block opened
  // Oldest first. A vector, not a deque: an empty deque holds 576 bytes, and a
  // stream holds a few blocks at most.
  std::vector<Block> blocks_;
  std::vector<Block> spare_;  // released blocks kept for reuse (a few, not too large)
  std::uint64_t end_ = 0;
};

}  // namespace canopy::transport
