#include "transport/frame.h"

#include <algorithm>

#include "transport/traffic.h"

#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace canopy::transport {

std::size_t frame_words(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments) {
  // The length word, the segment table (count-1, then each size, padded to a whole
  // word), the segments.
  std::size_t words = 1 + (segments.size() + 2) / 2;
  for (auto& s : segments) words += s.size();
  return words;
}

void write_frame(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments, std::size_t words, Word* out) {
  const std::size_t table_words = (segments.size() + 2) / 2;
  std::uint64_t body_bytes = (words - 1) * sizeof(capnp::word);
  std::memcpy(out, &body_bytes, 8);  // little-endian hosts only (x86-64, aarch64)

  auto* table = reinterpret_cast<std::uint32_t*>(out + 1);
  table[0] = static_cast<std::uint32_t>(segments.size() - 1);
  for (std::size_t i = 0; i < segments.size(); ++i) {
    table[i + 1] = static_cast<std::uint32_t>(segments[i].size());
  }
  if (segments.size() % 2 == 0) table[segments.size() + 1] = 0;

  Word* dst = out + 1 + table_words;
  for (auto& s : segments) {
    std::memcpy(dst, s.begin(), s.size() * sizeof(capnp::word));
    dst += s.size();
  }
}

void append_frame(capnp::MessageBuilder& message, FrameBuffer& out) {
  auto segments = message.getSegmentsForOutput();
  const std::size_t words = frame_words(segments);
  const std::size_t at = out.size();
  out.resize(at + words);
  write_frame(segments, words, out.data() + at);
}

FrameReader::FrameReader(FrameLimits limits) : limits_(limits) {
  if (limits.max_frame_bytes > kMaxFrameLimit) {
    throw std::invalid_argument("a frame limit of " + std::to_string(limits.max_frame_bytes) +
                                " bytes is above the most a reader takes, " + std::to_string(kMaxFrameLimit));
  }
}

std::span<std::byte> FrameReader::prepare(std::size_t min_free) {
  auto* base = reinterpret_cast<std::byte*>(buffer_.data());
  if (begin_ == end_) {
    begin_ = end_ = 0;
    if (buffer_.capacity() * sizeof(Word) > std::max(kKeepBytes, min_free)) {
      FrameBuffer().swap(buffer_);  // the large frame is read: its room goes back
      base = nullptr;
    }
  } else if (begin_ > 0 && buffer_.size() * 8 - end_ < min_free) {
    // Move the partial frame to the front. begin_ is word-aligned: frames are.
    std::memmove(base, base + begin_, end_ - begin_);
    end_ -= begin_;  // (a frame, and a read: well within 32 bits)
    begin_ = 0;
  }
  std::size_t need_words = (end_ + min_free + 7) / 8;
  if (buffer_.size() < need_words) {
    buffer_.resize(need_words);
    base = reinterpret_cast<std::byte*>(buffer_.data());
  }
  return {base + end_, buffer_.size() * 8 - end_};
}

void FrameReader::release_if_read(std::size_t keep) {
  if (begin_ != end_) return;
  begin_ = end_ = 0;
  if (buffer_bytes() > keep) FrameBuffer().swap(buffer_);
}

void FrameReader::commit(std::size_t bytes_received) { end_ += static_cast<std::uint32_t>(bytes_received); }

std::optional<FrameReader::Frame> FrameReader::next() {
  if (error_ || end_ - begin_ < kFrameHeaderBytes) return std::nullopt;
  auto* base = reinterpret_cast<const std::byte*>(buffer_.data());
  std::uint64_t body_bytes;
  std::memcpy(&body_bytes, base + begin_, 8);
  if (body_bytes > limits_.max_frame_bytes) {
    error_ = std::make_unique<std::string>("frame of " + std::to_string(body_bytes) + " bytes exceeds the limit of " +
                                           std::to_string(limits_.max_frame_bytes));
    return std::nullopt;
  }
  if (body_bytes % 8 != 0 || body_bytes == 0) {
    error_ = std::make_unique<std::string>("frame length " + std::to_string(body_bytes) +
                                           " is not a positive multiple of 8");
    return std::nullopt;
  }
  if (end_ - begin_ < kFrameHeaderBytes + body_bytes) {
    // Make sure the whole frame will fit once it arrives.
    std::size_t total = kFrameHeaderBytes + body_bytes;
    if (buffer_.size() * 8 - begin_ < total) {
      prepare(total - (end_ - begin_));
    }
    return std::nullopt;
  }
  Frame frame{{as_capnp(buffer_.data() + (begin_ + kFrameHeaderBytes) / 8), body_bytes / 8}};
  begin_ += static_cast<std::uint32_t>(kFrameHeaderBytes + body_bytes);
  process_traffic().received(kFrameHeaderBytes + body_bytes);
  return frame;
}

ReadOutcome read_messages(FrameReader& reader, const FrameMessageHandler& on_message) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = reader.limits().traversal_limit_words;
  options.nestingLimit = reader.limits().nesting_limit;
  while (auto frame = reader.next()) {
    try {
      capnp::FlatArrayMessageReader message(
          kj::ArrayPtr<const capnp::word>(frame->body.data(), frame->body.size()), options);
      if (!on_message(message)) return {ReadOutcome::Status::stopped, {}};
    } catch (const kj::Exception& e) {
      return {ReadOutcome::Status::failed, "bad frame: " + std::string(e.getDescription().cStr())};
    }
  }
  if (!reader.error().empty()) return {ReadOutcome::Status::failed, "bad frame: " + reader.error()};
  return {};
}

}  // namespace canopy::transport
