// Framing of Cap'n Proto messages on a byte stream.
//
// A frame is an 8-byte little-endian header holding the body length in bytes,
// followed by the body: the message in Cap'n Proto's flat format (segment table,
// then segments). Bodies are a whole number of 8-byte words, so frames packed back
// to back in a word-aligned buffer stay aligned and can be read in place.
#pragma once

#include <capnp/message.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace canopy::transport {

inline constexpr std::size_t kFrameHeaderBytes = 8;
inline constexpr std::size_t kDefaultMaxFrameBytes = 64u << 20;

// One 8-byte word of a frame buffer. capnp::word is not copyable when compiled by
// clang (capnp/common.h), so a std::vector of it cannot grow there; frame buffers
// hold these instead, and are seen as capnp::word only through as_capnp().
struct alignas(8) Word {
  std::uint64_t bits;
};
static_assert(sizeof(Word) == sizeof(capnp::word));

// An allocator whose containers grow without zeroing what they add: resize() leaves
// new words as they are, as `new Word[n]` would. Every word of a frame buffer is
// written before it is read (a frame is copied in whole; a receive buffer is read
// into up to where the socket filled it), so zeroing was work and, worse, touched
// every page: each link's 64 KiB receive buffer was 16 pages of memory faulted in
// and kept, where the socket fills one or two (docs/benchmarks.md, "A back-end's
// start").
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* at) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(at)) U;
  }
  template <class U, class... Args>
  void construct(U* at, Args&&... args) {
    ::new (static_cast<void*>(at)) U(std::forward<Args>(args)...);
  }
};
using FrameBuffer = std::vector<Word, UninitializedAllocator<Word>>;

inline const capnp::word* as_capnp(const Word* w) { return reinterpret_cast<const capnp::word*>(w); }

// Limits applied to every frame read from a peer. 12 bytes, held by every link's
// reader: a frame is at most kMaxFrameLimit (FrameReader refuses more), so its
// offsets and these fit 32 bits (24 bytes until issue 47 counted them).
inline constexpr std::size_t kMaxFrameLimit = std::size_t{1} << 30;
struct FrameLimits {
  std::uint32_t max_frame_bytes = static_cast<std::uint32_t>(kDefaultMaxFrameBytes);
  std::uint32_t traversal_limit_words = static_cast<std::uint32_t>(kDefaultMaxFrameBytes / 8);
  std::int32_t nesting_limit = 64;
};

// Appends one frame holding `message` to `out`.
void append_frame(capnp::MessageBuilder& message, FrameBuffer& out);
// The same in two steps, for a destination that is not a FrameBuffer: the words a
// frame of `segments` takes, then the frame written to `out` (that many words).
std::size_t frame_words(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments);
void write_frame(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments, std::size_t words, Word* out);

// Splits a word-aligned receive buffer into frames. Call feed() after bytes arrive,
// then next() until it returns nothing.
class FrameReader {
 public:
  // std::invalid_argument if limits.max_frame_bytes is above kMaxFrameLimit.
  explicit FrameReader(FrameLimits limits = {});

  // Space to receive into; at least `min_free` bytes. A buffer that grew past
  // kKeepBytes for a large frame is given back once that frame has been read (the
  // topology at launch: 60 bytes a process of the tree, kept for ever before).
  std::span<std::byte> prepare(std::size_t min_free = 64 * 1024);
  static constexpr std::size_t kKeepBytes = 64 * 1024;
  // The link is about to wait for its peer: if every byte received has been read
  // and the buffer holds more than `keep` bytes, it goes back. A process of the tree
  // waits on each of its links most of the time; each held 64 KB for ever before.
  void release_if_read(std::size_t keep = 0);
  // The least a link's read offers, and so what a quiet link's reader holds.
  static constexpr std::size_t kMinReadBytes = 256;
  // Bytes the buffer holds now, used or not.
  std::size_t buffer_bytes() const { return buffer_.capacity() * sizeof(Word); }
  void commit(std::size_t bytes_received);

  struct Frame {
    std::span<const capnp::word> body;
  };
  // The next complete frame, valid until the following call. Sets error() and
  // returns nothing if the header announces a frame over the limit or of a length
  // that is not a multiple of 8.
  std::optional<Frame> next();
  const std::string& error() const { return error_ ? *error_ : kNoError; }
  const FrameLimits& limits() const { return limits_; }

 private:
  FrameBuffer buffer_;
  FrameLimits limits_;
  // Bytes already consumed, and received: at most a frame (kMaxFrameLimit) and a read
  // beyond what was consumed.
  std::uint32_t begin_ = 0;
  std::uint32_t end_ = 0;
  // Made only for a bad frame: a process has a reader per link, and a string kept
  // empty was 32 bytes of each (issue 47).
  std::unique_ptr<std::string> error_;
  static inline const std::string kNoError;
};

// What read_messages() did with the frames a FrameReader held.
struct ReadOutcome {
  enum class Status : std::uint8_t {
    drained,  // every complete frame was handled; read more bytes
    stopped,  // the handler returned false (its link closed): read no more
    failed,   // a bad frame: `error` is "bad frame: <why>"; close the link with it
  };
  Status status = Status::drained;
  std::string error;
};

// Called with each message, valid only during the call; returns whether to go on.
using FrameMessageHandler = std::function<bool(capnp::MessageReader& message)>;

// The one decoding loop of every link: for each complete frame in `reader`, a
// Cap'n Proto message read in place under the reader's limits (traversal, nesting),
// handed to `on_message`. A kj::Exception — from a malformed segment table, or
// thrown by the handler while reading a malformed message — and a bad frame header
// (FrameReader::error()) end it with `failed`.
ReadOutcome read_messages(FrameReader& reader, const FrameMessageHandler& on_message);

}  // namespace canopy::transport
