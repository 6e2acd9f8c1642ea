// TcpLink: a Link over one TCP connection (TCP_NODELAY, coalesced writes).
#pragma once

#include <boost/asio.hpp>

#include <memory>
#include <string_view>
#include <vector>

#include "transport/frame.h"
#include "transport/link.h"
#include "transport/send_stream.h"

namespace canopy::transport {

namespace asio = boost::asio;

class TcpLink final : public Link, public std::enable_shared_from_this<TcpLink> {
 public:
  // Takes a connected socket.
  static std::shared_ptr<TcpLink> create(asio::ip::tcp::socket socket, FrameLimits limits = {});

  void send(capnp::MessageBuilder& message) override;
  // After the flush, shuts our side down and reads on until the peer closes its side
  // (at most 5 s): closing with the peer's bytes unread would reset the connection and
  // drop what has not left yet.
  void close(std::string_view reason) override;
  void detach() override;
  void abort(std::string_view reason) override;
  void abort_with(capnp::MessageBuilder& last, std::string_view reason) override;
  bool is_open() const override { return open_; }
  bool input_waiting() const override;
  const std::string& peer() const override { return peer_; }
  std::size_t queued_bytes() const override { return stream_.end() - written_; }
  // Bytes its buffers hold, sending and receiving, used or not.
  std::size_t buffer_bytes() const { return reader_.buffer_bytes() + stream_.allocated_bytes(); }
  void pause_reading(bool paused) override;
  void cork(bool corked) override;

 private:
  TcpLink(asio::ip::tcp::socket socket, FrameLimits limits);
  void begin() override;
  void read_more();
  void read_now(bool woken);
  void on_read(const boost::system::error_code& ec, std::size_t n);
  void take_messages();
  void write_queued();
  void fail(std::string reason);

  asio::ip::tcp::socket socket_;
  FrameReader reader_;
  // What the next read offers: the reader's buffer while the link waits. Twice as
  // much after a read that filled it (up to kMaxRead); after one that found less
  // than a quarter of it, twice what that read found as a power of two (at least
  // FrameReader::kMinReadBytes). A link that carries little holds little; one that
  // streams reads 64 KB at a time.
  std::size_t read_size_ = FrameReader::kMinReadBytes;
  static constexpr std::size_t kMaxRead = 64 * 1024;
  // A link whose next read is at most this gives its reader's buffer back while it
  // waits for the peer (read_now): a quiet link, a back-end's to its parent or a
  // commnode's to each child, holds no read buffer between messages. One that streams
  // keeps its larger buffer: the peer's next bytes are never long in coming.
  static constexpr std::size_t kReleaseWhileWaiting = 4 * 1024;
  std::string peer_;
  // Frames not yet written, in blocks that never move (send_stream.h): a burst
  // queued while a write is in flight is never copied to grow its buffer, and the
  // blocks are reused rather than given back and faulted in again.
  SendStream stream_{kBlockBytes};
  static constexpr std::size_t kBlockBytes = 256u << 10;
  std::uint64_t written_ = 0;   // bytes of stream_ written
  std::uint64_t writing_to_ = 0;  // the end of the write in flight
  std::vector<asio::const_buffer> gather_;  // its buffers, one per block
  bool writing_ = false;
  bool corked_ = false;
  bool reading_ = false;  // a read is outstanding
  // The handler's turn ran out with messages left in reader_: take_messages() is
  // posted to go on with them after what else the loop has to do (kReadTurn).
  bool resuming_ = false;
  bool open_ = true;
  // Made by close(): finish writing, then shut down. A link that is not closing
  // holds neither (152 bytes a link: docs/scale.md).
  struct Closing {
    explicit Closing(std::string_view why, const asio::any_io_executor& executor) : reason(why), linger(executor) {}
    std::string reason;
    // After our side is shut down: the socket is closed once the peer closes its
    // side, or when this expires.
    asio::steady_timer linger;
  };
  std::unique_ptr<Closing> closing_;
};

// Connects to host:port, returns a connected socket or an error.
asio::ip::tcp::socket connect_tcp(asio::io_context& io, const std::string& address,
                                  std::uint16_t port, boost::system::error_code& ec);

}  // namespace canopy::transport
