// Wire format of striped links (docs/striping.md has the byte tables).
//
// Each path is one TCP connection. The connecting side opens it with a path hello
// (40 bytes) and the accepting side answers with a hello reply (16 bytes). From then
// on both directions carry frames: a 40-byte header, then `length` payload bytes.
// All integers are little-endian. Pure encoding and decoding, no I/O.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "canopy/result.h"
#include "transport/checksum.h"

namespace canopy::transport {

// Version 2 authenticates every path (docs/security.md): the hello carries a nonce
// of the connecting side, the reply a nonce and a tag of the accepting side, and the
// connecting side then sends a proof before anything else.
inline constexpr std::uint16_t kStripeVersion = 2;
inline constexpr std::size_t kPathHelloBytes = 56;
inline constexpr std::size_t kHelloReplyBytes = 64;
inline constexpr std::size_t kPathProofBytes = 32;
inline constexpr std::size_t kPathNonceBytes = 16;
inline constexpr std::size_t kStripeHeaderBytes = 40;
// A path hello starts with these 8 bytes, "CNPYSTRP". Read as the 8-byte length
// header of a plain TcpLink frame it is far over any frame limit, so an acceptor can
// tell the two kinds of connection apart from their first 8 bytes.
inline constexpr std::uint64_t kPathHelloMagic = 0x5052545359504E43ull;
inline constexpr std::uint64_t kHelloReplyMagic = 0x4152545359504E43ull;  // "CNPYSTRA"
inline constexpr std::size_t kMaxPaths = 64;
inline constexpr std::size_t kMinFragmentBytes = 512;
inline constexpr std::size_t kMaxFragmentBytes = 16u << 20;
// Acknowledgement and negative acknowledgement payloads: ranges of 16 bytes each.
inline constexpr std::size_t kMaxControlPayloadBytes = 4096;

// First message on every path, from the connecting side.
struct PathHello {
  std::uint16_t version = kStripeVersion;
  bool reliable = true;
  bool rejoin = false;           // the link exists already; never create it from this path
  ChecksumKind checksum = ChecksumKind::crc32c;
  std::uint16_t path_index = 0;
  std::uint16_t path_count = 1;
  std::uint32_t max_fragment_bytes = 64 * 1024;
  std::uint64_t link_id = 0;     // random, chosen by the connecting side
  std::array<std::byte, kPathNonceBytes> nonce{};  // random, new for every path hello
};

enum class HelloStatus : std::uint8_t {
  accepted = 0,
  unknown_link = 1,     // a rejoin for a link the acceptor no longer has
  bad_version = 2,
  malformed = 3,
  mismatch = 4,         // options or path count differ from the link's
};
std::string_view to_string(HelloStatus status);

void encode_hello(const PathHello& hello, std::byte* out);  // kPathHelloBytes
// Checks magic, version, checksum and ranges; the error says which failed.
Result<PathHello> decode_hello(const std::byte* in);
bool is_path_hello_magic(const std::byte* first8);

using PathTag = std::array<std::byte, 32>;

// The accepting side's answer: a status, its nonce, and its tag over the hello and
// the nonce (zeros if it has no key or refuses the path).
struct HelloReply {
  HelloStatus status = HelloStatus::accepted;
  std::array<std::byte, kPathNonceBytes> nonce{};
  PathTag tag{};
};
void encode_hello_reply(const HelloReply& reply, std::byte* out);  // kHelloReplyBytes
Result<HelloReply> decode_hello_reply(const std::byte* in);

// Path authentication. A PathMac is a keyed MAC (HMAC-SHA256 under the network's
// secret, given by the node: core/auth.h); without one, every tag is zeros, and a
// side without one accepts only zeros: a striped link authenticates its paths
// exactly when both sides hold the key. The accepting side tags the hello (with the
// connecting side's nonce) and its own nonce; the connecting side proves itself over
// the hello and the accepting side's nonce. Fresh nonces on both sides: a captured
// hello, reply or proof is useless on another connection.
using PathMac = std::function<PathTag(std::span<const std::byte>)>;
PathTag accept_tag(const PathMac& mac, const std::byte* hello, const HelloReply& reply);  // hello: kPathHelloBytes
PathTag proof_tag(const PathMac& mac, const std::byte* hello, const HelloReply& reply);
bool tags_equal(const PathTag& a, const PathTag& b);  // in constant time
std::array<std::byte, kPathNonceBytes> new_path_nonce();

enum class FrameType : std::uint8_t {
  data = 1,  // payload: bytes [seq, seq + length) of the stream
  ack = 2,   // payload: up to 16 received ranges above lirs (begin, end: u64 each)
  nack = 3,  // payload: ranges whose fragment failed its checksum and was dropped
  bye = 4,   // orderly close: the sender has had all its data acknowledged
};

// Every header carries the sender's receive state (lirs, lids), so any frame
// acknowledges.
struct FrameHeader {
  FrameType type = FrameType::data;
  std::uint8_t flags = 0;
  std::uint32_t length = 0;           // payload bytes
  std::uint64_t seq = 0;              // data: sequence number of the first payload byte
  std::uint64_t lirs = 0;             // one past the largest in-order received sequence number
  std::uint64_t lids = 0;             // one past the largest in-order delivered sequence number
  std::uint32_t payload_checksum = 0; // of the payload, with the link's checksum kind
};

// The header checksum (bytes 0..35, with the link's kind; 0 for none) goes in the
// last 4 bytes.
void encode_header(const FrameHeader& header, ChecksumKind kind, std::byte* out);
// Fails on a header checksum mismatch or an unknown type.
Result<FrameHeader> decode_header(const std::byte* in, ChecksumKind kind);

}  // namespace canopy::transport
