#include "transport/tcp_link.h"

#include <algorithm>
#include <bit>

namespace canopy::transport {

std::shared_ptr<TcpLink> TcpLink::create(asio::ip::tcp::socket socket, FrameLimits limits) {
  return std::shared_ptr<TcpLink>(new TcpLink(std::move(socket), limits));
}

TcpLink::TcpLink(asio::ip::tcp::socket socket, FrameLimits limits)
    : socket_(std::move(socket)), reader_(limits) {
  boost::system::error_code ec;
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  socket_.non_blocking(true, ec);  // read_now() reads without waiting
  auto ep = socket_.remote_endpoint(ec);
  peer_ = ec ? std::string("<unconnected>") : ep.address().to_string() + ":" + std::to_string(ep.port());
}

void TcpLink::begin() {
  if (!reading_paused_) read_more();
}

void TcpLink::read_more() {
  reading_ = true;
  read_now(/*woken=*/false);
}

// A read that finds nothing waits for the peer with async_wait, not async_read_some:
// a wait needs no buffer, so the reader of a link whose reads are small gives its
// buffer back first (kReleaseWhileWaiting). It costs no more calls than a socket read
// with a buffer: asio's read tries the socket, then waits, then reads, as this does.
void TcpLink::read_now(bool woken) {
  reader_.release_if_read(read_size_);
  auto space = reader_.prepare(read_size_);
  boost::system::error_code ec;
  const std::size_t n = socket_.read_some(asio::buffer(space.data(), space.size()), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) {
    if (read_size_ <= kReleaseWhileWaiting) reader_.release_if_read(0);
    socket_.async_wait(asio::socket_base::wait_read, [self = shared_from_this()](const boost::system::error_code& ec) {
      if (!self->open_) return;
      if (ec) {
        self->reading_ = false;
        self->fail("read failed: " + ec.message());
      } else if (self->reading_paused_) {
        self->reading_ = false;  // pause_reading(false) reads again
      } else {
        self->read_now(/*woken=*/true);
      }
    });
    return;
  }
  // Called from the handler of the read before (through take_messages), it would
  // nest a call for each read while the peer keeps sending: it is posted, as asio
  // posts a read that completes at once.
  if (woken) on_read(ec, n);
  else asio::post(socket_.get_executor(), [self = shared_from_this(), ec, n] { self->on_read(ec, n); });
}

void TcpLink::on_read(const boost::system::error_code& ec, std::size_t n) {
  reading_ = false;
  if (!open_) return;
  if (ec) {
    if (closing_ && ec == asio::error::eof) fail(closing_->reason);  // both sides done
    else fail(ec == asio::error::eof ? "connection closed by peer" : "read failed: " + ec.message());
    return;
  }
  if (n >= read_size_) {
    read_size_ = std::min(2 * read_size_, kMaxRead);
  } else if (n < read_size_ / 4) {
    read_size_ = std::max(std::bit_ceil(2 * n), FrameReader::kMinReadBytes);
  }
  reader_.commit(n);
  note_received();
  take_messages();
}

// The peer's messages go to the handler in turns of at most kReadTurn: one that takes
// long (a slow filter closing wave after wave) lets the loop run its timers and other
// links between two messages, so that heartbeats still go out and a busy node is not
// taken for a hung one (docs/fault-tolerance.md, "Slow filters").
void TcpLink::take_messages() {
  const auto turn_ends = turn_clock() + kReadTurn;
  bool turn_over = false;
  auto outcome = read_messages(reader_, [&](capnp::MessageReader& message) {
    deliver(message);
    if (!open_) return false;  // the handler closed us
    turn_over = turn_clock() >= turn_ends;
    return !turn_over;
  });
  switch (outcome.status) {
    case ReadOutcome::Status::drained:
      if (!reading_paused_ && !reading_) read_more();
      break;
    case ReadOutcome::Status::stopped:
      if (!turn_over || !open_) break;
      resuming_ = true;
      asio::post(socket_.get_executor(), [self = shared_from_this()] {
        self->resuming_ = false;
        if (self->open_) self->take_messages();
      });
      break;
    case ReadOutcome::Status::failed: fail(std::move(outcome.error)); break;
  }
}

void TcpLink::send(capnp::MessageBuilder& message) {
  if (!open_ || closing_) return;
  stream_.append(message);
  note_sent();
  if (!writing_ && !corked_) write_queued();
  check_watermarks();
}

void TcpLink::cork(bool corked) {
  corked_ = corked;
  // A closing link writes everything already (close() ignores the cork).
  if (!corked && open_ && !closing_ && !writing_) write_queued();
}

void TcpLink::pause_reading(bool paused) {
  if (paused == reading_paused_) return;
  reading_paused_ = paused;
  if (paused) return;
  note_received();  // the peer's silence counts from now
  // Started, and neither reading nor going on with messages it read.
  if (open_ && !reading_ && !resuming_ && started()) read_more();
}

void TcpLink::write_queued() {
  if (written_ == stream_.end()) {
    writing_ = false;
    if (closing_) {
      // Our side is done. Closing the socket now, with bytes from the peer still
      // unread, would make the kernel reset the connection and drop whatever we wrote
      // that has not left yet: so the reads go on until the peer closes its side too
      // (it does on our end of file), bounded in case it never does.
      boost::system::error_code ignored;
      socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
      closing_->linger.expires_after(std::chrono::seconds(5));
      closing_->linger.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
        if (!ec) self->fail(self->closing_->reason);
      });
    }
    return;
  }
  writing_ = true;
  // Everything queued, one buffer per block; frames appended meanwhile go after it.
  writing_to_ = stream_.end();
  gather_.clear();
  for (std::uint64_t at = written_; at < writing_to_;) {
    auto part = stream_.contiguous(at, writing_to_ - at);
    gather_.emplace_back(part.data(), part.size());
    at += part.size();
  }
  asio::async_write(socket_, gather_, [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
    if (!self->open_) return;
    if (ec) {
      self->fail("write failed: " + ec.message());
      return;
    }
    self->written_ = self->writing_to_;
    self->stream_.release(self->written_);
    self->write_queued();
    self->check_watermarks();
  });
}

void TcpLink::close(std::string_view reason) {
  if (!open_ || closing_) return;
  closing_ = std::make_unique<Closing>(reason, socket_.get_executor());
  pause_reading(false);  // a close reads on until the peer's end of file
  if (!writing_) write_queued();
}

void TcpLink::fail(std::string reason) {
  if (!open_) return;
  open_ = false;
  if (closing_) closing_->linger.cancel();
  boost::system::error_code ignored;
  socket_.close(ignored);
  // The handler is kept: fail() may run inside it. No handler runs after this.
  deliver_close(reason);
}

void TcpLink::abort(std::string_view reason) {
  if (!open_) return;
  written_ = stream_.end();  // what is queued is never written
  fail(std::string(reason));
}

void TcpLink::abort_with(capnp::MessageBuilder& last, std::string_view reason) {
  if (!open_) return;
  if (!writing_ && written_ == stream_.end()) {
    FrameBuffer frame;
    append_frame(last, frame);
    boost::system::error_code ec;
    socket_.non_blocking(true, ec);
    // A part written alone reaches the peer as a truncated frame, which it refuses
    // like the end of file that follows anyway.
    if (!ec) socket_.write_some(asio::buffer(frame.data(), frame.size() * sizeof(capnp::word)), ec);
  }
  abort(reason);
}

bool TcpLink::input_waiting() const {
  boost::system::error_code ec;
  return open_ && socket_.available(ec) > 0 && !ec;
}

void TcpLink::detach() {
  forget_close();
  open_ = false;
  if (closing_) closing_->linger.cancel();
  boost::system::error_code ignored;
  socket_.close(ignored);
}

asio::ip::tcp::socket connect_tcp(asio::io_context& io, const std::string& address,
                                  std::uint16_t port, boost::system::error_code& ec) {
  asio::ip::tcp::socket socket(io);
  auto addr = asio::ip::make_address(address, ec);
  if (ec) {
    asio::ip::tcp::resolver resolver(io);
    auto results = resolver.resolve(address, std::to_string(port), ec);
    if (ec) return socket;
    asio::connect(socket, results, ec);
    return socket;
  }
  socket.connect({addr, port}, ec);
  return socket;
}

}  // namespace canopy::transport
