#include "transport/send_stream.h"

#include "transport/traffic.h"

#include <algorithm>
#include <cassert>

namespace canopy::transport {

SendStream::SendStream(std::size_t block_bytes)
    : block_bytes_(std::max<std::size_t>(64, block_bytes)),
      next_block_bytes_(std::min(kFirstBlockBytes, block_bytes_)) {}

std::uint64_t SendStream::append(capnp::MessageBuilder& message) {
  auto segments = message.getSegmentsForOutput();
  const std::size_t words = frame_words(segments);
  const std::size_t frame_bytes = words * sizeof(capnp::word);
  if (blocks_.empty() || blocks_.back().capacity - blocks_.back().size < frame_bytes) {
    Block block;
    auto fits = std::find_if(spare_.begin(), spare_.end(), [&](const Block& b) { return b.capacity >= frame_bytes; });
    if (fits != spare_.end()) {
      block = std::move(*fits);
      spare_.erase(fits);
    } else {
      block.capacity = std::max(next_block_bytes_, frame_bytes);
      block.bytes = std::make_unique_for_overwrite<Word[]>(block.capacity / sizeof(Word) + 1);
    }
    next_block_bytes_ = std::min(2 * next_block_bytes_, block_bytes_);
    block.seq = end_;
    block.size = 0;
    blocks_.push_back(std::move(block));
  }
  Block& tail = blocks_.back();
  // Frames are whole words: a block's size stays a multiple of 8, each frame aligned.
  write_frame(segments, words, tail.bytes.get() + tail.size / sizeof(Word));
  tail.size += frame_bytes;
  end_ += frame_bytes;
  process_traffic().sent(frame_bytes);
  return end_;
}

std::span<const std::byte> SendStream::contiguous(std::uint64_t seq, std::size_t max) const {
  assert(seq >= begin() && seq < end_);
  // Fragments are cut at the back and resent from the front: look there first.
  auto it = blocks_.end() - 1;
  if (seq < it->seq) {
    it = std::upper_bound(blocks_.begin(), blocks_.end(), seq,
                          [](std::uint64_t s, const Block& b) { return s < b.seq; }) - 1;
  }
  std::size_t offset = seq - it->seq;
  return {reinterpret_cast<const std::byte*>(it->bytes.get()) + offset, std::min<std::size_t>(it->size - offset, max)};
}

void SendStream::release(std::uint64_t seq) {
  std::size_t released = 0;
  while (released < blocks_.size() && blocks_[released].end() <= seq) {
    Block& block = blocks_[released++];
    if (spare_.size() < 4 && block.capacity <= 4 * block_bytes_) spare_.push_back(std::move(block));
  }
  blocks_.erase(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(released));
  if (blocks_.empty()) {
    // Nothing left to send: no memory held until there is.
    std::vector<Block>().swap(blocks_);
    std::vector<Block>().swap(spare_);
    next_block_bytes_ = std::min(kFirstBlockBytes, block_bytes_);
  }
}

std::size_t SendStream::allocated_bytes() const {
  std::size_t bytes = (blocks_.capacity() + spare_.capacity()) * sizeof(Block);
  for (const Block& b : blocks_) bytes += b.capacity;
  for (const Block& b : spare_) bytes += b.capacity;
  return bytes;
}

}  // namespace canopy::transport
