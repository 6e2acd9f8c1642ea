// MPICH's ranks from hydra's process tree (stack/hydra.h), on snapshots of made-up
// processes; real mpiexec.hydra jobs are in stack_cli_test (StackCli.AnMpichJob...) and
// tests/netns/stack_hydra_over_namespaces.sh.
#include <gtest/gtest.h>

#include "stack/hydra.h"

namespace canopy::stack {
namespace {

constexpr pid_t kLauncher = 100, kProxy = 101;

ProcessEntry launcher() { return {.pid = kLauncher, .parent = 1, .name = "mpiexec.hydra", .argv = {"mpiexec.hydra"}}; }
ProcessEntry proxy(pid_t pid = kProxy, pid_t parent = kLauncher) {
  return {.pid = pid, .parent = parent, .name = "hydra_pmi_proxy",
          .argv = {"/usr/bin/hydra_pmi_proxy", "--control-port", "vm:46317", "--proxy-id", "0"}};
}
ProcessEntry rank(pid_t pid, std::uint32_t r, std::uint32_t size, pid_t parent = kProxy) {
  return {.pid = pid, .parent = parent, .name = "app", .argv = {"./app"}, .executable = "/work/app",
          .pmi_rank = r, .pmi_size = size};
}

TEST(Hydra, TheRanksAreTheChildrenOfTheLaunchersProxiesByPmiRank) {
  const std::vector<ProcessEntry> ps{launcher(), proxy(), rank(203, 2, 3), rank(201, 0, 3), rank(202, 1, 3),
                                     // a rank's own child inherits PMI_RANK: not a rank
                                     rank(300, 1, 3, 202),
                                     // another job's proxy and rank
                                     proxy(401, 400), rank(402, 0, 1, 401)};
  ASSERT_TRUE(leads_hydra_proxies(kLauncher, ps));
  auto job = hydra_ranks(kLauncher, ps, "vm");
  ASSERT_TRUE(job) << job.error();
  EXPECT_EQ(job->size, 3u);
  ASSERT_EQ(job->ranks.size(), 3u);
  for (std::uint32_t r = 0; r < 3; ++r) {
    EXPECT_EQ(job->ranks[r].rank, r);
    EXPECT_EQ(job->ranks[r].pid, static_cast<pid_t>(201 + r));
    EXPECT_EQ(job->ranks[r].host, "vm");
    EXPECT_EQ(job->ranks[r].executable, "/work/app");
  }
  EXPECT_TRUE(job->remote.empty());
}

TEST(Hydra, AProxyStartedThroughSshIsARemoteHostWhoseRanksAreNotHere) {
  ProcessEntry ssh{.pid = 110, .parent = kLauncher, .name = "ssh",
                   .argv = {"/usr/bin/ssh", "-x", "node2", "\"/usr/bin/hydra_pmi_proxy\"", "--control-port",
                            "vm:46317", "--proxy-id", "1"}};
  const std::vector<ProcessEntry> ps{launcher(), proxy(), ssh, rank(201, 0, 4), rank(202, 1, 4)};
  auto job = hydra_ranks(kLauncher, ps, "vm");
  ASSERT_TRUE(job) << job.error();
  EXPECT_EQ(job->size, 4u);
  EXPECT_EQ(job->ranks.size(), 2u);
  ASSERT_EQ(job->remote.size(), 1u);
  EXPECT_EQ(job->remote[0].host, "node2");
  EXPECT_EQ(job->remote[0].via, "ssh");
  EXPECT_EQ(job->remote[0].control_port, "vm:46317");
  EXPECT_EQ(job->remote[0].proxy_id, "1");
  // Only remote proxies: still hydra's.
  EXPECT_TRUE(leads_hydra_proxies(kLauncher, {launcher(), ssh}));
}

// What canopy-stackd --list-hydra finds on another host: the ranks below the proxy of
// the job's control port and the given id, even where the other hosts' proxies are
// seen too (network namespaces of one machine), and a proxy's options read from a
// `sh -c "..."` command line as well as from its own.
TEST(Hydra, ARemoteProxysRanksAreThoseOfItsControlPortAndId) {
  ProcessEntry other_host = proxy(101, 100);  // --proxy-id 0
  ProcessEntry here{.pid = 111, .parent = 110, .name = "hydra_pmi_proxy",
                    .argv = {"/bin/sh", "-c", "\"/usr/bin/hydra_pmi_proxy\" --control-port vm:46317 --proxy-id 1"}};
  ProcessEntry other_job{.pid = 121, .parent = 120, .name = "hydra_pmi_proxy",
                         .argv = {"/usr/bin/hydra_pmi_proxy", "--control-port", "vm:5000", "--proxy-id", "1"}};
  const std::vector<ProcessEntry> ps{other_host, rank(201, 0, 4, 101), rank(202, 1, 4, 101),
                                     here,       rank(203, 2, 4, 111), rank(204, 3, 4, 111),
                                     other_job,  rank(301, 1, 2, 121)};
  auto job = proxy_ranks("vm:46317", "1", ps, "node2");
  ASSERT_TRUE(job) << job.error();
  EXPECT_EQ(job->size, 4u);
  ASSERT_EQ(job->ranks.size(), 2u);
  EXPECT_EQ(job->ranks[0].rank, 2u);
  EXPECT_EQ(job->ranks[0].pid, 203);
  EXPECT_EQ(job->ranks[0].host, "node2");
  EXPECT_EQ(job->ranks[1].rank, 3u);
  auto none = proxy_ranks("vm:46317", "7", ps, "node2");
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("no hydra_pmi_proxy 7 of vm:46317 on node2"), std::string::npos) << none.error();
}

TEST(Hydra, AProcessWithoutProxiesIsNoHydraLauncher) {
  // Another job's proxy and rank on the same host do not make it one.
  const std::vector<ProcessEntry> ps{launcher(),
                                     {.pid = 150, .parent = kLauncher, .name = "sleep", .argv = {"sleep"}},
                                     proxy(401, 400), rank(402, 0, 1, 401)};
  EXPECT_FALSE(leads_hydra_proxies(kLauncher, ps));
  auto job = hydra_ranks(kLauncher, ps, "vm");
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error_kind(), ErrorKind::invalid_input);
  EXPECT_NE(job.error().find("no hydra_pmi_proxy child"), std::string::npos) << job.error();
}

TEST(Hydra, RanksNotStartedOrInconsistentAreSaid) {
  // The proxy has forked, but no child has exec'd with PMI_RANK yet.
  ProcessEntry forked{.pid = 201, .parent = kProxy, .name = "hydra_pmi_proxy"};
  auto early = hydra_ranks(kLauncher, {launcher(), proxy(), forked}, "vm");
  ASSERT_FALSE(early);
  EXPECT_NE(early.error().find("no rank with PMI_RANK yet"), std::string::npos) << early.error();

  auto twice = hydra_ranks(kLauncher, {launcher(), proxy(), rank(201, 0, 2), rank(202, 0, 2)}, "vm");
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().find("processes 201 and 202"), std::string::npos) << twice.error();
  EXPECT_NE(twice.error().find("both have PMI_RANK 0"), std::string::npos) << twice.error();

  auto sizes = hydra_ranks(kLauncher, {launcher(), proxy(), rank(201, 0, 2), rank(202, 1, 3)}, "vm");
  ASSERT_FALSE(sizes);
  EXPECT_NE(sizes.error().find("disagree on PMI_SIZE (2 and 3)"), std::string::npos) << sizes.error();

  auto out_of_range = hydra_ranks(kLauncher, {launcher(), proxy(), rank(201, 5, 2)}, "vm");
  ASSERT_FALSE(out_of_range);
  EXPECT_NE(out_of_range.error().find("PMI_RANK 5, outside 0..1"), std::string::npos) << out_of_range.error();
}

}  // namespace
}  // namespace canopy::stack
