// docs/security.md end to end (issue 16): a hand-written hostile client against a
// live tree, with and without the network's secret, trying to take over the rank of
// a live back-end or to replay a hello; a fake parent that cannot prove the secret;
// and where the secret travels.
#include <gtest/gtest.h>

#include <poll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <array>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <optional>
#include <sstream>
#include <thread>

#include "far_host.h"
#include "core/attach_file.h"
#include <capnp/serialize.h>

#include "canopy.capnp.h"
#include "canopy/backend.h"
#include "canopy/frontend.h"
#include "core/auth.h"
#include "core/codec.h"
#include "core/loop_thread.h"
#include "core/service.h"
#include "demo_protocol.h"
#include "transport/tcp_link.h"
#include "tree_fixture.h"

using namespace std::chrono_literals;
using canopy::Rank;
using canopy::testing::ProcessGuard;
using canopy::testing::TreeTest;
using Body = canopy::wire::Message::Body;

namespace {

constexpr Rank FE = canopy::kFirstInternalRank;  // the front-end; FE + 1, FE + 2 the commnodes

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// What a hello says, with its nonce.
struct HelloSpec {
  Rank rank = 0;
  canopy::wire::Role role = canopy::wire::Role::BACKEND;
  std::uint32_t incarnation = 0;
  bool adopt = false;
  std::uint64_t network_id = 0;
  canopy::core::Nonce nonce = canopy::core::new_nonce();
  bool standby = false;
  std::uint32_t protocol_version = canopy::wire::PROTOCOL_VERSION;
  // As an orphan's where commnodes hold parts of the tree: its ancestors, root first,
  // and (`subtree`) its subtree, the back-end alone on localhost.
  std::vector<Rank> ancestors;
  bool subtree = false;
};

// The hello of `spec` as its own message (root: wire::Hello).
std::unique_ptr<capnp::MallocMessageBuilder> hello_of(const HelloSpec& spec) {
  auto message = std::make_unique<capnp::MallocMessageBuilder>();
  auto h = message->initRoot<canopy::wire::Hello>();
  h.setProtocolVersion(spec.protocol_version);
  h.setNetworkId(spec.network_id);
  h.setRole(spec.role);
  h.setRank(spec.rank);
  h.setIncarnation(spec.incarnation);
  h.setPid(getpid());
  h.setAdopt(spec.adopt);
  h.setNonce(canopy::core::as_data(spec.nonce));
  h.setStandby(spec.standby);
  auto ancestors = h.initAncestors(static_cast<unsigned>(spec.ancestors.size()));
  for (unsigned i = 0; i < spec.ancestors.size(); ++i) ancestors.set(i, spec.ancestors[i]);
  if (spec.subtree) {
    canopy::TopologyNode alone{.rank = spec.rank, .role = canopy::Role::backend};
    auto subtree = canopy::Topology::make_subtree({alone}, {}, "hostile");
    EXPECT_TRUE(subtree) << subtree.error();
    if (subtree) canopy::core::encode_topology(*subtree, h.initSubtree());
  }
  return message;
}

// The proof of the hello of `spec` over a challenge's nonce, under `secret`.
canopy::core::Proof proof_of(const HelloSpec& spec, const std::vector<std::uint8_t>& challenge,
                             const canopy::core::Secret& secret) {
  auto hello = hello_of(spec);
  return canopy::core::hello_proof(secret, canopy::core::as_data(challenge),
                                   hello->getRoot<canopy::wire::Hello>().asReader());
}

// A client written by hand, speaking the protocol directly over its own socket, on
// a loop thread of its own: what an attacker who can reach a port would run.
class HostileClient {
 public:
  struct Heard {
    std::optional<std::string> shutdown;  // the reason of a Shutdown
    bool adopted = false;                 // an Adopted (the adoption was granted)
    bool topology = false;                // a Topology (accepted as a child)
    std::optional<std::string> closed;    // the link ended, and why
  };
  struct Challenge {
    std::vector<std::uint8_t> nonce;
    std::vector<std::uint8_t> proof;
    Rank sender = 0;
  };

  HostileClient(const std::string& address, std::uint16_t port) {
    loop_.call([&] {
      boost::system::error_code ec;
      auto socket = canopy::transport::connect_tcp(loop_.io(), address, port, ec);
      if (ec) {
        error_ = ec.message();
        return;
      }
      link_ = canopy::transport::TcpLink::create(std::move(socket));
      link_->start(
          [this](capnp::MessageReader& message) {
            auto msg = message.getRoot<canopy::wire::Message>();
            auto body = msg.getBody();
            std::lock_guard lock(mutex_);
            switch (body.which()) {
              case Body::CHALLENGE: {
                auto c = body.getChallenge();
                challenge_ = Challenge{{c.getNonce().begin(), c.getNonce().end()},
                                       {c.getProof().begin(), c.getProof().end()},
                                       msg.getSenderRank()};
                break;
              }
              case Body::SHUTDOWN: heard_.shutdown = body.getShutdown().getReason(); break;
              case Body::ADOPTED: heard_.adopted = true; break;
              case Body::TOPOLOGY: heard_.topology = true; break;
              default: break;
            }
            changed_.notify_all();
          },
          [this](std::string_view reason) {
            std::lock_guard lock(mutex_);
            heard_.closed = std::string(reason);
            changed_.notify_all();
          });
    });
  }

  ~HostileClient() {
    loop_.call([&] {
      if (link_) link_->abort("test over");
    });
    loop_.stop();
  }

  const std::string& error() const { return error_; }

  void say_hello(const HelloSpec& spec) {
    auto hello = hello_of(spec);
    loop_.call([&] {
      canopy::core::Message message(canopy::core::NodeIdentity{.rank = spec.rank});
      message.body().setHello(hello->getRoot<canopy::wire::Hello>().asReader());
      link_->send(message.builder());
    });
  }

  // The challenge this connection got (none within 10 s: an empty nonce).
  Challenge challenge() {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, 10s, [&] { return challenge_.has_value() || heard_.closed; });
    return challenge_.value_or(Challenge{});
  }

  // The whole handshake as `spec`'s rank, proved under `secret`: false if no
  // challenge came.
  bool handshake(const HelloSpec& spec, const canopy::core::Secret& secret) {
    say_hello(spec);
    const auto c = challenge();
    if (c.nonce.size() != canopy::core::kNonceBytes) return false;
    send_proof(proof_of(spec, c.nonce, secret));
    return true;
  }

  void send_proof(const canopy::core::Proof& proof) {
    loop_.call([&] {
      canopy::core::Message message(canopy::core::NodeIdentity{});
      message.body().initHelloProof().setProof(canopy::core::as_data(proof));
      link_->send(message.builder());
    });
  }

  // Waits up to `limit` for `done(heard)`; returns what was heard by then.
  Heard wait(std::function<bool(const Heard&)> done, std::chrono::milliseconds limit = 10s) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, limit, [&] { return done(heard_); });
    return heard_;
  }

 private:
  canopy::core::LoopThread loop_;
  std::shared_ptr<canopy::transport::Link> link_;
  std::string error_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<Challenge> challenge_;
  Heard heard_;
};

class Security : public TreeTest {
 protected:
  // b:2x2 in attach mode, its back-ends in this process: 0 and 1 under FE + 1, 2 and
  // 3 under FE + 2. Every process logs to the test's directory.
  void SetUp() override {
    TreeTest::SetUp();
    if (HasFatalFailure()) return;
    dir_ = test_dir("canopy-security");
    setenv("CANOPY_LOG_DIR", dir_.c_str(), 1);
    file_ = (dir_ / "attach").string();
    auto topology = canopy::generate_topology("b:2x2");
    ASSERT_TRUE(topology) << topology.error();
    canopy::LaunchOptions options;
    options.topology = *topology;
    options.attach_file = file_;
    options.fault_tolerance.heartbeat = 100ms;
    options.fault_tolerance.suspect = 500ms;
    options.fault_tolerance.lost = 2000ms;
    options.fault_tolerance.standby_links = standby_links_;
    auto network = canopy::Network::launch(std::move(options));
    ASSERT_TRUE(network) << network.error();
    network_ = std::move(*network);
    auto parsed = canopy::attach::read_attach_file(file_);
    ASSERT_TRUE(parsed) << parsed.error();
    attach_ = *parsed;
    for (Rank r = 0; r < 4; ++r) {
      auto backend = canopy::Backend::attach(file_, r);
      ASSERT_TRUE(backend) << backend.error();
      backends_.push_back(std::move(*backend));
    }
    ASSERT_TRUE(network_->wait_for_backends(10s));
  }

  void TearDown() override {
    backends_.clear();
    TreeTest::TearDown();
    unsetenv("CANOPY_LOG_DIR");
  }

  // Commnode FE + 2's endpoint (the parent of back-ends 2 and 3).
  const canopy::attach::BackendEntry& second_commnode() const { return *attach_.find(2); }

  // Rank `rank` as the front-end's live tree has it.
  canopy::NodeStatus status_of(Rank rank) const {
    for (const auto& n : network_->status()) {
      if (n.rank == rank) return n;
    }
    ADD_FAILURE() << "rank " << rank << " is not in the live tree";
    return {};
  }

  // Back-end 0 still belongs where it was launched, under its first incarnation.
  void expect_backend_0_untouched() {
    auto zero = status_of(0);
    EXPECT_TRUE(zero.alive);
    EXPECT_EQ(zero.parent, std::optional<Rank>(FE + 1));
    EXPECT_EQ(zero.incarnation, 0u);
    for (const auto& n : network_->status()) EXPECT_TRUE(n.alive) << "rank " << n.rank << " reported lost";
  }

  std::filesystem::path dir_;
  std::string file_;
  canopy::attach::AttachFile attach_;
  std::vector<std::unique_ptr<canopy::Backend>> backends_;
  bool standby_links_ = false;
};

// The same tree with standby links (docs/fault-tolerance.md).
class SecurityWithStandbyLinks : public Security {
 protected:
  SecurityWithStandbyLinks() { standby_links_ = true; }
};

// The finding of issue 16: knowing the network id was enough to be adopted under a
// live back-end's rank. Without the secret, the hello's proof is refused, the
// stranger is told only that authentication failed, and a stranger that keeps
// trying is logged once, not once per try.
TEST_F(Security, AHijackWithoutTheSecretIsRefusedAndLoggedOnce) {
  const canopy::core::Secret wrong = canopy::core::new_secret();
  constexpr int kTries = 20;
  for (int i = 0; i < kTries; ++i) {
    HostileClient client(second_commnode().address, second_commnode().port);
    ASSERT_EQ(client.error(), "");
    const HelloSpec spec{.rank = 0, .incarnation = 7u + i, .adopt = true, .network_id = attach_.network_id};
    ASSERT_TRUE(client.handshake(spec, wrong)) << "try " << i << ": no challenge";
    auto heard = client.wait([](const auto& h) { return h.closed.has_value(); });
    ASSERT_TRUE(heard.closed) << "try " << i << ": the commnode did not close the connection";
    EXPECT_FALSE(heard.adopted) << "try " << i << ": a stranger was adopted under rank 0";
    ASSERT_TRUE(heard.shutdown) << "try " << i << ": no reason given";
    EXPECT_NE(heard.shutdown->find("authentication failed"), std::string::npos) << *heard.shutdown;
  }
  expect_backend_0_untouched();
  const std::string log = slurp(dir_ / ("commnode-" + std::to_string(FE + 2) + ".log"));
  const auto logged = count_of(log, "authentication failed");
  EXPECT_GE(logged, 1u) << "the refusal was not logged";
  EXPECT_LE(logged, 2u) << "the refusal was logged " << logged << " times for " << kTries
                        << " tries from one address: not rate-limited";
}

// The acceptor proves the secret first, over the hello's nonce: a client that knows
// the secret can check it, and a stranger learns nothing it could use (the proof
// covers a nonce of the acceptor's, new for every connection).
TEST_F(Security, TheChallengeProvesTheAcceptorKnowsTheSecret) {
  HostileClient client(second_commnode().address, second_commnode().port);
  ASSERT_EQ(client.error(), "");
  const HelloSpec spec{.rank = 2, .network_id = attach_.network_id};
  client.say_hello(spec);
  const auto challenge = client.challenge();
  ASSERT_EQ(challenge.nonce.size(), canopy::core::kNonceBytes);
  EXPECT_EQ(challenge.sender, FE + 2);
  const auto expected = canopy::core::challenge_proof(attach_.secret, canopy::core::as_data(spec.nonce),
                                                      canopy::core::as_data(challenge.nonce), FE + 2);
  EXPECT_TRUE(canopy::core::proof_matches(expected, canopy::core::as_data(challenge.proof)))
      << "the challenge's proof is not the acceptor's proof of the secret";
}

// A proof captured on one connection is worthless on another: it covers the first
// connection's challenge. The same proof is accepted where it was made, which shows
// it was a valid one.
TEST_F(Security, ACapturedHelloCannotBeReplayed) {
  const auto& entry = *attach_.find(0);  // FE + 1, back-end 0's parent
  const HelloSpec spec{.rank = 0, .network_id = attach_.network_id};
  HostileClient first(entry.address, entry.port);
  ASSERT_EQ(first.error(), "");
  first.say_hello(spec);
  const auto first_challenge = first.challenge();
  ASSERT_EQ(first_challenge.nonce.size(), canopy::core::kNonceBytes);
  const auto captured = proof_of(spec, first_challenge.nonce, attach_.secret);

  HostileClient second(entry.address, entry.port);
  ASSERT_EQ(second.error(), "");
  second.say_hello(spec);  // the same hello, nonce and all
  const auto second_challenge = second.challenge();
  ASSERT_EQ(second_challenge.nonce.size(), canopy::core::kNonceBytes);
  ASSERT_NE(second_challenge.nonce, first_challenge.nonce) << "two connections got the same challenge";
  second.send_proof(captured);
  auto replayed = second.wait([](const auto& h) { return h.closed.has_value(); });
  ASSERT_TRUE(replayed.closed);
  ASSERT_TRUE(replayed.shutdown) << "a proof replayed on another connection was not refused as such";
  EXPECT_NE(replayed.shutdown->find("authentication failed"), std::string::npos) << *replayed.shutdown;

  // Where it was made, the proof passes; the hello is then refused for what it asks
  // (rank 0 is connected), without the authentication failure.
  first.send_proof(captured);
  auto original = first.wait([](const auto& h) { return h.closed.has_value(); });
  ASSERT_TRUE(original.closed);
  EXPECT_FALSE(original.shutdown) << "the proof was refused where it was made: " << *original.shutdown;
  const std::string log = slurp(dir_ / ("commnode-" + std::to_string(FE + 1) + ".log"));
  EXPECT_NE(log.find("rank 0 is already connected or gone"), std::string::npos) << log;
  expect_backend_0_untouched();
}

// Even with the secret, a live back-end's rank cannot be taken over: an adoption
// request for rank 0, whose parent FE + 1 and link to it are alive, is held for
// news of a failure that never comes, then refused. FE + 2 does not hold back-end 0
// (commnodes hold their parts of the tree: docs/scale.md): it judges the request by
// the parent it names, FE + 1, which it holds; a request that names no ancestor it
// holds is refused at once.
TEST_F(Security, ALiveBackendsRankCannotBeTakenOverEvenWithTheSecret) {
  {
    HostileClient bare(second_commnode().address, second_commnode().port);
    ASSERT_EQ(bare.error(), "");
    ASSERT_TRUE(bare.handshake({.rank = 0, .incarnation = 9, .adopt = true, .network_id = attach_.network_id},
                               attach_.secret));
    auto heard = bare.wait([](const auto& h) { return h.closed.has_value() || h.adopted; }, 20s);
    EXPECT_FALSE(heard.adopted) << "a request with no subtree took over back-end 0";
    ASSERT_TRUE(heard.closed);
  }
  HostileClient client(second_commnode().address, second_commnode().port);
  ASSERT_EQ(client.error(), "");
  const HelloSpec spec{.rank = 0, .incarnation = 9, .adopt = true, .network_id = attach_.network_id,
                       .ancestors = {FE, FE + 1}, .subtree = true};
  ASSERT_TRUE(client.handshake(spec, attach_.secret)) << "no challenge";
  auto heard = client.wait([](const auto& h) { return h.closed.has_value() || h.adopted; }, 20s);
  EXPECT_FALSE(heard.adopted) << "a process with the secret took over the rank of live back-end 0";
  ASSERT_TRUE(heard.closed) << "the request was neither granted nor refused within 20 s";
  EXPECT_FALSE(heard.shutdown) << "refused as a stranger: " << *heard.shutdown;
  const std::string log = slurp(dir_ / ("commnode-" + std::to_string(FE + 2) + ".log"));
  EXPECT_NE(log.find("holding the adoption request of node 0"), std::string::npos) << log;  // not held there
  EXPECT_NE(log.find("refusing to adopt node 0: its parent"), std::string::npos) << log;
  EXPECT_NE(log.find("answered this node, and neither its failure"), std::string::npos) << log;
  expect_backend_0_untouched();
  // And back-end 0 still gets what the front-end broadcasts.
  auto stream = network_->create_stream({.upstream_filter = "sum"});
  ASSERT_TRUE(stream) << stream.error();
  ASSERT_TRUE(network_->broadcast(*stream, canopy::Packet{7, {}}));
  auto got = backends_[0]->receive(10s);
  ASSERT_TRUE(got) << got.error();
  ASSERT_TRUE(got->has_value()) << "back-end 0 got nothing within 10 s";
  EXPECT_EQ((*got)->stream, *stream);
}

// A standby link proves one rank; the request for adoption it may carry later has
// no proof of its own, so it must be that rank's: a process with the secret that
// opens a standby link as back-end 0 and then asks, on it, for back-end 1's
// adoption is cut off, and back-end 1 stays where it is.
TEST_F(SecurityWithStandbyLinks, AStandbyLinkCarriesOnlyTheRequestOfTheRankItProved) {
  HostileClient client(second_commnode().address, second_commnode().port);
  ASSERT_EQ(client.error(), "");
  const HelloSpec spec{.rank = 0, .network_id = attach_.network_id, .standby = true, .ancestors = {FE, FE + 1}};
  ASSERT_TRUE(client.handshake(spec, attach_.secret)) << "no challenge";
  client.say_hello({.rank = 1, .incarnation = 9, .adopt = true, .network_id = attach_.network_id,
                    .ancestors = {FE, FE + 1}, .subtree = true});
  auto heard = client.wait([](const auto& h) { return h.closed.has_value() || h.adopted; }, 20s);
  EXPECT_FALSE(heard.adopted) << "a standby link proved as back-end 0 took over back-end 1";
  ASSERT_TRUE(heard.closed) << "the forged request was neither granted nor refused within 20 s";
  const std::string log = slurp(dir_ / ("commnode-" + std::to_string(FE + 2) + ".log"));
  EXPECT_NE(log.find("closing the standby link of node 0: it carried something other"), std::string::npos) << log;
  auto one = status_of(1);
  EXPECT_TRUE(one.alive);
  EXPECT_EQ(one.parent, std::optional<Rank>(FE + 1));
  EXPECT_EQ(one.incarnation, 0u);
  expect_backend_0_untouched();
}

// Where the tree runs without standby links, no one may hold one open: it would be
// a connection without a deadline.
TEST_F(Security, AStandbyLinkIsRefusedInATreeWithoutThem) {
  HostileClient client(second_commnode().address, second_commnode().port);
  ASSERT_EQ(client.error(), "");
  const HelloSpec spec{.rank = 0, .network_id = attach_.network_id, .standby = true};
  ASSERT_TRUE(client.handshake(spec, attach_.secret)) << "no challenge";
  auto heard = client.wait([](const auto& h) { return h.closed.has_value(); }, 20s);
  ASSERT_TRUE(heard.closed) << "a standby link was kept in a tree without them";
  const std::string log = slurp(dir_ / ("commnode-" + std::to_string(FE + 2) + ".log"));
  EXPECT_NE(log.find("standby links are off in this tree"), std::string::npos) << log;
}

// A front-end's hello (re-attaching, docs/fault-tolerance.md) is taken only by a
// process promoted in the place of a lost front-end: while the tree's front-end
// lives, a process with the secret that says hello to a commnode as the front-end
// is told why and cut off, and the commnode keeps its parent.
TEST_F(Security, NoOneTakesTheFrontEndsPlaceWhileItLivesEvenWithTheSecret) {
  HostileClient client(second_commnode().address, second_commnode().port);
  ASSERT_EQ(client.error(), "");
  const HelloSpec spec{.rank = FE, .role = canopy::wire::Role::FRONTEND, .network_id = attach_.network_id};
  ASSERT_TRUE(client.handshake(spec, attach_.secret)) << "no challenge";
  auto heard = client.wait([](const auto& h) { return h.closed.has_value() || h.topology; }, 20s);
  EXPECT_FALSE(heard.topology) << "a commnode took a second front-end as its parent";
  ASSERT_TRUE(heard.shutdown) << "refused without a reason";
  EXPECT_NE(heard.shutdown->find("the tree's front-end is alive"), std::string::npos) << *heard.shutdown;
  auto second = status_of(FE + 2);
  EXPECT_EQ(second.parent, std::optional<Rank>(FE));
  EXPECT_EQ(second.incarnation, 0u);
  expect_backend_0_untouched();
}

// Garbage before a hello closes the connection with the "bad frame" warning that
// docs/protocol.md promises (it was closed silently, issue 16).
TEST_F(Security, GarbageBeforeAHelloIsLoggedAsABadFrame) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  socket.connect({boost::asio::ip::make_address(second_commnode().address), second_commnode().port});
  // A frame of 16 bytes whose segment table claims 2^32 segments.
  std::array<std::uint8_t, 24> garbage{};
  garbage[0] = 16;
  std::fill(garbage.begin() + 8, garbage.end(), 0xff);
  boost::asio::write(socket, boost::asio::buffer(garbage));
  // The commnode closes it: reading ends (after the challenge it sent first).
  std::array<char, 4096> sink;
  boost::system::error_code ec;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!ec && std::chrono::steady_clock::now() < deadline) socket.read_some(boost::asio::buffer(sink), ec);
  EXPECT_TRUE(ec) << "the commnode kept a connection that sent garbage";
  const auto log_file = dir_ / ("commnode-" + std::to_string(FE + 2) + ".log");
  std::string log;
  for (auto until = std::chrono::steady_clock::now() + 10s;
       log.find("bad frame") == std::string::npos && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(20ms);
    log = slurp(log_file);
  }
  EXPECT_NE(log.find("bad frame"), std::string::npos) << "no 'bad frame' warning in " << log_file;
  EXPECT_NE(log.find("(before a hello)"), std::string::npos);
  expect_backend_0_untouched();
}

// Every refusal a stranger can cause is logged once per address and kind in a while,
// with the count of those not logged (docs/security.md, "Logs an outsider cannot
// fill"): 20 of each kind from one address write one line per kind, where a hello of
// another network wrote one line per try (95,260 lines in 10 s, issue 45). The
// silent connections are opened first: they are closed at the hello deadline.
TEST_F(Security, EveryRefusalAStrangerCausesIsLoggedOncePerKindInAWhile) {
  constexpr int kTries = 20;
  const boost::asio::ip::tcp::endpoint to{boost::asio::ip::make_address(second_commnode().address),
                                          second_commnode().port};
  boost::asio::io_context io;
  std::vector<boost::asio::ip::tcp::socket> silent;
  for (int i = 0; i < 2 * kTries; ++i) {
    auto& socket = silent.emplace_back(io);
    socket.connect(to);
    if (i % 2 == 1) {
      // A frame header announcing 16 bytes that never come: silent to the node, not
      // to the listener.
      std::array<std::uint8_t, 8> header{16};
      boost::asio::write(socket, boost::asio::buffer(header));
    }
  }
  const auto silent_since = std::chrono::steady_clock::now();
  for (int i = 0; i < kTries; ++i) {
    {
      HostileClient client(second_commnode().address, second_commnode().port);
      ASSERT_EQ(client.error(), "");
      client.say_hello({.rank = 2, .network_id = attach_.network_id + 1});
      ASSERT_TRUE(client.wait([](const auto& h) { return h.closed.has_value(); }).closed) << "another network";
    }
    {
      HostileClient client(second_commnode().address, second_commnode().port);
      client.say_hello({.rank = 2, .network_id = attach_.network_id, .protocol_version = 1});
      ASSERT_TRUE(client.wait([](const auto& h) { return h.closed.has_value(); }).closed) << "another version";
    }
    {
      HostileClient client(second_commnode().address, second_commnode().port);
      client.send_proof({});
      ASSERT_TRUE(client.wait([](const auto& h) { return h.closed.has_value(); }).closed) << "not a hello";
    }
    {
      boost::asio::ip::tcp::socket socket(io);
      socket.connect(to);
      std::array<std::uint8_t, 24> garbage{};  // a segment table claiming 2^32 segments
      garbage[0] = 16;
      std::fill(garbage.begin() + 8, garbage.end(), 0xff);
      boost::asio::write(socket, boost::asio::buffer(garbage));
      std::array<char, 4096> sink;
      boost::system::error_code ec;
      while (!ec) socket.read_some(boost::asio::buffer(sink), ec);  // closed by the commnode
    }
  }
  // The hello deadline is the start-up time-out (10 s).
  std::this_thread::sleep_until(silent_since + 11s);
  const auto log_file = dir_ / ("commnode-" + std::to_string(FE + 2) + ".log");
  std::string log;
  auto count_until_seen = [&](const std::string& what) {
    for (auto until = std::chrono::steady_clock::now() + 10s;
         count_of(log, what) == 0 && std::chrono::steady_clock::now() < until;) {
      std::this_thread::sleep_for(50ms);
      log = slurp(log_file);
    }
    return count_of(log, what);
  };
  for (const std::string what : {"another network", "protocol version 1,", "first message is not a hello",
                                 "bad frame", ": no hello within", "closing a connection from"}) {
    const auto logged = count_until_seen(what);
    EXPECT_GE(logged, 1u) << "'" << what << "' was not logged: " << log_file;
    // ": no hello within" is in both the node's and the listener's lines.
    EXPECT_LE(logged, what == ": no hello within" ? 4u : 2u)
        << "'" << what << "' logged " << logged << " times for " << kTries << " tries from one address";
  }
  expect_backend_0_untouched();
}

// The commnodes wipe the secret from their environment once read: unsetenv alone
// left it in /proc/PID/environ, which shows the block a process started with.
TEST_F(Security, TheSecretIsNotInACommnodesEnvironment) {
  const std::string secret = canopy::core::to_hex(attach_.secret);
  for (Rank commnode : {FE + 1, FE + 2}) {
    const pid_t pid = ProcessGuard::process_of_rank(commnode);
    ASSERT_GT(pid, 0) << "no process for commnode " << commnode;
    const std::string environment = slurp("/proc/" + std::to_string(pid) + "/environ");
    EXPECT_NE(environment.find("CANOPY_RANK="), std::string::npos) << "not the commnode's environment";
    EXPECT_EQ(environment.find(secret), std::string::npos) << "commnode " << commnode << " has the secret in /proc/"
                                                           << pid << "/environ";
  }
}

// Connections that never say hello are bounded at each stage of the handshake
// (docs/protocol.md, "Resource bounds"): past the bound, a new one is closed at
// once and logged, those within it wait for their hello deadline, and the tree goes
// on. First silent connections (the listener's stage, telling striped from plain),
// then connections that start a plain frame and stop (the node's stage).
TEST_F(Security, ConnectionsThatNeverSayHelloAreBoundedAtEveryStage) {
  rlimit files{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &files), 0);
  constexpr std::size_t kBound = 1024;  // b:2x2 is 7 processes: the least bound
  constexpr std::size_t kOver = 8;
  ASSERT_GE(files.rlim_max, 2 * (kBound + kOver) + 200) << "this test needs more descriptors than the hard limit";
  files.rlim_cur = files.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &files), 0);

  const auto log_file = dir_ / ("commnode-" + std::to_string(FE + 2) + ".log");
  auto flood = [&](bool start_a_frame) {
    boost::asio::io_context io;
    std::vector<boost::asio::ip::tcp::socket> sockets;
    const auto started = std::chrono::steady_clock::now();
    const boost::asio::ip::tcp::endpoint to{boost::asio::ip::make_address(second_commnode().address),
                                            second_commnode().port};
    for (std::size_t i = 0; i < kBound + kOver; ++i) {
      auto& socket = sockets.emplace_back(io);
      socket.connect(to);
      if (start_a_frame) {
        // A frame header announcing 16 bytes that never come: a plain connection
        // for the listener, one waiting for its hello for the node.
        std::array<std::uint8_t, 8> header{16};
        boost::asio::write(socket, boost::asio::buffer(header));
        if (i % 64 == 63) std::this_thread::sleep_for(20ms);  // let the listener pass them on
      }
    }
    // The ones over the bound are closed at once; the others wait (the hello
    // deadline is the start-up time-out, 10 s after the first was accepted). Count
    // the closed ones until half a second after the bound's worth, or 9 s after the
    // first connect (a loaded machine with sanitizers took more than 3 s).
    std::vector<pollfd> fds;
    for (auto& socket : sockets) fds.push_back({socket.native_handle(), POLLIN, 0});
    std::size_t closed = 0;
    auto until = started + 9s;
    for (bool grace = false; std::chrono::steady_clock::now() < until;) {
      if (closed >= kOver && !grace) {
        grace = true;  // any beyond the bound would show now
        until = std::min(until, std::chrono::steady_clock::now() + 500ms);
      }
      if (poll(fds.data(), fds.size(), 100) < 0) break;
      for (auto& fd : fds) {
        if (fd.fd >= 0 && fd.revents != 0) {
          ++closed;
          fd.fd = -1;  // poll skips it from now on
        }
      }
    }
    return closed;
  };
  auto logged = [&](const std::string& what) {
    for (auto until = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < until;) {
      if (slurp(log_file).find(what) != std::string::npos) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  };

  EXPECT_EQ(flood(false), kOver) << "silent connections: the listener's bound";
  EXPECT_TRUE(logged("connections are already waiting for their first bytes")) << log_file;
  std::this_thread::sleep_for(1s);  // the commnode sees the first ones closed
  EXPECT_EQ(flood(true), kOver) << "connections that started a frame: the node's bound";
  EXPECT_TRUE(logged("connections are already waiting for their hello")) << log_file;
  expect_backend_0_untouched();
  // The tree still reduces.
  auto stream = network_->create_stream({.upstream_filter = "sum"});
  ASSERT_TRUE(stream) << stream.error();
}

// The child side checks its parent too: a process listening where the attach file
// says, whose challenge carries a proof it cannot have computed, is left at once,
// before the back-end proves anything, and the back-end says why.
TEST_F(Security, ABackendLeavesAParentThatCannotProveTheSecret) {
  canopy::core::LoopThread loop;
  boost::asio::ip::tcp::acceptor acceptor(loop.io(), {boost::asio::ip::make_address("127.0.0.1"), 0});
  std::shared_ptr<canopy::transport::Link> fake;
  std::promise<void> helloed;
  std::atomic<bool> proved = false;
  acceptor.async_accept([&](const boost::system::error_code& ec, boost::asio::ip::tcp::socket socket) {
    if (ec) return;
    fake = canopy::transport::TcpLink::create(std::move(socket));
    fake->start(
        [&](capnp::MessageReader& message) {
          auto body = message.getRoot<canopy::wire::Message>().getBody();
          if (body.isHello()) {
            // A challenge of the right form whose proof it cannot have computed.
            canopy::core::Message challenge(canopy::core::NodeIdentity{.rank = FE + 1});
            auto c = challenge.body().initChallenge();
            c.setNonce(canopy::core::as_data(canopy::core::new_nonce()));
            c.setProof(canopy::core::as_data(canopy::core::new_nonce()));
            fake->send(challenge.builder());
            helloed.set_value();
          } else if (body.isHelloProof()) {
            proved = true;
          }
        },
        [](std::string_view) {});
  });
  const auto port = acceptor.local_endpoint().port();
  // The attach file with back-end 0 pointed at the fake parent.
  std::string text = slurp(file_);
  const auto& entry = *attach_.find(0);
  const std::string line = "backend 0 " + std::to_string(entry.parent) + " " + entry.address + " " +
                           std::to_string(entry.port);
  ASSERT_NE(text.find(line), std::string::npos) << text;
  text.replace(text.find(line), line.size(), "backend 0 " + std::to_string(entry.parent) + " 127.0.0.1 " +
                                                 std::to_string(port));
  const auto faked = (dir_ / "faked").string();
  std::ofstream(faked) << text;
  auto backend = canopy::Backend::attach(faked, 0);
  ASSERT_TRUE(backend) << backend.error();
  ASSERT_EQ(helloed.get_future().wait_for(10s), std::future_status::ready) << "the back-end never said hello";
  std::optional<std::string> error;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!error && std::chrono::steady_clock::now() < deadline) {
    auto got = (*backend)->receive(200ms);
    if (!got) error = got.error();
  }
  ASSERT_TRUE(error) << "the back-end went on with a parent that cannot prove the secret";
  EXPECT_NE(error->find("could not prove it knows the network's secret"), std::string::npos) << *error;
  EXPECT_FALSE(proved) << "the back-end proved the secret to a parent that had not";
  backend->reset();
  loop.call([&] {
    if (fake) fake->abort("test over");
    acceptor.close();
  });
  loop.stop();
}

// The secret is on no command line of any process of the tree, and the attach file
// that holds it is its owner's only.
TEST_F(Security, TheSecretIsOnNoCommandLineAndTheAttachFileIsPrivate) {
  struct stat st {};
  ASSERT_EQ(stat(file_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << std::oct << (st.st_mode & 0777);
  const std::string secret = canopy::core::to_hex(attach_.secret);
  const auto pids = ProcessGuard::descendants();
  ASSERT_FALSE(pids.empty());
  for (pid_t pid : pids) {
    const std::string cmdline = slurp("/proc/" + std::to_string(pid) + "/cmdline");
    EXPECT_EQ(cmdline.find(secret), std::string::npos) << "pid " << pid << " has the secret on its command line";
  }
}

// Through a launcher (another host), the secret goes on the launched command's
// standard input: the commnode on "far" has CANOPY_SECRET_ON_STDIN=1 and no
// CANOPY_SECRET in its environment, its back-ends (started by it, locally) have the
// secret in theirs, and no command line has it. The tree works, so the commnode
// read the right secret.
class SecretTravel : public TreeTest {};

TEST_F(SecretTravel, ThroughALauncherTheSecretGoesOnStandardInput) {
  const char* yaml = canopy::testing::kFarTopologyYaml;
  auto topology = canopy::parse_topology_yaml(yaml, "far.yaml");
  ASSERT_TRUE(topology) << topology.error();
  canopy::LaunchOptions options;
  options.topology = *topology;
  options.backend_argv = {std::string(CANOPY_BIN_DIR) + "/canopy-demo-backend"};
  options.launcher = "env CANOPY_TEST_LAUNCHED_ON={host} {command}";
  auto network = canopy::Network::launch(std::move(options));
  ASSERT_TRUE(network) << network.error();
  network_ = std::move(*network);
  auto environment = [](pid_t pid) {
    std::string all = slurp("/proc/" + std::to_string(pid) + "/environ");
    std::replace(all.begin(), all.end(), '\0', '\n');
    return "\n" + all;
  };
  std::string secret;
  const pid_t commnode = ProcessGuard::process_of_rank(1000001);
  ASSERT_GT(commnode, 0);
  for (Rank r : {0u, 1u}) {
    const std::string env = environment(ProcessGuard::process_of_rank(r));
    const auto at = env.find("\nCANOPY_SECRET=");
    ASSERT_NE(at, std::string::npos) << "back-end " << r << " has no CANOPY_SECRET";
    secret = env.substr(at + 15, 64);
  }
  const std::string env = environment(commnode);
  EXPECT_NE(env.find("\nCANOPY_TEST_LAUNCHED_ON=far\n"), std::string::npos) << "not started through the launcher";
  EXPECT_NE(env.find("\nCANOPY_SECRET_ON_STDIN=1\n"), std::string::npos);
  EXPECT_EQ(env.find("\nCANOPY_SECRET="), std::string::npos) << "the secret went in the environment of the launcher";
  for (pid_t pid : ProcessGuard::descendants()) {
    const std::string cmdline = slurp("/proc/" + std::to_string(pid) + "/cmdline");
    EXPECT_EQ(cmdline.find(secret), std::string::npos) << "pid " << pid << " has the secret on its command line";
  }
  auto stream = network_->create_stream({.upstream_filter = "sum"});
  ASSERT_TRUE(stream) << stream.error();
  // One wave of the demo workload (docs/demo.md): the sum of both back-ends' values.
  auto start = canopy::Packet::pack(canopy::demo::kStartTag, "%d %d %d", 1, 0, 0);
  ASSERT_TRUE(start) << start.error();
  ASSERT_TRUE(network_->broadcast(*stream, *start));
  auto result = network_->receive(10s);
  ASSERT_TRUE(result) << result.error();
  ASSERT_TRUE(result->has_value()) << "no result through the commnode started by the launcher";
  EXPECT_EQ(std::get<std::int32_t>((**result).packet[0]), canopy::demo::demo_value(0, 0) + canopy::demo::demo_value(0, 1));
}

}  // namespace
