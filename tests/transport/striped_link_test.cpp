// StripedLink over real sockets on loopback: two paths, 127.0.0.1 and 127.0.0.2
// (Linux routes all of 127.0.0.0/8 to lo), one io_context per side on a thread of its
// own. Every test is bounded in time and asserts only on what arrived, never on how
// fast.
#include <capnp/message.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "canopy.capnp.h"
#include "core/loop_thread.h"
#include "eventually.h"
#include "transport/striped_link.h"
#include "transport/tcp_link.h"

using namespace canopy;
using namespace canopy::transport;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

// Message i carries `size_of(i)` bytes, log-uniform from 1 B to 1 MiB, cut from a
// fixed pattern at an offset that depends on i: a message that arrives damaged,
// mixed with another or out of order fails its check.
std::size_t size_of(std::uint64_t i) {
  std::uint64_t z = i + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  double u = static_cast<double>(z >> 11) / static_cast<double>(1ull << 53);
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::exp2(20.0 * u)));
}

const std::vector<capnp::byte>& pattern() {
  static const std::vector<capnp::byte> p = [] {
    std::vector<capnp::byte> v((1u << 20) + 256);
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<capnp::byte>((k * 7) ^ (k >> 8));
    return v;
  }();
  return p;
}

void build_message(capnp::MallocMessageBuilder& b, std::uint64_t i) {
  auto data = b.initRoot<wire::DataPacket>();
  data.setTag(static_cast<std::int32_t>(i));
  auto n = size_of(i);
  auto bytes = data.initValues(1)[0].initBytes(static_cast<unsigned>(n));
  std::memcpy(bytes.begin(), pattern().data() + i % 251, n);
}

// "" if `m` is message `expected`, intact; else what is wrong.
std::string check_message(wire::DataPacket::Reader data, std::uint64_t expected) {
  if (static_cast<std::uint64_t>(data.getTag()) != expected) {
    return "message " + std::to_string(data.getTag()) + " arrived where " + std::to_string(expected) + " was due";
  }
  auto bytes = data.getValues()[0].getBytes();
  if (bytes.size() != size_of(expected)) return "message " + std::to_string(expected) + " has the wrong size";
  if (std::memcmp(bytes.begin(), pattern().data() + expected % 251, bytes.size()) != 0) {
    return "message " + std::to_string(expected) + " is damaged";
  }
  return "";
}

void send_progress(Link& link, std::uint64_t received) {
  capnp::MallocMessageBuilder b;
  b.initRoot<wire::DataPacket>().setTag(static_cast<std::int32_t>(received));
  link.send(b);
}

using canopy::testing::eventually;

// Options for tests: the defaults, with a short link time-out so that failures show
// up quickly, and the links' warnings on stderr, next to the test's own output.
StripedOptions test_options() {
  static const auto log = [] {
    auto l = std::make_shared<spdlog::logger>("striped_link_test", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_level(spdlog::level::warn);
    return l;
  }();
  StripedOptions o;
  o.link_timeout = 3000ms;
  o.hello_timeout = 3000ms;
  o.log = log;
  return o;
}

class StripedLinkTest : public ::testing::Test {
 protected:
  // --- server side: runs on server_ ---
  struct Inflow {
    std::uint64_t received = 0;
    std::string error;            // the first problem seen
    bool closed = false;
    std::string close_reason;
  };
  // --- client side: runs on client_ ---
  struct Outflow {
    std::uint64_t total = 0, next = 0, confirmed = 0;
    std::uint64_t window = 24;    // messages in flight, bounded by the receiver's progress reports
    std::function<void(std::uint64_t)> before_send;  // fault actions
    bool closed = false;
    std::string close_reason;
  };

  void TearDown() override {
    client_.call([&] {
      if (client_link_) client_link_->detach();
    });
    server_.call([&] {
      for (auto& l : server_links_) l->detach();
      acceptor_.reset();
      listeners_.clear();
    });
    std::this_thread::sleep_for(50ms);  // aborted handlers run and let go of the links
    client_.stop();
    server_.stop();
  }

  // Listens on each address (any free port) and hands connections to a
  // StripedAcceptor whose links stream back progress reports.
  void listen(const std::vector<std::string>& addresses, StripedOptions options,
              StripedAcceptor::PlainHandler on_plain = nullptr) {
    server_.call([&] {
      acceptor_ = std::make_unique<StripedAcceptor>(
          server_.io(), options, [this](std::shared_ptr<StripedLink> link) { on_server_link(std::move(link)); },
          std::move(on_plain));
      for (const auto& a : addresses) {
        auto l = std::make_unique<tcp::acceptor>(server_.io(), tcp::endpoint(asio::ip::make_address(a), 0));
        remote_.push_back({"", a, l->local_endpoint().port()});
        accept_next(*l);
        listeners_.push_back(std::move(l));
      }
    });
  }

  void accept_next(tcp::acceptor& l) {
    l.async_accept([this, &l](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec) return;
      if (acceptor_) acceptor_->take(std::move(socket));
      accept_next(l);
    });
  }

  void on_server_link(std::shared_ptr<StripedLink> link) {
    server_links_.push_back(link);
    auto* raw = link.get();
    link->start(
        [this, raw](capnp::MessageReader& message) {
          auto m = message.getRoot<wire::DataPacket>();
          if (!inflow_.error.empty()) return;
          auto problem = check_message(m, inflow_.received);
          if (!problem.empty()) {
            inflow_.error = problem;
            return;
          }
          ++inflow_.received;
          if (inflow_.received % 8 == 0) send_progress(*raw, inflow_.received);
        },
        [this](std::string_view reason) {
          inflow_.closed = true;
          inflow_.close_reason = reason;
        });
  }

  // Paths from the given local addresses to the listening ones, pairwise.
  std::vector<PathEndpoints> paths(const std::vector<std::string>& local) {
    std::vector<PathEndpoints> p;
    for (std::size_t i = 0; i < remote_.size(); ++i) {
      p.push_back({i < local.size() ? local[i] : "", remote_[i].remote_address, remote_[i].remote_port});
    }
    return p;
  }

  // What StripedLink::async_connect hands back, on the client's loop.
  Result<std::shared_ptr<StripedLink>> try_connect(std::vector<PathEndpoints> to, StripedOptions options) {
    std::promise<Result<std::shared_ptr<StripedLink>>> done;
    client_.post([&] {
      StripedLink::async_connect(client_.io(), to, options,
                                 [&](Result<std::shared_ptr<StripedLink>> r) { done.set_value(std::move(r)); });
    });
    return done.get_future().get();
  }

  // Connects and starts the client link (progress reports drive the sending).
  void connect(std::vector<PathEndpoints> to, StripedOptions options) {
    auto result = try_connect(std::move(to), std::move(options));
    ASSERT_TRUE(result) << result.error();
    client_.call([&] {
      client_link_ = *result;
      client_link_->start(
          [this](capnp::MessageReader& message) {
            auto m = message.getRoot<wire::DataPacket>();
            outflow_.confirmed = static_cast<std::uint64_t>(m.getTag());
            pump();
          },
          [this](std::string_view reason) {
            outflow_.closed = true;
            outflow_.close_reason = reason;
          });
    });
  }

  void pump() {
    auto& o = outflow_;
    while (client_link_->is_open() && o.next < o.total && o.next - o.confirmed < o.window) {
      if (o.before_send) o.before_send(o.next);
      capnp::MallocMessageBuilder b;
      build_message(b, o.next);
      client_link_->send(b);
      ++o.next;
    }
  }

  // Sends `total` messages; returns once all arrived, or an error, or `limit` passed.
  void stream(std::uint64_t total, std::chrono::milliseconds limit = 60000ms) {
    client_.call([&] {
      outflow_.total = total;
      pump();
    });
    bool done = eventually([&] { return server_.call([&] { return inflow_.received == total || !inflow_.error.empty(); }); },
                           limit);
    auto [received, error] = server_.call([&] { return std::pair(inflow_.received, inflow_.error); });
    EXPECT_TRUE(done) << "only " << received << " of " << total << " messages arrived in " << limit.count() << " ms";
    EXPECT_EQ(error, "");
    EXPECT_EQ(received, total);
  }

  LinkStats client_stats() { return client_.call([&] { return client_link_->stats(); }); }
  LinkStats server_stats() {
    return server_.call([&] { return server_links_.empty() ? LinkStats{} : server_links_.front()->stats(); });
  }

  core::LoopThread server_, client_;
  std::vector<std::unique_ptr<tcp::acceptor>> listeners_;
  std::unique_ptr<StripedAcceptor> acceptor_;
  std::vector<PathEndpoints> remote_;
  std::vector<std::shared_ptr<StripedLink>> server_links_;
  std::shared_ptr<StripedLink> client_link_;
  Inflow inflow_;
  Outflow outflow_;
  const std::vector<std::string> two_{"127.0.0.1", "127.0.0.2"};
};

}  // namespace

TEST_F(StripedLinkTest, EveryMessageArrivesIntactOnceAndInOrderOverTwoPathsDespiteCorruption) {
  auto options = test_options();
  options.corrupt_fraction = 0.05;  // both directions: the acceptor's links take it too
  listen(two_, options);
  connect(paths(two_), options);
  stream(2000);
  auto c = client_stats(), s = server_stats();
  EXPECT_EQ(s.messages_received, 2000u);
  EXPECT_GT(s.checksum_failures, 0u) << "no corrupt fragment was caught";
  // Every corrupt fragment caught must have been sent again, unless it was itself a
  // duplicate of one delivered already. Added rather than subtracted: the counters are
  // unsigned, and more duplicates than failures (acknowledgements late on a loaded
  // machine) made `failures - duplicates` wrap to a huge number and fail.
  EXPECT_GE(c.retransmissions + s.duplicates, s.checksum_failures)
      << c.retransmissions << " retransmissions, " << s.duplicates << " duplicates";
  EXPECT_GT(c.paths[0].bytes_sent, 0u);
  EXPECT_GT(c.paths[1].bytes_sent, 0u) << "the second path carried nothing";
  EXPECT_GT(c.paths[0].corruptions_injected + c.paths[1].corruptions_injected, 0u);
  EXPECT_EQ(c.live_paths, 2u);
}

TEST_F(StripedLinkTest, AdditiveChecksumAlsoCatchesEveryInjectedCorruption) {
  auto options = test_options();
  options.checksum = ChecksumKind::additive;
  options.corrupt_fraction = 0.05;
  listen(two_, options);
  connect(paths(two_), options);
  stream(400);
  EXPECT_GT(server_stats().checksum_failures, 0u);
}

TEST_F(StripedLinkTest, CorruptFragmentsComeBackByTimeOutAloneWithoutNegativeAcknowledgements) {
  auto options = test_options();
  options.nack = false;
  options.retransmit = Backoff{20ms, 200ms, 2.0};
  options.corrupt_fraction = 0.05;
  listen(two_, options);
  connect(paths(two_), options);
  stream(300);
  auto c = client_stats(), s = server_stats();
  EXPECT_GT(s.checksum_failures, 0u);
  EXPECT_EQ(s.nacks_sent, 0u);
  EXPECT_GT(c.timeouts, 0u);
}

TEST_F(StripedLinkTest, APathDroppedMidStreamLosesNothingAndRejoins) {
  auto options = test_options();
  listen(two_, options);
  connect(paths(two_), options);
  std::vector<std::pair<std::size_t, PathState>> changes;  // on the client loop
  client_.call([&] {
    client_link_->set_path_observer(
        [&](std::size_t path, PathState state, std::string_view) { changes.emplace_back(path, state); });
  });
  client_.call([&] {
    outflow_.before_send = [this](std::uint64_t i) {
      if (i == 300) client_link_->drop_path(0);  // the connecting side's own NIC fails
      if (i == 700) {
        server_.post([this] { server_links_.front()->drop_path(1); });  // the accepting side's
      }
    };
  });
  stream(1000);
  bool rejoined = eventually(
      [&] {
        auto c = client_stats();
        return c.live_paths == 2 && c.paths[0].rejoins >= 1 && c.paths[1].rejoins >= 1;
      },
      10000ms);
  auto c = client_stats();
  EXPECT_TRUE(rejoined) << "path 0 rejoined " << c.paths[0].rejoins << " times, path 1 " << c.paths[1].rejoins
                        << "; " << c.live_paths << " live";
  EXPECT_GE(c.paths[0].failures, 1u);
  EXPECT_GE(c.paths[1].failures, 1u);
  auto seen = client_.call([&] {
    client_link_->set_path_observer(nullptr);  // `changes` goes out of scope
    return changes;
  });
  auto down = std::find(seen.begin(), seen.end(), std::pair<std::size_t, PathState>{0, PathState::down});
  ASSERT_NE(down, seen.end()) << "the observer did not hear path 0 go down";
  EXPECT_NE(std::find(down, seen.end(), std::pair<std::size_t, PathState>{0, PathState::live}), seen.end())
      << "nor come back";
  EXPECT_FALSE(client_.call([&] { return outflow_.closed; }));
  EXPECT_FALSE(server_.call([&] { return inflow_.closed; }));
}

TEST_F(StripedLinkTest, APathThatFallsSilentIsFoundByTimeOutsAndReplaced) {
  auto options = test_options();
  options.retransmit = Backoff{50ms, 400ms, 2.0};
  options.keepalive = 100ms;
  options.path_silence = 600ms;
  listen(two_, options);
  connect(paths(two_), options);
  client_.call([&] {
    outflow_.before_send = [this](std::uint64_t i) {
      if (i == 100) client_link_->blackhole_path(0);  // no error anywhere: only silence
    };
  });
  stream(500);
  bool replaced = eventually(
      [&] {
        auto c = client_stats();
        return c.live_paths == 2 && c.paths[0].failures >= 1 && c.paths[0].rejoins >= 1;
      },
      10000ms);
  auto c = client_stats();
  EXPECT_TRUE(replaced) << "path 0: " << c.paths[0].failures << " failures, " << c.paths[0].rejoins << " rejoins";
  EXPECT_GT(c.timeouts, 0u) << "fragments lost in the black hole were resent by time-out";
  EXPECT_GT(c.paths[0].timeouts, 0u);
  EXPECT_FALSE(client_.call([&] { return outflow_.closed; }));
}

TEST_F(StripedLinkTest, AWriteStuckOnAPathThatStoppedTakingBytesGoesOutElsewhereWithoutWaitingForItsFailure) {
  auto options = test_options();
  options.retransmit = Backoff{50ms, 400ms, 2.0};
  options.path_silence = 60000ms;  // the path does not fail within the test: time-outs alone must help
  listen(two_, options);
  connect(paths(two_), options);
  stream(50);
  // The peer stops reading path 0, as behind a NIC taken down: our socket's buffers
  // fill and a write on it never completes, so its fragments never get a deadline.
  // Enough in flight to fill them.
  server_.call([&] { server_links_.front()->blackhole_path(0); });
  client_.call([&] { outflow_.window = 400; });
  stream(1000, 20000ms);
  auto c = client_stats();
  EXPECT_EQ(c.paths[0].failures, 0u);
  EXPECT_GT(c.paths[0].timeouts, 0u);
  EXPECT_FALSE(client_.call([&] { return outflow_.closed; }));
}

TEST_F(StripedLinkTest, EveryPathLostWithNoWayBackClosesTheLinkOnBothSides) {
  auto options = test_options();
  options.link_timeout = 1000ms;
  listen(two_, options);
  connect(paths(two_), options);
  stream(50);
  // The peer's host vanishes: nothing listens any more and both paths are reset.
  server_.call([&] {
    listeners_.clear();
    server_links_.front()->drop_path(0);
    server_links_.front()->drop_path(1);
  });
  bool closed = eventually([&] { return client_.call([&] { return outflow_.closed; }) &&
                                        server_.call([&] { return inflow_.closed; }); },
                           15000ms);
  ASSERT_TRUE(closed);
  auto client_reason = client_.call([&] { return outflow_.close_reason; });
  auto server_reason = server_.call([&] { return inflow_.close_reason; });
  EXPECT_NE(client_reason.find("paths lost"), std::string::npos) << client_reason;
  EXPECT_NE(server_reason.find("paths lost"), std::string::npos) << server_reason;
}

TEST_F(StripedLinkTest, ALinkThePeerClosedIsNotRejoinedButClosedAtOnce) {
  auto options = test_options();
  options.peer_closed_grace = 5000ms;  // so that the refused rejoin, not the grace, ends it
  listen(two_, options);
  connect(paths(two_), options);
  stream(20);
  server_.call([&] { server_links_.front()->abort("the owner gave up on it"); });
  ASSERT_TRUE(eventually([&] { return client_.call([&] { return outflow_.closed; }); }, 4000ms));
  auto reason = client_.call([&] { return outflow_.close_reason; });
  EXPECT_NE(reason.find("no longer knows this link"), std::string::npos) << reason;
  EXPECT_EQ(server_.call([&] { return inflow_.close_reason; }), "the owner gave up on it");
}

TEST_F(StripedLinkTest, APathThatCannotConnectIsRetriedWhileTheOtherCarriesTheLink) {
  auto options = test_options();
  listen({"127.0.0.1"}, options);
  auto to = paths(two_);
  to.push_back({"127.0.0.2", "127.0.0.2", 1});  // nothing listens on port 1
  connect(to, options);
  stream(200);
  auto c = client_stats();
  EXPECT_EQ(c.live_paths, 1u);
  EXPECT_NE(c.paths[1].state, PathState::live);
  EXPECT_EQ(c.paths[1].bytes_sent, 0u);
  EXPECT_FALSE(client_.call([&] { return outflow_.closed; }));
}

TEST_F(StripedLinkTest, WithReliabilityOffAFailedPathStillLosesNothing) {
  auto options = test_options();
  options.reliable = false;
  listen(two_, options);
  connect(paths(two_), options);
  client_.call([&] {
    outflow_.before_send = [this](std::uint64_t i) {
      if (i == 200) client_link_->drop_path(1);
    };
  });
  stream(500);
  EXPECT_EQ(client_stats().timeouts, 0u);
}

TEST_F(StripedLinkTest, WithReliabilityOffACorruptFragmentClosesTheLink) {
  auto options = test_options();
  options.reliable = false;
  options.corrupt_fraction = 0.5;
  listen(two_, options);
  connect(paths(two_), options);
  client_.call([&] {
    outflow_.total = 100;
    pump();
  });
  ASSERT_TRUE(eventually([&] { return server_.call([&] { return inflow_.closed; }); }, 10000ms));
  auto reason = server_.call([&] { return inflow_.close_reason; });
  EXPECT_NE(reason.find("reliability is off"), std::string::npos) << reason;
  EXPECT_EQ(server_.call([&] { return inflow_.error; }), "") << "corrupt data was delivered";
}

TEST_F(StripedLinkTest, CloseDeliversEverythingQueuedThenTellsThePeer) {
  auto options = test_options();
  listen(two_, options);
  connect(paths(two_), options);
  // Posted observer calls may run after the test's frame: they hold the list.
  auto changes = std::make_shared<std::vector<std::pair<std::size_t, PathState>>>();  // on the client loop
  client_.call([&] {
    client_link_->set_path_observer(
        [changes](std::size_t path, PathState state, std::string_view) { changes->emplace_back(path, state); });
    outflow_.total = 100;
    outflow_.window = 100;  // everything queued at once, then closed at once
    pump();
    client_link_->close("done");
  });
  ASSERT_TRUE(eventually([&] { return server_.call([&] { return inflow_.closed; }); }, 10000ms));
  EXPECT_EQ(server_.call([&] { return inflow_.received; }), 100u);
  EXPECT_EQ(server_.call([&] { return inflow_.close_reason; }), "connection closed by peer");
  ASSERT_TRUE(eventually([&] { return client_.call([&] { return outflow_.closed; }); }, 5000ms));
  EXPECT_EQ(client_.call([&] { return outflow_.close_reason; }), "done");
  // The peer's end of file is how a close ends, not a path failure: no path went
  // down on the way (netns_striped_failover read one as NIC 1 failing again).
  auto c = client_stats();
  for (std::size_t i = 0; i < c.paths.size(); ++i) EXPECT_EQ(c.paths[i].failures, 0u) << "path " << i;
  for (auto [path, state] : client_.call([&] { return *changes; })) {
    EXPECT_NE(state, PathState::down) << "path " << path << " went down while the link closed";
  }
}

TEST_F(StripedLinkTest, BlockingConnectGivesALinkThatWorksOnceTheLoopRuns) {
  auto options = test_options();
  listen(two_, options);
  auto result = client_.call([&] { return StripedLink::connect(client_.io(), paths(two_), options); });
  ASSERT_TRUE(result) << result.error();
  client_.call([&] {
    client_link_ = *result;
    client_link_->start([this](capnp::MessageReader& message) {
      auto m = message.getRoot<wire::DataPacket>();
      outflow_.confirmed = static_cast<std::uint64_t>(m.getTag());
      pump();
    }, [](std::string_view) {});
  });
  stream(100);
  EXPECT_EQ(client_stats().live_paths, 2u);
}

TEST_F(StripedLinkTest, ConnectingToNothingFailsWithEveryPathsReason) {
  auto result = try_connect({{"", "127.0.0.1", 1}, {"", "127.0.0.2", 1}}, test_options());
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().find("path 0"), std::string::npos) << result.error();
  EXPECT_NE(result.error().find("path 1"), std::string::npos) << result.error();
}

// A keyed MAC for path authentication (the node's is HMAC-SHA256 under the
// network's secret, core/auth.h; the transport only needs some function of key and
// input): FNV-1a over key and input, spread over the tag.
PathMac keyed_mac(std::uint64_t key) {
  return [key](std::span<const std::byte> input) {
    PathTag tag{};
    std::uint64_t h = 1469598103934665603ull ^ key;
    for (std::size_t round = 0; round < tag.size() / 8; ++round) {
      for (std::byte b : input) h = (h ^ static_cast<std::uint8_t>(b)) * 1099511628211ull;
      std::memcpy(tag.data() + 8 * round, &h, 8);
    }
    return tag;
  };
}

// docs/security.md: with a key on both sides, the paths of a link are authenticated
// and the link works as without.
TEST_F(StripedLinkTest, PathsAuthenticatedWithTheSameKeyCarryTheLink) {
  auto options = test_options();
  options.path_mac = keyed_mac(42);
  listen(two_, options);
  connect(paths(two_), options);
  stream(200);
  EXPECT_EQ(client_stats().live_paths, 2u);
}

// An acceptor whose key differs (or that has none) cannot prove the secret: the
// connecting side leaves every path, and says why.
TEST_F(StripedLinkTest, APeerThatCannotProveTheKeyIsLeft) {
  auto server_options = test_options(), client_options = test_options();
  server_options.path_mac = keyed_mac(1);
  client_options.path_mac = keyed_mac(2);
  listen(two_, server_options);
  auto result = try_connect(paths(two_), client_options);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().find("without proving the network's secret"), std::string::npos) << result.error();
}

// The striped half of issue 16's hijack: a stranger who learned a live link's id
// (it travels in clear) asks to add a path to it, but cannot prove the key: the path
// is refused, and the link goes on over its own paths.
TEST_F(StripedLinkTest, AStrangerWithALinksIdCannotAddAPathToIt) {
  auto options = test_options();
  options.path_mac = keyed_mac(7);
  listen(two_, options);
  connect(paths(two_), options);
  stream(50);
  const std::uint64_t id = client_.call([&] { return client_link_->link_id(); });
  const auto before = server_stats();
  for (const PathMac& stranger : {PathMac{}, keyed_mac(8)}) {
    asio::io_context io;
    tcp::socket s(io);
    s.connect({asio::ip::make_address("127.0.0.1"), remote_[0].remote_port});
    PathHello hello;
    hello.link_id = id;
    hello.path_index = 1;
    hello.path_count = 2;
    hello.rejoin = true;
    hello.nonce = new_path_nonce();
    std::byte out[kPathHelloBytes], in[kHelloReplyBytes];
    encode_hello(hello, out);
    asio::write(s, asio::buffer(out));
    asio::read(s, asio::buffer(in));
    auto reply = decode_hello_reply(in);
    ASSERT_TRUE(reply) << reply.error();
    ASSERT_EQ(reply->status, HelloStatus::accepted);  // the hello matches the link: only the proof can fail
    const PathTag proof = proof_tag(stranger, out, *reply);
    asio::write(s, asio::buffer(proof));
    // The acceptor closes the connection instead of making it a path.
    boost::system::error_code ec;
    std::array<std::byte, 64> sink;
    s.read_some(asio::buffer(sink), ec);
    EXPECT_TRUE(ec == asio::error::eof || ec == asio::error::connection_reset) << ec.message();
  }
  EXPECT_EQ(server_.call([&] { return acceptor_->open_links(); }), 1u);
  client_.call([&] { outflow_.total = 100; });
  stream(100);
  const auto after = server_stats();
  EXPECT_EQ(after.live_paths, 2u) << "the link lost a path to the stranger";
  for (std::size_t i = 0; i < 2; ++i) {
    // Never replaced: the same connection as before, never rejoined.
    EXPECT_EQ(after.paths[i].remote, before.paths[i].remote) << "path " << i << " was taken by the stranger";
    EXPECT_EQ(after.paths[i].rejoins, 0u) << "path " << i;
  }
}

TEST_F(StripedLinkTest, ARejoinForALinkTheAcceptorDoesNotKnowIsRefused) {
  listen({"127.0.0.1"}, test_options());
  asio::io_context io;
  tcp::socket s(io);
  s.connect({asio::ip::make_address("127.0.0.1"), remote_[0].remote_port});
  PathHello hello;
  hello.rejoin = true;
  hello.link_id = 12345;
  std::byte out[kPathHelloBytes], in[kHelloReplyBytes];
  encode_hello(hello, out);
  asio::write(s, asio::buffer(out));
  asio::read(s, asio::buffer(in));
  auto reply = decode_hello_reply(in);
  ASSERT_TRUE(reply) << reply.error();
  EXPECT_EQ(reply->status, HelloStatus::unknown_link);
  EXPECT_EQ(server_.call([&] { return acceptor_->open_links(); }), 0u);
}

TEST_F(StripedLinkTest, OneListeningPortServesPlainTcpLinksToo) {
  std::shared_ptr<TcpLink> plain_server;
  std::promise<std::int32_t> got;
  listen({"127.0.0.1"}, test_options(), [&](tcp::socket socket) {
    plain_server = TcpLink::create(std::move(socket));
    plain_server->start(
        [&](capnp::MessageReader& m) { got.set_value(m.getRoot<wire::DataPacket>().getTag()); },
        [](std::string_view) {});
  });
  auto plain_client = client_.call([&] {
    boost::system::error_code ec;
    auto socket = connect_tcp(client_.io(), "127.0.0.1", remote_[0].remote_port, ec);
    auto link = TcpLink::create(std::move(socket));
    link->start([](capnp::MessageReader&) {}, [](std::string_view) {});
    send_progress(*link, 42);
    return link;
  });
  auto future = got.get_future();
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(future.get(), 42);
  client_.call([&] { plain_client->detach(); });
  server_.call([&] { plain_server->detach(); });
}

// TcpLink, whose close() promises the same flush: the peer keeps answering while we
// close, so bytes from it are still unread when our side is done. Closing the socket then
// would make the kernel reset the connection and drop what we wrote that had not left
// yet (the receiver here reads slowly at first, so plenty has not).
TEST(TcpLinkClose, DeliversEverythingQueuedEvenWithThePeersRepliesUnread) {
  core::LoopThread server, client;
  constexpr std::uint64_t total = 1000;
  std::uint64_t received = 0;
  std::string error, reason;
  std::promise<void> closed;
  std::shared_ptr<TcpLink> server_link;
  auto listener = server.call([&] {
    auto l = std::make_unique<tcp::acceptor>(server.io(), tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    l->async_accept([&](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec) return;
      server_link = TcpLink::create(std::move(socket));
      server_link->start(
          [&](capnp::MessageReader& message) {
            auto m = message.getRoot<wire::DataPacket>();
            if (received < 50) std::this_thread::sleep_for(2ms);  // let the client's bytes pile up
            auto problem = check_message(m, received);
            if (!problem.empty() && error.empty()) error = problem;
            ++received;
            capnp::MallocMessageBuilder answer;  // a large answer to every message
            answer.initRoot<wire::DataPacket>().initValues(1)[0].initBytes(256u << 10);
            server_link->send(answer);
          },
          [&](std::string_view why) {
            reason = why;
            closed.set_value();
          });
    });
    return l;
  });
  auto port = server.call([&] { return listener->local_endpoint().port(); });
  // Held here, not by its own close handler: a link that owns itself is leaked when
  // the test ends before its close completes (LeakSanitizer saw it on a slow run).
  std::shared_ptr<TcpLink> client_link;
  client.call([&] {
    boost::system::error_code ec;
    client_link = TcpLink::create(connect_tcp(client.io(), "127.0.0.1", port, ec));
    ASSERT_FALSE(ec) << ec.message();
    client_link->start([](capnp::MessageReader&) {}, [](std::string_view) {});
    for (std::uint64_t i = 0; i < total; ++i) {
      capnp::MallocMessageBuilder b;
      build_message(b, i);
      client_link->send(b);
    }
    client_link->close("done");
  });
  auto future = closed.get_future();
  ASSERT_EQ(future.wait_for(30s), std::future_status::ready);
  server.call([&] {
    EXPECT_EQ(error, "");
    EXPECT_EQ(received, total);
    EXPECT_EQ(reason, "connection closed by peer");
    server_link->detach();
    listener.reset();
  });
  client.call([&] { client_link->detach(); });  // it may still linger, waiting for the end of file
}

namespace {

// Back-pressure (docs/protocol.md, "Resource bounds"): a TcpLink whose peer stopped
// reading says so once its queue passes the high mark; the peer, paused, takes
// nothing and counts as heard from; once it reads again, every message arrives in
// order and intact and the sender hears that its queue is back to the low mark.
TEST(TcpLinkBackpressure, APausedReaderHoldsTheSenderBackAndLosesNothing) {
  core::LoopThread server, client;
  constexpr std::size_t kHigh = 4u << 20, kLow = 1u << 20;
  std::uint64_t received = 0;
  std::string error;
  std::shared_ptr<TcpLink> server_link, client_link;
  std::promise<void> accepted;
  auto listener = server.call([&] {
    auto l = std::make_unique<tcp::acceptor>(server.io(), tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    l->async_accept([&](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec) return;
      server_link = TcpLink::create(std::move(socket));
      server_link->pause_reading(true);  // before the first byte is read
      server_link->start(
          [&](capnp::MessageReader& message) {
            auto problem = check_message(message.getRoot<wire::DataPacket>(), received);
            if (!problem.empty() && error.empty()) error = problem;
            ++received;
          },
          [](std::string_view) {});
      accepted.set_value();
    });
    return l;
  });
  auto port = server.call([&] { return listener->local_endpoint().port(); });
  std::vector<bool> changes;  // what the watermark callback said, in order
  std::uint64_t sent = 0;
  client.call([&] {
    boost::system::error_code ec;
    client_link = TcpLink::create(connect_tcp(client.io(), "127.0.0.1", port, ec));
    ASSERT_FALSE(ec) << ec.message();
    client_link->start([](capnp::MessageReader&) {}, [](std::string_view) {});
    client_link->set_watermarks(kHigh, kLow, [&](bool above) { changes.push_back(above); });
  });
  ASSERT_EQ(accepted.get_future().wait_for(10s), std::future_status::ready);
  // Send until the queue passes the high mark: what the kernel's buffers take first
  // is a few MiB on loopback; 400 messages average far more than that.
  for (int batch = 0; batch < 400 && !client.call([&] { return client_link->above_high(); }); ++batch) {
    client.call([&] {
      capnp::MallocMessageBuilder b;
      build_message(b, sent++);
      client_link->send(b);
    });
    std::this_thread::sleep_for(1ms);  // the loop writes what the kernel takes
  }
  ASSERT_TRUE(client.call([&] { return client_link->above_high(); })) << "the queue never passed the high mark";
  EXPECT_GT(client.call([&] { return client_link->queued_bytes(); }), kHigh);
  EXPECT_EQ(client.call([&] { return changes; }), std::vector<bool>{true});
  const auto before = canopy::NodeClock::now();
  std::this_thread::sleep_for(300ms);
  server.call([&] {
    EXPECT_EQ(received, 0u) << "a paused link handed out messages";
    EXPECT_GE(server_link->last_received(), before) << "a paused link's peer must count as heard from";
    server_link->pause_reading(false);
  });
  for (auto until = std::chrono::steady_clock::now() + 30s;
       server.call([&] { return received; }) < sent && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(10ms);
  }
  server.call([&] {
    EXPECT_EQ(error, "");
    EXPECT_EQ(received, sent);
  });
  client.call([&] {
    EXPECT_EQ(changes, (std::vector<bool>{true, false}));
    EXPECT_EQ(client_link->queued_bytes(), 0u);
    client_link->detach();
  });
  server.call([&] {
    server_link->detach();
    listener.reset();
  });
}

}  // namespace
