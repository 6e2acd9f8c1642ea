#include "transport/stripe_wire.h"

#include <algorithm>
#include <cstring>

#include "transport/random.h"

namespace canopy::transport {

namespace {

template <typename T>
void put(std::byte* out, std::size_t at, T value) {
  std::memcpy(out + at, &value, sizeof value);  // little-endian hosts (checksum.cpp asserts it)
}

template <typename T>
T get(const std::byte* in, std::size_t at) {
  T value;
  std::memcpy(&value, in + at, sizeof value);
  return value;
}

}  // namespace

std::string_view to_string(HelloStatus status) {
  switch (status) {
    case HelloStatus::accepted: return "accepted";
    case HelloStatus::unknown_link: return "unknown link (the peer has closed it)";
    case HelloStatus::bad_version: return "unsupported version";
    case HelloStatus::malformed: return "malformed hello";
    case HelloStatus::mismatch: return "options differ from the link's";
  }
  return "unknown status";
}

// Path hello, 56 bytes:
//   0  u64 magic "CNPYSTRP"     8  u16 version      10 u16 flags (1 reliable, 2 rejoin)
//  12  u8  checksum kind       13  u8  reserved     14 u16 path index   16 u16 path count
//  18  u16 reserved            20  u32 max fragment bytes               24 u64 link id
//  32  u32 reserved            36  u32 CRC-32C of bytes 0..35           40 16 bytes nonce
void encode_hello(const PathHello& hello, std::byte* out) {
  std::memset(out, 0, kPathHelloBytes);
  put<std::uint64_t>(out, 0, kPathHelloMagic);
  put<std::uint16_t>(out, 8, hello.version);
  put<std::uint16_t>(out, 10, static_cast<std::uint16_t>((hello.reliable ? 1 : 0) | (hello.rejoin ? 2 : 0)));
  put<std::uint8_t>(out, 12, static_cast<std::uint8_t>(hello.checksum));
  put<std::uint16_t>(out, 14, hello.path_index);
  put<std::uint16_t>(out, 16, hello.path_count);
  put<std::uint32_t>(out, 20, hello.max_fragment_bytes);
  put<std::uint64_t>(out, 24, hello.link_id);
  put<std::uint32_t>(out, 36, crc32c(0, out, 36));
  std::memcpy(out + 40, hello.nonce.data(), kPathNonceBytes);
}

bool is_path_hello_magic(const std::byte* first8) { return get<std::uint64_t>(first8, 0) == kPathHelloMagic; }

Result<PathHello> decode_hello(const std::byte* in) {
  if (!is_path_hello_magic(in)) return Error{"not a striped-link path hello (bad magic)"};
  if (get<std::uint32_t>(in, 36) != crc32c(0, in, 36)) return Error{"path hello fails its checksum"};
  PathHello hello;
  hello.version = get<std::uint16_t>(in, 8);
  if (hello.version != kStripeVersion) {
    return Error{"striped-link version " + std::to_string(hello.version) + ", expected " +
                 std::to_string(kStripeVersion)};
  }
  auto flags = get<std::uint16_t>(in, 10);
  hello.reliable = (flags & 1) != 0;
  hello.rejoin = (flags & 2) != 0;
  auto kind = get<std::uint8_t>(in, 12);
  if (kind > static_cast<std::uint8_t>(ChecksumKind::additive)) {
    return Error{"unknown checksum kind " + std::to_string(kind) + " in path hello"};
  }
  hello.checksum = static_cast<ChecksumKind>(kind);
  hello.path_index = get<std::uint16_t>(in, 14);
  hello.path_count = get<std::uint16_t>(in, 16);
  if (hello.path_count == 0 || hello.path_count > kMaxPaths || hello.path_index >= hello.path_count) {
    return Error{"path " + std::to_string(hello.path_index) + " of " + std::to_string(hello.path_count) +
                 " in path hello (at most " + std::to_string(kMaxPaths) + " paths)"};
  }
  hello.max_fragment_bytes = get<std::uint32_t>(in, 20);
  if (hello.max_fragment_bytes < kMinFragmentBytes || hello.max_fragment_bytes > kMaxFragmentBytes) {
    return Error{"fragment size " + std::to_string(hello.max_fragment_bytes) + " in path hello is outside " +
                 std::to_string(kMinFragmentBytes) + ".." + std::to_string(kMaxFragmentBytes)};
  }
  hello.link_id = get<std::uint64_t>(in, 24);
  std::memcpy(hello.nonce.data(), in + 40, kPathNonceBytes);
  return hello;
}

// Hello reply, 64 bytes:
//   0 u64 magic "CNPYSTRA"   8 u16 version   10 u8 status   11 u8 reserved   12 u32 CRC-32C of 0..11
//  16 16 bytes nonce        32 32 bytes tag
void encode_hello_reply(const HelloReply& reply, std::byte* out) {
  std::memset(out, 0, kHelloReplyBytes);
  put<std::uint64_t>(out, 0, kHelloReplyMagic);
  put<std::uint16_t>(out, 8, kStripeVersion);
  put<std::uint8_t>(out, 10, static_cast<std::uint8_t>(reply.status));
  put<std::uint32_t>(out, 12, crc32c(0, out, 12));
  std::memcpy(out + 16, reply.nonce.data(), kPathNonceBytes);
  std::memcpy(out + 32, reply.tag.data(), reply.tag.size());
}

Result<HelloReply> decode_hello_reply(const std::byte* in) {
  if (get<std::uint64_t>(in, 0) != kHelloReplyMagic) return Error{"not a striped-link hello reply (bad magic)"};
  if (get<std::uint32_t>(in, 12) != crc32c(0, in, 12)) return Error{"hello reply fails its checksum"};
  auto status = get<std::uint8_t>(in, 10);
  if (status > static_cast<std::uint8_t>(HelloStatus::mismatch)) {
    return Error{"unknown status " + std::to_string(status) + " in hello reply"};
  }
  HelloReply reply;
  reply.status = static_cast<HelloStatus>(status);
  std::memcpy(reply.nonce.data(), in + 16, kPathNonceBytes);
  std::memcpy(reply.tag.data(), in + 32, reply.tag.size());
  return reply;
}

namespace {

// MAC over a label, the hello and the reply's status and nonce.
PathTag path_tag(const PathMac& mac, std::string_view label, const std::byte* hello, const HelloReply& reply) {
  if (!mac) return {};
  std::array<std::byte, 32 + kPathHelloBytes + 1 + kPathNonceBytes> input{};
  std::size_t at = 0;
  std::memcpy(input.data(), label.data(), std::min<std::size_t>(label.size(), 32));
  at += 32;
  std::memcpy(input.data() + at, hello, kPathHelloBytes);
  at += kPathHelloBytes;
  input[at++] = static_cast<std::byte>(reply.status);
  std::memcpy(input.data() + at, reply.nonce.data(), kPathNonceBytes);
  return mac(input);
}

}  // namespace

PathTag accept_tag(const PathMac& mac, const std::byte* hello, const HelloReply& reply) {
  return path_tag(mac, "canopy-path-accept", hello, reply);
}

PathTag proof_tag(const PathMac& mac, const std::byte* hello, const HelloReply& reply) {
  return path_tag(mac, "canopy-path-proof", hello, reply);
}

bool tags_equal(const PathTag& a, const PathTag& b) {
  unsigned diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned>(a[i] ^ b[i]);
  return diff == 0;
}

std::array<std::byte, kPathNonceBytes> new_path_nonce() {
  std::array<std::byte, kPathNonceBytes> nonce;
  random_fill(nonce.data(), nonce.size());
  return nonce;
}

// Frame header, 40 bytes:
//   0 u8 type   1 u8 flags   2 u16 reserved   4 u32 payload length   8 u64 seq
//  16 u64 lirs  24 u64 lids  32 u32 payload checksum   36 u32 header checksum of 0..35
void encode_header(const FrameHeader& header, ChecksumKind kind, std::byte* out) {
  put<std::uint8_t>(out, 0, static_cast<std::uint8_t>(header.type));
  put<std::uint8_t>(out, 1, header.flags);
  put<std::uint16_t>(out, 2, 0);
  put<std::uint32_t>(out, 4, header.length);
  put<std::uint64_t>(out, 8, header.seq);
  put<std::uint64_t>(out, 16, header.lirs);
  put<std::uint64_t>(out, 24, header.lids);
  put<std::uint32_t>(out, 32, header.payload_checksum);
  put<std::uint32_t>(out, 36, checksum(kind, out, 36));
}

Result<FrameHeader> decode_header(const std::byte* in, ChecksumKind kind) {
  if (kind != ChecksumKind::none && get<std::uint32_t>(in, 36) != checksum(kind, in, 36)) {
    return Error{"frame header fails its checksum"};
  }
  auto type = get<std::uint8_t>(in, 0);
  if (type < static_cast<std::uint8_t>(FrameType::data) || type > static_cast<std::uint8_t>(FrameType::bye)) {
    return Error{"unknown frame type " + std::to_string(type)};
  }
  FrameHeader header;
  header.type = static_cast<FrameType>(type);
  header.flags = get<std::uint8_t>(in, 1);
  header.length = get<std::uint32_t>(in, 4);
  header.seq = get<std::uint64_t>(in, 8);
  header.lirs = get<std::uint64_t>(in, 16);
  header.lids = get<std::uint64_t>(in, 24);
  header.payload_checksum = get<std::uint32_t>(in, 32);
  return header;
}

}  // namespace canopy::transport
