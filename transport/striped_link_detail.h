// Internal to the striped link's implementation (striped_link.cpp: set-up helpers,
// paths, the Link interface, receiving; striped_link_connect.cpp: connecting;
// striped_link_send.cpp: sending and periodic work; striped_acceptor.cpp: the
// accepting side). Not installed; nothing else includes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/striped_link.h"

namespace canopy::transport {

using Clock = std::chrono::steady_clock;
using boost::system::error_code;
using tcp = asio::ip::tcp;

namespace striped_detail {

// The logger of links and acceptors given none: level off, so nothing is even formatted.
StripedOptions with_logger(StripedOptions options);
std::string endpoint_text(const tcp::endpoint& ep);
std::uint64_t random_link_id();
long long ms(std::chrono::milliseconds d);
// No Nagle, and TCP_USER_TIMEOUT at `silence`.
void tune(tcp::socket& socket, std::chrono::milliseconds silence);
std::size_t receive_buffer_bytes(const StripedOptions& options);
// What is wrong with these paths and options for a link ("" if nothing).
std::string validate(const std::vector<PathEndpoints>& paths, const StripedOptions& options);

}  // namespace striped_detail

using namespace striped_detail;

// One TCP connection of a path. Replaced when the path reconnects; the handlers of
// its operations hold it, so its buffers outlive them.
struct StripedLink::Connection {
  Connection(tcp::socket s, std::size_t receive_bytes) : socket(std::move(s)), rbuf(receive_bytes) {}
  tcp::socket socket;
  // Receiving: frames are parsed from rbuf[rbegin, rend).
  std::vector<std::byte> rbuf;
  std::size_t rbegin = 0, rend = 0;
  // Sending: one write at a time. Headers and control payloads are in `headers`;
  // data payloads are read in place from the send stream.
  bool writing = false;
  std::vector<std::byte> headers;
  struct Segment {
    std::size_t offset, size;        // in `headers`
    const std::byte* payload;        // data frames: their payload
    std::size_t payload_size;
  };
  std::vector<Segment> segments;
  std::vector<asio::const_buffer> buffers;
  std::vector<std::uint64_t> fragments;  // sequence numbers of the data frames in the write
  std::vector<std::unique_ptr<std::byte[]>> corrupted;  // fault injection: corrupted copies
  std::optional<std::uint64_t> low;      // its entry in writes_in_flight_
  bool blackhole = false;                // fault injection: drops writes, reads nothing
};

struct StripedLink::Path {
  std::size_t index = 0;
  PathEndpoints endpoints;       // connecting side
  PathState state = PathState::down;
  std::shared_ptr<Connection> conn;
  std::string last_error;
  bool peer_closed = false;      // went down by end of file, reset or refusal from the peer's end
  bool ever_live = false;
  std::uint32_t reconnect_attempts = 0;
  std::unique_ptr<asio::steady_timer> reconnect_timer;
  Clock::time_point last_received{}, last_sent{};
  // Control frames for this path's next write.
  bool want_ack = false;
  bool want_bye = false;
  std::vector<SeqRange> nacks;
  std::uint64_t acked_since_tick = 0;
  PathStats stats;
};

}  // namespace canopy::transport
