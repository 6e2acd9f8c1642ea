// The stripe wire format and reassembly (transport/stripe_wire.h,
// transport/stripe_receive.h): path hellos, hello replies and frame headers of
// every checksum kind, then a sequence of data fragments (sequence number, length,
// checksum and bytes all from the input) fed to a Reassembler that delivers into a
// frame reader, as a striped link's receiving side does.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "transport/frame.h"
#include "transport/stripe_receive.h"
#include "transport/stripe_wire.h"

using namespace canopy::transport;

namespace {

// Reads little-endian integers off the input; zeros once it runs out.
struct Input {
  const std::uint8_t* data;
  std::size_t size;
  template <typename T>
  T take() {
    T v{};
    const std::size_t n = std::min(sizeof(T), size);
    if (n > 0) std::memcpy(&v, data, n);  // data may be null once the input is used up
    data += n;
    size -= n;
    return v;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  if (size >= kPathHelloBytes) (void)decode_hello(bytes);
  if (size >= kHelloReplyBytes) (void)decode_hello_reply(bytes);
  if (size >= kStripeHeaderBytes) {
    for (auto kind : {ChecksumKind::crc32c, ChecksumKind::additive, ChecksumKind::none}) {
      (void)decode_header(bytes, kind);
    }
  }
  Input in{data, size};
  const auto kind = static_cast<ChecksumKind>(in.take<std::uint8_t>() % 3);
  Reassembler reassembler(kind, 1 << 20);
  FrameLimits limits;
  limits.max_frame_bytes = 1 << 20;
  limits.traversal_limit_words = limits.max_frame_bytes / 8;
  FrameReader reader(limits);
  while (in.size > 0) {
    const std::uint64_t seq = in.take<std::uint16_t>();  // small: fragments overlap and fill gaps
    const std::size_t wanted = in.take<std::uint8_t>();
    const std::uint32_t given = in.take<std::uint8_t>() & 1 ? in.take<std::uint32_t>() : 0;
    const std::size_t length = std::min(wanted, in.size);
    std::span<const std::byte> payload(reinterpret_cast<const std::byte*>(in.data), length);
    // With a right checksum half the time, so that fragments get past the check.
    const std::uint32_t sum = given ? given : canopy::transport::checksum(kind, payload.data(), payload.size());
    (void)reassembler.accept(seq, payload, sum, reader);
    in.data += length;
    in.size -= length;
    (void)read_messages(reader, [](auto&) { return true; });
  }
  return 0;
}
