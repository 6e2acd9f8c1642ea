// docs/striping.md's rules for what a striped link does with what it reads, checked
// against a real StripedLink (accepting side, over loopback) by a hand-written peer
// that speaks the wire format byte by byte (issue 21): a duplicate fragment is
// acknowledged at once, on its path; a frame header that fails its checksum resets
// the path, which can then reconnect.
#include <capnp/message.h>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "canopy.capnp.h"
#include "core/loop_thread.h"
#include "eventually.h"
#include "transport/frame.h"
#include "transport/striped_link.h"

using namespace canopy;
using namespace canopy::transport;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

using canopy::testing::eventually;

// One path of a striped link, spoken by hand over a blocking socket whose reads give
// up after `read_limit`.
class RawPath {
 public:
  RawPath(std::uint16_t port, std::chrono::milliseconds read_limit) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{static_cast<time_t>(read_limit.count() / 1000), static_cast<suseconds_t>(read_limit.count() % 1000 * 1000)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
  }
  ~RawPath() { ::close(fd_); }

  bool connected() const { return connected_; }

  bool write(const void* data, std::size_t n) {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
      if (w <= 0) return false;
      p += w;
      n -= static_cast<std::size_t>(w);
    }
    return true;
  }

  // Exactly `n` bytes; false on end of file, an error or the read limit.
  bool read(void* data, std::size_t n) {
    auto* p = static_cast<char*>(data);
    while (n > 0) {
      ssize_t r = ::recv(fd_, p, n, 0);
      if (r <= 0) return false;
      p += r;
      n -= static_cast<std::size_t>(r);
    }
    return true;
  }

  // The path hello, the acceptor's answer, and (accepted) the proof, by `mac` (none:
  // zeros, as for an acceptor without a key).
  std::optional<HelloStatus> hello(const PathHello& h, const PathMac& mac = nullptr) {
    std::array<std::byte, kPathHelloBytes> out;
    encode_hello(h, out.data());
    std::array<std::byte, kHelloReplyBytes> reply;
    if (!write(out.data(), out.size()) || !read(reply.data(), reply.size())) return std::nullopt;
    auto answer = decode_hello_reply(reply.data());
    if (!answer) return std::nullopt;
    if (answer->status == HelloStatus::accepted) {
      const PathTag proof = proof_tag(mac, out.data(), *answer);
      if (!write(proof.data(), proof.size())) return std::nullopt;
    }
    return answer->status;
  }

  // A data fragment: the whole of `stream` from `seq`, with a correct checksum.
  bool send_data(std::uint64_t seq, const std::vector<std::byte>& payload) {
    FrameHeader h;
    h.type = FrameType::data;
    h.length = static_cast<std::uint32_t>(payload.size());
    h.seq = seq;
    h.payload_checksum = checksum(ChecksumKind::crc32c, payload.data(), payload.size());
    std::array<std::byte, kStripeHeaderBytes> header;
    encode_header(h, ChecksumKind::crc32c, header.data());
    return write(header.data(), header.size()) && write(payload.data(), payload.size());
  }

  // The next frame's header (its payload skipped), or nothing by the read limit.
  std::optional<FrameHeader> next_frame() {
    std::array<std::byte, kStripeHeaderBytes> header;
    if (!read(header.data(), header.size())) return std::nullopt;
    auto h = decode_header(header.data(), ChecksumKind::crc32c);
    if (!h) return std::nullopt;
    std::vector<std::byte> payload(h->length);
    if (!read(payload.data(), payload.size())) return std::nullopt;
    return *h;
  }

  // True once the other end has closed or reset the connection (within the limit).
  bool closed_by_peer() {
    char c;
    ssize_t r = ::recv(fd_, &c, 1, 0);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// One framed message (frame.h), as the stream bytes of a link carry it.
std::vector<std::byte> framed_message(std::int32_t tag) {
  capnp::MallocMessageBuilder b;
  b.initRoot<wire::DataPacket>().setTag(tag);
  canopy::transport::FrameBuffer words;
  append_frame(b, words);
  const auto* begin = reinterpret_cast<const std::byte*>(words.data());
  return std::vector<std::byte>(begin, begin + words.size() * sizeof(capnp::word));
}

class StripingClaims : public ::testing::Test {
 protected:
  // The accepting side, with every timer that would send something on its own (the
  // acknowledgement delay, keepalives) or end a path or the link pushed far beyond
  // the test: what it sends, it sends because of what the raw peer did.
  void SetUp() override {
    StripedOptions options;
    options.ack_delay = 30s;
    options.keepalive = 30s;
    options.path_silence = 60s;
    options.link_timeout = 60s;
    options.hello_timeout = 5s;
    server_.call([&] {
      acceptor_ = std::make_unique<StripedAcceptor>(server_.io(), options, [this](std::shared_ptr<StripedLink> link) {
        links_.push_back(link);
        link->start([this](capnp::MessageReader& m) { tags_.push_back(m.getRoot<wire::DataPacket>().getTag()); },
                    [](std::string_view) {});
      });
      listener_ = std::make_unique<tcp::acceptor>(server_.io(), tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
      port_ = listener_->local_endpoint().port();
      accept_next();
    });
  }
  void TearDown() override {
    server_.call([&] {
      for (auto& l : links_) l->abort("test over");
      acceptor_.reset();
      listener_.reset();
    });
    std::this_thread::sleep_for(20ms);  // aborted handlers run and let go of the links
    server_.stop();
  }

  void accept_next() {
    listener_->async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec) return;
      if (acceptor_) acceptor_->take(std::move(socket));
      accept_next();
    });
  }

  static PathHello hello(bool rejoin = false) {
    PathHello h;
    h.link_id = 0x1234567890abcdefull;
    h.rejoin = rejoin;
    return h;
  }

  std::size_t delivered() {
    return server_.call([&] { return tags_.size(); });
  }
  LinkStats stats() {
    return server_.call([&] { return links_.empty() ? LinkStats{} : links_.front()->stats(); });
  }

  core::LoopThread server_;
  std::unique_ptr<tcp::acceptor> listener_;
  std::unique_ptr<StripedAcceptor> acceptor_;
  std::uint16_t port_ = 0;
  std::vector<std::shared_ptr<StripedLink>> links_;
  std::vector<std::int32_t> tags_;
};

TEST_F(StripingClaims, ADuplicateFragmentIsAcknowledgedAtOnceOnItsPath) {
  RawPath path(port_, 5s);
  ASSERT_TRUE(path.connected());
  ASSERT_EQ(path.hello(hello()), HelloStatus::accepted);
  const auto message = framed_message(41);
  ASSERT_TRUE(path.send_data(0, message));
  ASSERT_TRUE(eventually([&] { return delivered() == 1; }, 5s)) << "the fragment was not delivered";
  // Its acknowledgement is 30 s away (ack_delay). The sender resends it, as it would
  // had the acknowledgement been lost: the receiver answers at once.
  ASSERT_TRUE(path.send_data(0, message));
  auto ack = path.next_frame();
  ASSERT_TRUE(ack) << "no acknowledgement within 5 s of the duplicate";
  EXPECT_EQ(ack->type, FrameType::ack);
  EXPECT_EQ(ack->lids, message.size()) << "it acknowledges the whole fragment";
  EXPECT_EQ(ack->lirs, message.size());
  EXPECT_EQ(stats().duplicates, 1u);
  EXPECT_EQ(delivered(), 1u) << "the duplicate is not delivered again";
}

TEST_F(StripingClaims, AHeaderFailingItsChecksumResetsThePathWhichThenRejoins) {
  {
    RawPath path(port_, 5s);
    ASSERT_TRUE(path.connected());
    ASSERT_EQ(path.hello(hello()), HelloStatus::accepted);
    const auto message = framed_message(41);
    FrameHeader h;
    h.type = FrameType::data;
    h.length = static_cast<std::uint32_t>(message.size());
    h.payload_checksum = checksum(ChecksumKind::crc32c, message.data(), message.size());
    std::array<std::byte, kStripeHeaderBytes> header;
    encode_header(h, ChecksumKind::crc32c, header.data());
    header[9] ^= std::byte{0x10};  // a bit of the sequence number, after checksumming
    std::vector<std::byte> frame(header.begin(), header.end());
    frame.insert(frame.end(), message.begin(), message.end());
    ASSERT_TRUE(path.write(frame.data(), frame.size()));  // one write: the reset may follow at once
    EXPECT_TRUE(path.closed_by_peer()) << "the path was not reset within 5 s";
  }
  auto s = stats();
  ASSERT_EQ(s.paths.size(), 1u);
  EXPECT_EQ(s.paths[0].checksum_failures, 1u);
  EXPECT_EQ(s.paths[0].failures, 1u);
  EXPECT_EQ(s.paths[0].state, PathState::down);
  EXPECT_EQ(delivered(), 0u) << "nothing is delivered from a frame whose header is damaged";
  EXPECT_TRUE(server_.call([&] { return links_.front()->is_open(); })) << "a path failed, not the link";

  // The connecting side reconnects the path (a rejoin hello); the link goes on.
  RawPath again(port_, 5s);
  ASSERT_TRUE(again.connected());
  ASSERT_EQ(again.hello(hello(true)), HelloStatus::accepted);
  ASSERT_TRUE(again.send_data(0, framed_message(42)));
  ASSERT_TRUE(eventually([&] { return delivered() == 1; }, 5s)) << "nothing delivered over the rejoined path";
  EXPECT_EQ(server_.call([&] { return tags_.front(); }), 42);
  s = stats();
  EXPECT_EQ(s.paths[0].rejoins, 1u);
  EXPECT_EQ(s.paths[0].state, PathState::live);
  EXPECT_EQ(server_.call([&] { return links_.size(); }), 1u) << "the rejoin joined the same link";
}

}  // namespace
