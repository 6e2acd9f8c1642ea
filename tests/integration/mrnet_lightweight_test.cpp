// MRNet's lightweight C back-end API (docs/mrnet.md) end to end: an MRNet-style
// back-end in C (mrnet_lightweight_be.c, linked to Canopy::mrnet_lightweight
// alone) on real trees over loopback, driven by Canopy's native front-end API with
// MRNet packets (mrnet/packet_codec.h), started by Canopy with MRNet's five
// arguments or by the test in attach mode; and how such a back-end fails when its
// arguments are wrong.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "canopy/frontend.h"
#include "child_process.h"
#include "mrnet/backend_args.h"
#include "mrnet/conventions.h"
#include "mrnet/packet_codec.h"
#include "run_canopy.h"
#include "tree_fixture.h"

extern char** environ;

using namespace std::chrono_literals;
using canopy::testing::ProcessTest;
using canopy::testing::spawn;
using canopy::testing::wait_exit;
using canopy::testing::TreeTest;

namespace {

const std::string kBackend = MRNET_LW_BE;
const std::string kLibrary = MRNET_LW_LIB;
constexpr unsigned int kUserStream = MRN::layer::kUserStreamBase;  // the first user stream's MRNet id
constexpr int kBackends = 4;

// The back-end's protocol (mrnet_lightweight_be.c says what each tag does).
enum Tag : int {
  kWaves = 100,
  kExit = 101,
  kWhoami = 102,
  kEcho = 103,
  kEmpty = 104,
  kProbe = 105,
  kPoll = 106,
  kPolled = 107,
  kStreamRecv = 108,
  kOnUser = 109,
  kOnOwn = 110,
  kReuse = 111,
  kBulk = 112,
  kTopology = 113,
  kSpin = 114,
};
constexpr const char* kEchoFormat =
    "%c %uc %hd %uhd %d %ud %ld %uld %f %lf %s %ac %auc %ahd %auhd %ad %aud %ald %auld %af %alf %as %Ad %Alf";

// An MRNet packet as the front-end sends it.
template <typename... Args>
canopy::Packet mrnet(int tag, const char* format, Args... args) {
  MRN::Packet packet(0, tag, format, args...);
  EXPECT_FALSE(packet.has_Error()) << packet.impl().error;
  return MRN::codec::to_canopy(packet);
}

// A reply as the front-end decodes it.
struct Reply {
  canopy::Rank source = 0;
  unsigned int stream_id = 0;  // MRNet's
  MRN::PacketPtr packet;
};

// A malloc'd array an unpack gave, copied and freed.
template <typename T, typename N>
std::vector<T> take(T* data, N n) {
  std::vector<T> out(data, data + n);
  std::free(data);
  return out;
}

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

struct Exit {
  int status = -1;  // as waitpid gives it; -1: killed after the limit
  std::string err;
};

class LightweightBackends : public TreeTest {
 protected:
  void SetUp() override {
    TreeTest::SetUp();
    if (HasFatalFailure()) return;
    dir_ = test_dir("canopy-mrnet-lw");
    setenv("MRNET_LW_TEST_DIR", dir_.c_str(), 1);
  }

  // A tree of two commnodes and four C back-ends started by Canopy with "myarg" and
  // MRNet's five arguments, and its streams: the per-back-end stream first, then
  // one user stream over every back-end.
  void launch() {
    auto topology = canopy::generate_topology("b:2^2");
    ASSERT_TRUE(topology) << topology.error();
    canopy::LaunchOptions options;
    options.topology = *topology;
    options.backend_argv = {kBackend, "myarg"};
    options.mrnet_backend_args = true;
    auto network = canopy::Network::launch(std::move(options));
    ASSERT_TRUE(network) << network.error();
    network_ = std::move(*network);
    create_streams();
  }

  void create_streams() {
    auto per_backend = network_->create_stream({.upstream_filter = "pass", .sync = canopy::SyncMode::dont_wait});
    ASSERT_TRUE(per_backend) << per_backend.error();
    ASSERT_EQ(*per_backend, MRN::layer::kPerBackendStream);
    auto user = network_->create_stream({.upstream_filter = "pass"});
    ASSERT_TRUE(user) << user.error();
    ASSERT_EQ(MRN::layer::mrnet_stream_id(*user, 0), kUserStream);
    user_ = *user;
  }

  void broadcast(const canopy::Packet& packet) { ASSERT_TRUE(network_->broadcast(user_, packet)); }
  // On the back-end's own stream (MRNet's Network::send(rank, ...)).
  void send_to(canopy::Rank rank, const canopy::Packet& packet) {
    ASSERT_TRUE(network_->send_to(MRN::layer::kPerBackendStream, rank, packet));
  }

  // The next reply, failing the test on an error, a packet that is not MRNet's, or
  // after 10 s.
  std::optional<Reply> next() {
    auto in = network_->receive(10s);
    if (!in) {
      ADD_FAILURE() << in.error();
      return std::nullopt;
    }
    if (!*in) {
      ADD_FAILURE() << "no reply within 10 s";
      return std::nullopt;
    }
    const canopy::Rank source = (*in)->packet.source();
    auto packet = MRN::codec::from_canopy((*in)->packet, MRN::layer::mrnet_stream_id((*in)->stream, source));
    if (!packet) {
      ADD_FAILURE() << packet.error();
      return std::nullopt;
    }
    return Reply{source, (*packet)->get_StreamId(), *packet};
  }

  // One reply from each back-end, by rank.
  std::map<canopy::Rank, Reply> one_from_each() {
    std::map<canopy::Rank, Reply> replies;
    for (int i = 0; i < kBackends; ++i) {
      auto reply = next();
      if (!reply) break;
      EXPECT_FALSE(replies.count(reply->source)) << "two replies from " << reply->source;
      replies[reply->source] = *reply;
    }
    return replies;
  }

  // The exit tag: every back-end reports no failed check, then the tree shuts down
  // and every back-end (ranks first...) writes its exit file.
  void finish(canopy::Rank first = 0) {
    broadcast(mrnet(kExit, ""));
    auto replies = one_from_each();
    EXPECT_EQ(replies.size(), static_cast<std::size_t>(kBackends));
    for (auto& [rank, reply] : replies) {
      EXPECT_EQ(reply.packet->get_Tag(), kExit);
      int failures = -1;
      char* first = nullptr;
      ASSERT_EQ(reply.packet->unpack("%d %s", &failures, &first), 0);
      EXPECT_EQ(failures, 0) << "back-end " << rank << ": " << first;
      std::free(first);
    }
    ASSERT_TRUE(network_->shutdown());
    for (canopy::Rank r = first; r < first + kBackends; ++r) {
      const auto file = dir_ / ("exit." + std::to_string(r));
      EXPECT_TRUE(canopy::testing::wait_for([&] { return slurp(file).starts_with("failures=0"); }, 10s))
          << "back-end " << r << " did not exit cleanly: \"" << slurp(file) << "\"";
    }
  }

  // Kills commnode 1000001 and waits (30 s at most) until the front-end has its two
  // back-ends adopted.
  void kill_first_commnode_and_wait_for_adoptions() {
    const canopy::Rank commnode = canopy::kFirstInternalRank + 1;
    const pid_t pid = canopy::testing::ProcessGuard::process_of_rank(commnode);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    auto adopted = [&] {
      for (const auto& node : network_->status()) {
        if (node.role == canopy::Role::backend && node.parent == commnode) return false;
      }
      return true;
    };
    ASSERT_TRUE(canopy::testing::wait_for(adopted, 30s)) << "the orphans of commnode " << commnode << " not adopted";
  }

  std::filesystem::path dir_;
  canopy::StreamId user_ = 0;
};

TEST_F(LightweightBackends, ABackendSendsItsWavesUpTheStreamThePacketCameOn) {
  launch();
  broadcast(mrnet(kWaves, "%d %d", 7, 3));
  std::set<std::pair<canopy::Rank, int>> got;
  for (int i = 0; i < 3 * kBackends; ++i) {
    auto reply = next();
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->packet->get_Tag(), kWaves);
    EXPECT_EQ(reply->stream_id, kUserStream);
    int value = -1;
    ASSERT_EQ(reply->packet->unpack("%d", &value), 0);
    got.insert({reply->source, value});
  }
  std::set<std::pair<canopy::Rank, int>> want;
  for (int r = 0; r < kBackends; ++r) {
    for (int i = 0; i < 3; ++i) want.insert({r, 7 * i + 1000 * r});
  }
  EXPECT_EQ(got, want);

  // On a back-end's own stream, the answer comes back on it alone.
  send_to(2, mrnet(kWaves, "%d %d", 5, 2));
  for (int i = 0; i < 2; ++i) {
    auto reply = next();
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->source, 2u);
    EXPECT_EQ(reply->stream_id, 2u) << "the per-back-end stream's id is the back-end's rank";
    int value = -1;
    ASSERT_EQ(reply->packet->unpack("%d", &value), 0);
    EXPECT_EQ(value, 5 * i + 2000);
  }
  finish();
}

TEST_F(LightweightBackends, ABackendKnowsItsRankItsStreamsIdsAndItsOwnArguments) {
  launch();
  auto check = [](const Reply& reply, canopy::Rank rank, unsigned int stream_id) {
    EXPECT_EQ(reply.packet->get_Tag(), kWhoami);
    EXPECT_EQ(reply.source, rank);
    unsigned int id = 0, its_rank = 0;
    char* arg = nullptr;
    int argc = 0;
    ASSERT_EQ(reply.packet->unpack("%ud %ud %s %d", &id, &its_rank, &arg, &argc), 0);
    EXPECT_EQ(id, stream_id);
    EXPECT_EQ(its_rank, rank);
    EXPECT_STREQ(arg, "myarg");
    EXPECT_EQ(argc, 7) << "the program, its own argument and MRNet's five";
    std::free(arg);
  };
  broadcast(mrnet(kWhoami, ""));
  auto replies = one_from_each();
  ASSERT_EQ(replies.size(), static_cast<std::size_t>(kBackends));
  for (auto& [rank, reply] : replies) check(reply, rank, kUserStream);
  for (canopy::Rank r = 0; r < kBackends; ++r) {
    send_to(r, mrnet(kWhoami, ""));
    auto reply = next();
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->stream_id, r);
    check(*reply, r, r);
  }
  finish();
}

// Network_get_NetworkTopology is the live tree as the back-end knows it, as the
// front-end's status() has it: seven nodes under the front-end, the back-end under
// its commnode; then, a commnode killed, its failure and its orphans' new parents.
TEST_F(LightweightBackends, ABackendsTopologyIsTheLiveTree) {
  launch();
  // Each back-end's answer: nodes, root, parent, root's height, a back-end, host,
  // the topology string names it.
  auto ask = [&] {
    std::map<canopy::Rank, std::tuple<unsigned, unsigned, unsigned, unsigned, int, std::string, int>> told;
    broadcast(mrnet(kTopology, ""));
    while (told.size() < static_cast<std::size_t>(kBackends)) {
      auto in = network_->receive(10s);
      if (!in || !*in) {
        ADD_FAILURE() << (in ? "no reply within 10 s" : in.error());
        break;
      }
      auto packet = MRN::codec::from_canopy((*in)->packet, 0);
      if (!packet) {
        ADD_FAILURE() << packet.error();
        break;
      }
      unsigned nodes = 0, root = 0, parent = 0, height = 0;
      int backend = 0, named = 0;
      char* host = nullptr;
      EXPECT_EQ((*packet)->unpack("%ud %ud %ud %ud %d %s %d", &nodes, &root, &parent, &height, &backend, &host,
                                  &named),
                0);
      told[(*in)->packet.source()] = {nodes, root, parent, height, backend, host ? host : "", named};
      std::free(host);
    }
    return told;
  };
  auto expected = [&](unsigned nodes) {
    std::map<canopy::Rank, std::tuple<unsigned, unsigned, unsigned, unsigned, int, std::string, int>> want;
    for (const auto& node : network_->status()) {
      if (node.role == canopy::Role::backend) {
        want[node.rank] = {nodes, canopy::kFirstInternalRank, *node.parent, 2, 1, node.host, 1};
      }
    }
    return want;
  };
  EXPECT_EQ(ask(), expected(7));

  // Once the front-end has both orphans adopted, every back-end comes to agree.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  ASSERT_NO_FATAL_FAILURE(kill_first_commnode_and_wait_for_adoptions());
  auto told = ask();
  while (told != expected(6) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
    told = ask();
  }
  EXPECT_EQ(told, expected(6)) << "six nodes: the failed commnode is kept, marked, and not counted";
  // Nothing is left unread: no packet nobody asked for, and no error (the kill cost
  // no wave, none being in flight).
  for (auto in = network_->receive(300ms); !in || *in; in = network_->receive(300ms)) {
    if (!in) {
      ADD_FAILURE() << in.error();
      break;
    }
    ADD_FAILURE() << "a packet nobody asked for, tag " << (*in)->packet.tag();
  }
  finish();
}

// A C back-end that ends in while (!Stream_is_Closed(s)) sleep(1), as MRNet's examples
// do, after its commnode was killed and it was adopted by a process that did not
// start it: it must see the network shut down and exit (issue 48).
TEST_F(LightweightBackends, ABackendSpinningOnStreamIsClosedEndsWithTheTreeAlsoAfterAnAdoption) {
  launch();
  ASSERT_NO_FATAL_FAILURE(kill_first_commnode_and_wait_for_adoptions());
  broadcast(mrnet(kSpin, ""));
  auto replies = one_from_each();
  EXPECT_EQ(replies.size(), static_cast<std::size_t>(kBackends));
  ASSERT_TRUE(network_->shutdown());
  // The adopted ones end on their own. (The others' commnode may end them first.)
  for (canopy::Rank r : {0u, 1u}) {
    const auto file = dir_ / ("exit." + std::to_string(r));
    EXPECT_TRUE(canopy::testing::wait_for([&] { return slurp(file).starts_with("failures=0"); }, 15s))
        << "adopted back-end " << r << " did not exit: \"" << slurp(file) << "\"";
  }
  EXPECT_TRUE(canopy::testing::ProcessGuard::wait_for_none(15s).empty()) << "back-ends outlived the tree";
}

TEST_F(LightweightBackends, EveryDirectiveRoundTripsThroughACBackend) {
  launch();
  const char c = 'x';
  const unsigned char uc = 250;
  const std::int16_t hd = -12345;
  const std::uint16_t uhd = 54321;
  const std::int32_t d = std::numeric_limits<std::int32_t>::min();
  const std::uint32_t ud = 4000000000u;
  const std::int64_t ld = -(std::int64_t{1} << 40);
  const std::uint64_t uld = (std::uint64_t{1} << 63) + 5;
  const float f = 1.5f;
  const double lf = -2.25e300;
  const char* s = "a string";
  const std::vector<char> ac{'a', 'b', '\0', 'c'};
  const std::vector<unsigned char> auc{0, 255, 7};
  const std::vector<std::int16_t> ahd{-32768, 32767};
  const std::vector<std::uint16_t> auhd{65535, 1};
  const std::vector<std::int32_t> ad{std::numeric_limits<std::int32_t>::min(), 0, 42};
  const std::vector<std::uint32_t> aud{std::numeric_limits<std::uint32_t>::max()};
  const std::vector<std::uint64_t> auld{std::numeric_limits<std::uint64_t>::max(), 3};
  const std::vector<float> af{0.5f, -1.25f};
  const std::vector<double> alf{3.14159, -0.0, 1e-300};
  const std::vector<const char*> as{"one", "", "three"};
  const std::vector<std::int32_t> Ad{1, 2, 3, 4, 5};
  const std::vector<double> Alf{2.5};
  auto n = [](const auto& v) { return static_cast<std::uint32_t>(v.size()); };
  auto big_n = [](const auto& v) { return static_cast<std::uint64_t>(v.size()); };
  const auto sent =
      mrnet(kEcho, kEchoFormat, c, uc, hd, uhd, d, ud, ld, uld, f, lf, s, ac.data(), n(ac), auc.data(), n(auc),
            ahd.data(), n(ahd), auhd.data(), n(auhd), ad.data(), n(ad), aud.data(), n(aud),
            static_cast<const std::int64_t*>(nullptr), std::uint32_t{0}, auld.data(), n(auld), af.data(), n(af),
            alf.data(), n(alf), as.data(), n(as), Ad.data(), big_n(Ad), Alf.data(), big_n(Alf));

  auto expect_echo = [&](const Reply& reply) {
    EXPECT_EQ(reply.packet->get_Tag(), kEcho);
    EXPECT_STREQ(reply.packet->get_FormatString(), kEchoFormat);
    char c2 = 0;
    unsigned char uc2 = 0;
    std::int16_t hd2 = 0;
    std::uint16_t uhd2 = 0;
    std::int32_t d2 = 0;
    std::uint32_t ud2 = 0;
    std::int64_t ld2 = 0;
    std::uint64_t uld2 = 0;
    float f2 = 0;
    double lf2 = 0;
    char* s2 = nullptr;
    char* ac2; std::uint32_t ac_n;
    unsigned char* auc2; std::uint32_t auc_n;
    std::int16_t* ahd2; std::uint32_t ahd_n;
    std::uint16_t* auhd2; std::uint32_t auhd_n;
    std::int32_t* ad2; std::uint32_t ad_n;
    std::uint32_t* aud2; std::uint32_t aud_n;
    std::int64_t* ald2; std::uint32_t ald_n;
    std::uint64_t* auld2; std::uint32_t auld_n;
    float* af2; std::uint32_t af_n;
    double* alf2; std::uint32_t alf_n;
    char** as2; std::uint32_t as_n;
    std::int32_t* Ad2; std::uint64_t Ad_n;
    double* Alf2; std::uint64_t Alf_n;
    ASSERT_EQ(reply.packet->unpack(kEchoFormat, &c2, &uc2, &hd2, &uhd2, &d2, &ud2, &ld2, &uld2, &f2, &lf2, &s2, &ac2,
                                   &ac_n, &auc2, &auc_n, &ahd2, &ahd_n, &auhd2, &auhd_n, &ad2, &ad_n, &aud2, &aud_n,
                                   &ald2, &ald_n, &auld2, &auld_n, &af2, &af_n, &alf2, &alf_n, &as2, &as_n, &Ad2,
                                   &Ad_n, &Alf2, &Alf_n),
              0);
    EXPECT_EQ(c2, c);
    EXPECT_EQ(uc2, uc);
    EXPECT_EQ(hd2, hd);
    EXPECT_EQ(uhd2, uhd);
    EXPECT_EQ(d2, d);
    EXPECT_EQ(ud2, ud);
    EXPECT_EQ(ld2, ld);
    EXPECT_EQ(uld2, uld);
    EXPECT_EQ(f2, f);
    EXPECT_EQ(lf2, lf);
    EXPECT_STREQ(s2, s);
    std::free(s2);
    EXPECT_EQ(take(ac2, ac_n), ac);
    EXPECT_EQ(take(auc2, auc_n), auc);
    EXPECT_EQ(take(ahd2, ahd_n), ahd);
    EXPECT_EQ(take(auhd2, auhd_n), auhd);
    EXPECT_EQ(take(ad2, ad_n), ad);
    EXPECT_EQ(take(aud2, aud_n), aud);
    EXPECT_EQ(ald2, nullptr);
    EXPECT_EQ(ald_n, 0u);
    EXPECT_EQ(take(auld2, auld_n), auld);
    EXPECT_EQ(take(af2, af_n), af);
    EXPECT_EQ(take(alf2, alf_n), alf);
    ASSERT_EQ(as_n, as.size());
    for (std::uint32_t i = 0; i < as_n; ++i) {
      EXPECT_STREQ(as2[i], as[i]);
      std::free(as2[i]);
    }
    std::free(as2);
    EXPECT_EQ(take(Ad2, Ad_n), Ad);
    EXPECT_EQ(take(Alf2, Alf_n), Alf);
  };

  send_to(1, sent);
  auto reply = next();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->source, 1u);
  EXPECT_EQ(reply->stream_id, 1u);
  expect_echo(*reply);

  broadcast(sent);
  auto replies = one_from_each();
  EXPECT_EQ(replies.size(), static_cast<std::size_t>(kBackends));
  for (auto& [rank, echoed] : replies) {
    EXPECT_EQ(echoed.stream_id, kUserStream);
    expect_echo(echoed);
  }

  // The empty format carries nothing, and new_Packet_t_2 makes one.
  send_to(3, mrnet(kEmpty, ""));
  reply = next();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->source, 3u);
  EXPECT_EQ(reply->packet->get_Tag(), kEmpty);
  EXPECT_STREQ(reply->packet->get_FormatString(), "");
  EXPECT_EQ(reply->packet->get_NumElements(), 0u);
  finish();
}

TEST_F(LightweightBackends, NonBlockingReceiveReturnsZeroWhenNothingIsThereAndOneOnceSomethingIs) {
  launch();
  for (canopy::Rank r = 0; r < kBackends; ++r) {
    send_to(r, mrnet(kProbe, ""));
    auto reply = next();
    ASSERT_TRUE(reply);
    int got = -2;
    ASSERT_EQ(reply->packet->unpack("%d", &got), 0);
    EXPECT_EQ(got, 0) << "back-end " << r;
  }
  send_to(3, mrnet(kPoll, ""));
  std::this_thread::sleep_for(200ms);
  send_to(3, mrnet(kPolled, "%d", 42));
  auto reply = next();
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->packet->get_Tag(), kPoll);
  int tag = 0, value = 0;
  unsigned int stream_id = 0;
  ASSERT_EQ(reply->packet->unpack("%d %d %ud", &tag, &value, &stream_id), 0);
  EXPECT_EQ(tag, kPolled);
  EXPECT_EQ(value, 42);
  EXPECT_EQ(stream_id, 3u);
  finish();
}

TEST_F(LightweightBackends, StreamRecvTakesItsOwnStreamsPacketAndLeavesTheOthersForNetworkRecv) {
  launch();
  broadcast(mrnet(kWhoami, ""));  // every back-end now knows the user stream
  EXPECT_EQ(one_from_each().size(), static_cast<std::size_t>(kBackends));
  // Back-end 2 waits on the user stream; a packet on its own stream comes first.
  send_to(2, mrnet(kStreamRecv, "%ud", kUserStream));
  send_to(2, mrnet(kOnOwn, "%d", 6));
  std::this_thread::sleep_for(200ms);
  ASSERT_TRUE(network_->send_to(user_, 2, mrnet(kOnUser, "%d", 9)));
  std::map<int, int> got;  // reply tag -> what it says
  for (int i = 0; i < 2; ++i) {
    auto reply = next();
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->source, 2u);
    if (reply->packet->get_Tag() == kStreamRecv) {
      int tag = 0, value = 0;
      ASSERT_EQ(reply->packet->unpack("%d %d", &tag, &value), 0);
      EXPECT_EQ(tag, kOnUser) << "Stream_recv returned another stream's packet";
      got[kStreamRecv] = value;
    } else {
      ASSERT_EQ(reply->packet->get_Tag(), kOnOwn);
      ASSERT_EQ(reply->packet->unpack("%d", &got[kOnOwn]), 0);
    }
  }
  EXPECT_EQ(got, (std::map<int, int>{{kStreamRecv, 9}, {kOnOwn, 6}}));
  finish();
}

// 200 packets of 64 KiB received into the same Packet_t: the heap must not keep
// them (12.5 MiB if it did).
TEST_F(LightweightBackends, ReceivingIntoTheSamePacketAgainFreesWhatItHeld) {
  launch();
  constexpr int kCount = 200;
  send_to(0, mrnet(kReuse, "%d", kCount));
  auto ready = next();
  ASSERT_TRUE(ready);
  ASSERT_EQ(ready->packet->get_Tag(), kReuse);
  const std::vector<char> ballast(64 * 1024, 'b');
  const auto bulk = mrnet(kBulk, "%ac", ballast.data(), static_cast<std::uint32_t>(ballast.size()));
  for (int i = 0; i < kCount; ++i) send_to(0, bulk);
  auto reply = next();
  ASSERT_TRUE(reply);
  std::int64_t growth = -1;
  ASSERT_EQ(reply->packet->unpack("%ld", &growth), 0);
  EXPECT_LT(growth, 2 * 1024 * 1024) << "bytes the back-end's heap grew by";
  finish();
}

// Attach mode: the tool starts the back-ends with MRNet's five arguments and
// CANOPY_ATTACH naming the front-end's attach file.
TEST_F(LightweightBackends, InAttachModeBackendsJoinWithTheFiveArgumentsAndCanopyAttach) {
  const std::string attach = (dir_ / "attach").string();
  auto topology = canopy::generate_topology("b:2x2");
  ASSERT_TRUE(topology) << topology.error();
  canopy::LaunchOptions options;
  options.topology = *topology;
  options.attach_file = attach;
  auto network = canopy::Network::launch(std::move(options));
  ASSERT_TRUE(network) << network.error();
  network_ = std::move(*network);
  const canopy::Topology& tree = network_->topology();
  std::vector<pid_t> pids;
  for (canopy::Rank r = 0; r < kBackends; ++r) {
    const auto& parent = tree.at(*tree.at(r).parent);
    pids.push_back(spawn({kBackend, "myarg", tree.address_of(parent.host), std::to_string(parent.port),
                          std::to_string(parent.rank), "localhost", std::to_string(r)},
                         {"CANOPY_ATTACH=" + attach}, {}, (dir_ / ("stderr." + std::to_string(r))).string()));
    ASSERT_GT(pids.back(), 0);
  }
  ASSERT_TRUE(network_->wait_for_backends(20s));
  create_streams();
  broadcast(mrnet(kWaves, "%d %d", 3, 1));
  auto waves = one_from_each();
  EXPECT_EQ(waves.size(), static_cast<std::size_t>(kBackends));
  for (auto& [rank, reply] : waves) {
    int value = -1;
    ASSERT_EQ(reply.packet->unpack("%d", &value), 0);
    EXPECT_EQ(value, 1000 * static_cast<int>(rank));
  }
  send_to(3, mrnet(kWhoami, ""));
  auto whoami = next();
  ASSERT_TRUE(whoami);
  unsigned int id = 0, rank = 0;
  char* arg = nullptr;
  int argc = 0;
  ASSERT_EQ(whoami->packet->unpack("%ud %ud %s %d", &id, &rank, &arg, &argc), 0);
  EXPECT_EQ(id, 3u);
  EXPECT_EQ(rank, 3u);
  EXPECT_EQ(argc, 7);
  std::free(arg);
  finish();
  for (canopy::Rank r = 0; r < kBackends; ++r) {
    const int status = wait_exit(pids[r], 10s);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "back-end " << r << ": status " << status << ", " << slurp(dir_ / ("stderr." + std::to_string(r)));
  }
}

// MRNet's attach mode proper (Canopy's open attach): the front-end names no back-end;
// the tool starts C back-ends under ranks of its own, each with the leaf commnode it
// chose (host, port and rank from the front-end's live tree), and each joins there.
TEST_F(LightweightBackends, InAnOpenAttachBackendsJoinUnderTheParentAndRankTheirArgumentsGive) {
  const std::string attach = (dir_ / "attach").string();
  auto topology = canopy::generate_topology("b:2", {}, canopy::Leaves::commnodes);
  ASSERT_TRUE(topology) << topology.error();
  canopy::LaunchOptions options;
  options.topology = *topology;
  options.attach_file = attach;
  options.open_attach = true;
  auto network = canopy::Network::launch(std::move(options));
  ASSERT_TRUE(network) << network.error();
  network_ = std::move(*network);
  std::vector<canopy::NodeStatus> leaves;
  for (const auto& n : network_->status()) {
    if (n.role == canopy::Role::commnode) leaves.push_back(n);
  }
  ASSERT_EQ(leaves.size(), 2u);
  std::vector<pid_t> pids;
  std::map<canopy::Rank, canopy::Rank> chosen;
  for (canopy::Rank i = 0; i < kBackends; ++i) {
    const auto& parent = leaves[i % 2];
    ASSERT_GT(parent.port, 0) << "commnode " << parent.rank << " has no port in status()";
    const canopy::Rank rank = 1000 + i;
    chosen[rank] = parent.rank;
    pids.push_back(spawn({kBackend, "myarg", parent.host, std::to_string(parent.port), std::to_string(parent.rank),
                          "localhost", std::to_string(rank)},
                         {"CANOPY_ATTACH=" + attach}, {}, (dir_ / ("stderr." + std::to_string(rank))).string()));
  }
  std::map<canopy::Rank, canopy::Rank> parents;
  for (auto deadline = std::chrono::steady_clock::now() + 20s;
       parents.size() < chosen.size() && std::chrono::steady_clock::now() < deadline;) {
    parents.clear();
    for (const auto& n : network_->status()) {
      if (n.role == canopy::Role::backend && n.member && n.parent) parents[n.rank] = *n.parent;
    }
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(parents, chosen) << slurp(dir_ / "stderr.1000");
  create_streams();
  broadcast(mrnet(kWaves, "%d %d", 3, 1));
  auto waves = one_from_each();
  ASSERT_EQ(waves.size(), static_cast<std::size_t>(kBackends));
  for (auto& [rank, reply] : waves) {
    int value = -1;
    ASSERT_EQ(reply.packet->unpack("%d", &value), 0);
    EXPECT_EQ(value, 1000 * static_cast<int>(rank));
  }
  finish(1000);
  for (std::size_t i = 0; i < pids.size(); ++i) {
    const int status = wait_exit(pids[i], 10s);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "back-end " << 1000 + i << ": status " << status;
  }
}

// A back-end started wrongly, by hand, with no tree to join.
class LightweightBackendArguments : public ProcessTest {
 protected:
  Exit run(const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {}) {
    char path[] = "/tmp/canopy-mrnet-lw-err-XXXXXX";
    const int fd = mkstemp(path);
    close(fd);
    std::vector<std::string> argv{kBackend};
    argv.insert(argv.end(), args.begin(), args.end());
    const pid_t pid = spawn(argv, extra_env, {"CANOPY_PARENT", "CANOPY_RANK", "CANOPY_ATTACH"}, path);
    Exit exit;
    if (pid <= 0) {
      ADD_FAILURE() << "cannot start " << kBackend;
    } else {
      exit.status = wait_exit(pid, 10s);
    }
    exit.err = slurp(path);
    unlink(path);
    return exit;
  }
  static bool failed(const Exit& exit) { return exit.status != -1 && WIFEXITED(exit.status) && WEXITSTATUS(exit.status) != 0; }
};

TEST_F(LightweightBackendArguments, TooFewArgumentsExitNonZeroSayingWhatWasExpected) {
  for (const auto& args : std::vector<std::vector<std::string>>{{}, {"myarg", "host", "1", "1000000"}}) {
    auto exit = run(args);
    EXPECT_TRUE(failed(exit)) << "status " << exit.status;
    EXPECT_NE(exit.err.find("expected at least 6 arguments (the program and the five), got " +
                            std::to_string(args.size() + 1)),
              std::string::npos)
        << exit.err;
    EXPECT_NE(exit.err.find("parent host, parent port, parent rank, own host, own rank"), std::string::npos)
        << exit.err;
  }
}

TEST_F(LightweightBackendArguments, ARankThatIsNotANumberExitsNonZeroSayingSo) {
  auto exit = run({"myarg", "host", "1", "1000000", "host", "first"});
  EXPECT_TRUE(failed(exit)) << "status " << exit.status;
  EXPECT_NE(exit.err.find("the last argument, the back-end's own rank, is 'first', not a rank"), std::string::npos)
      << exit.err;
}

TEST_F(LightweightBackendArguments, StartedByTheToolWithoutCanopyAttachExitsNonZeroNamingIt) {
  auto exit = run({"myarg", "host", "1", "1000000", "host", "0"});
  EXPECT_TRUE(failed(exit)) << "status " << exit.status;
  EXPECT_NE(exit.err.find("CANOPY_ATTACH does not name an attach file"), std::string::npos) << exit.err;
  EXPECT_NE(exit.err.find("docs/mrnet.md"), std::string::npos) << exit.err;
}

TEST_F(LightweightBackendArguments, AnAttachFileThatIsNotThereIsNamed) {
  auto exit = run({"myarg", "host", "1", "1000000", "host", "0"}, {"CANOPY_ATTACH=/nonexistent/canopy.attach"});
  EXPECT_TRUE(failed(exit)) << "status " << exit.status;
  EXPECT_NE(exit.err.find("cannot join the tree as back-end 0: "), std::string::npos) << exit.err;
  EXPECT_NE(exit.err.find("/nonexistent/canopy.attach"), std::string::npos) << exit.err;
}

// The arguments themselves, without processes.
TEST(MrnetBackendArgs, TheLastFiveAreTheParentsHostPortAndRankThenTheOwnHostAndRank) {
  const char* argv[] = {"be", "--tool", "x", "parent.example", "4711", "1000001", "me.example", "12"};
  auto args = MRN::layer::parse_backend_args(8, argv);
  ASSERT_TRUE(args) << args.error();
  EXPECT_EQ(args->parent_host, "parent.example");
  EXPECT_EQ(args->parent_port, "4711");
  EXPECT_EQ(args->parent_rank, "1000001");
  EXPECT_EQ(args->host, "me.example");
  EXPECT_EQ(args->rank, 12u);
  EXPECT_EQ(MRN::layer::tool_argc(8), 3);
}

TEST(MrnetBackendArgs, RanksAreDecimalAndFitThirtyTwoBits) {
  for (const char* bad : {"", "-1", "1x", " 1", "4294967296", "0x10"}) {
    const char* argv[] = {"be", "h", "1", "2", "h", bad};
    EXPECT_FALSE(MRN::layer::parse_backend_args(6, argv)) << "'" << bad << "'";
  }
  const char* argv[] = {"be", "h", "1", "2", "h", "4294967295"};
  auto args = MRN::layer::parse_backend_args(6, argv);
  ASSERT_TRUE(args) << args.error();
  EXPECT_EQ(args->rank, 4294967295u);
}

TEST(MrnetBackendArgs, StartedByCanopyTheArgumentsRankMustBeCanopys) {
  setenv("CANOPY_PARENT", "127.0.0.1:1", 1);
  setenv("CANOPY_RANK", "3", 1);
  char* argv[] = {const_cast<char*>("be"), const_cast<char*>("h"), const_cast<char*>("1"), const_cast<char*>("2"),
                  const_cast<char*>("h"), const_cast<char*>("4")};
  auto backend = MRN::layer::connect_backend(6, argv);
  unsetenv("CANOPY_PARENT");
  unsetenv("CANOPY_RANK");
  ASSERT_FALSE(backend);
  EXPECT_NE(backend.error().find("rank is 4 in its arguments but 3 in CANOPY_RANK"), std::string::npos)
      << backend.error();
}

// The library a C back-end links exports MRNet's C API and nothing of Canopy's.
TEST(MrnetLightweightLibrary, ExportsOnlyMrnetsCApi) {
  const std::set<std::string> api{
      "Network_CreateNetworkBE", "delete_Network_t", "Network_get_LocalHostName", "Network_get_LocalPort",
      "Network_get_LocalRank", "Network_get_NetworkTopology", "Network_is_ShutDown", "Network_waitfor_ShutDown",
      "Network_recv", "Network_recv_nonblock", "Network_get_Stream", "Network_set_OutputLevel",
      "Network_set_DebugLogDir", "Stream_get_Id", "Stream_send", "Stream_send_packet", "Stream_flush", "Stream_recv",
      "Stream_is_Closed", "new_Packet_t_2", "Packet_get_Tag", "Packet_set_Tag", "Packet_get_StreamId",
      "Packet_set_StreamId", "Packet_get_FormatString", "Packet_unpack", "Packet_unpack_valist", "delete_Packet_t",
      "Packet_set_DestroyData", "get_Version", "NetworkTopology_get_NumNodes", "NetworkTopology_get_Root",
      "NetworkTopology_find_Node", "NetworkTopology_get_TopologyStringPtr", "NetworkTopology_print",
      "NetworkTopology_Node_get_HostName", "NetworkTopology_Node_get_Port", "NetworkTopology_Node_get_Rank",
      "NetworkTopology_Node_get_Parent", "NetworkTopology_Node_find_SubTreeHeight", "NetworkTopology_Node_is_BackEnd",
      "mrn_printf", "Thread_Create", "Thread_GetId", "Thread_Join", "Thread_Cancel", "Thread_Exit"};
  auto [out, status] = canopy::testing::shell("nm -D --defined-only '" + kLibrary + "' | awk '{print $3}'");
  ASSERT_EQ(status, 0);
  std::set<std::string> exported;
  std::istringstream lines(out);
  for (std::string name; std::getline(lines, name);) {
    if (!name.empty()) exported.insert(name);
  }
  EXPECT_EQ(exported, api);
}

}  // namespace
