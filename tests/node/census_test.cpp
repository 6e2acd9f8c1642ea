// A service of a tool's own (census_service.h: options, messages, a public event)
// runs on every process of a real tree through the seam alone: its options reach
// every process in the launch plan, its messages ride the service envelope, and its
// event reaches the program by the one route of every public event.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "census_service.h"
#include "tree_harness.h"

namespace canopy::testing {
namespace {

using namespace std::chrono_literals;

FaultToleranceOptions no_healing() {
  FaultToleranceOptions fault;
  fault.enabled = false;
  return fault;
}

// A b:2^2 tree (the root, 2 commnodes, 4 back-ends) whose root counts with `options`.
struct CensusTree {
  explicit CensusTree(CensusOptions options)
      : tree("b:2^2", no_healing(), [this, options](Rank rank, core::ServiceContext& node) {
          auto service = std::make_unique<CensusService>(
              node, rank == 1000000 ? std::optional<CensusOptions>(options) : std::nullopt);
          census[rank] = service.get();
          return service;
        }) {}
  // The census events the front-end's program heard.
  std::vector<Event> heard() {
    std::vector<Event> out;
    for (const auto& e : tree.heard(tree.root()).published) {
      if (e.kind == Event::Kind::service && e.service == "census") out.push_back(e);
    }
    return out;
  }
  std::map<Rank, CensusService*> census;
  TreeHarness tree;
};

TEST(CensusService, ItsOptionsReachEveryProcessInTheLaunchPlan) {
  CensusTree t({.label = "tally", .count_commnodes = false});
  ASSERT_TRUE(t.tree.launch());
  for (const auto& n : t.tree.topology().nodes()) {
    const auto options = t.census.at(n.rank)->options();
    EXPECT_EQ(options.label, "tally") << "at " << n.rank;
    EXPECT_FALSE(options.count_commnodes) << "at " << n.rank;
  }
}

TEST(CensusService, ACensusCountsTheTreeAndReachesTheProgramAsAnEvent) {
  CensusTree t({.label = "all", .count_commnodes = true});
  ASSERT_TRUE(t.tree.launch());
  ASSERT_EQ(t.tree.root(), 1000000u);
  t.census.at(t.tree.root())->ask();
  ASSERT_TRUE(t.tree.run_until([&] { return !t.heard().empty(); }, 5s));
  const Event e = t.heard().front();
  EXPECT_EQ(e.detail, "all: round 1: 7 processes");
  EXPECT_EQ(e.rank, t.tree.root());
  EXPECT_NE(e.time, std::chrono::system_clock::time_point{});
  const std::string json = to_json(e);
  EXPECT_NE(json.find("\"event\":\"service\",\"rank\":1000000,\"service\":\"census\",\"detail\":\"all: round 1: 7 processes\""),
            std::string::npos)
      << json;
}

// The commnodes count with the options the root was given, which they read from the
// plan: without them they would count themselves, 7, not 5.
TEST(CensusService, EveryProcessCountsWithTheRootsOptions) {
  CensusTree t({.label = "leaves", .count_commnodes = false});
  ASSERT_TRUE(t.tree.launch());
  t.census.at(t.tree.root())->ask();
  ASSERT_TRUE(t.tree.run_until([&] { return !t.heard().empty(); }, 5s));
  EXPECT_EQ(t.heard().front().detail, "leaves: round 1: 5 processes");
  t.census.at(t.tree.root())->ask();
  ASSERT_TRUE(t.tree.run_until([&] { return t.heard().size() == 2; }, 5s));
  EXPECT_EQ(t.heard().back().detail, "leaves: round 2: 5 processes");
}

}  // namespace
}  // namespace canopy::testing
