// The launch plan on the wire: each service's options travel as an opaque entry
// (service id, bytes) the core carries without looking inside; the gossip service
// encodes and decodes its own.
#include <gtest/gtest.h>

#include <capnp/message.h>

#include <string>

#include "core/codec.h"
#include "membership/gossip.h"

using canopy::GossipOptions;
using canopy::GossipSchedule;
using canopy::core::LaunchPlan;
using canopy::membership::GossipService;
using namespace std::chrono_literals;

namespace {

LaunchPlan through_the_wire(const LaunchPlan& plan) {
  capnp::MallocMessageBuilder message;
  auto t = message.initRoot<canopy::wire::Topology>();
  canopy::core::encode_plan(plan, t);
  auto decoded = canopy::core::decode_plan(t.asReader());
  EXPECT_TRUE(decoded) << decoded.error();
  return decoded ? *decoded : LaunchPlan{};
}

}  // namespace

TEST(PlanCodec, EveryServicesOptionsArriveByteForByte) {
  LaunchPlan plan;
  plan.service_options[7] = std::string("\0\x01\xffgossip", 9);
  plan.service_options[42] = "a tool's own service";
  const auto got = through_the_wire(plan);
  EXPECT_EQ(got.service_options, plan.service_options);
}

TEST(PlanCodec, NoOptionsIsNoEntry) {
  EXPECT_TRUE(through_the_wire(LaunchPlan{}).service_options.empty());
}

TEST(PlanCodec, GossipOptionsTravelInTheGossipServicesOwnEncoding) {
  GossipOptions options;
  options.schedule = GossipSchedule::dbrr;
  options.period = 250ms;
  options.max_hangup = 700ms;
  options.ping_timeout = 1500ms;
  const auto decoded = GossipService::decode_options(GossipService::encode_options(options));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->schedule, GossipSchedule::dbrr);
  EXPECT_EQ(decoded->period, 250ms);
  EXPECT_EQ(decoded->max_hangup, 700ms);
  EXPECT_EQ(decoded->ping_timeout, 1500ms);
}

TEST(PlanCodec, GossipOptionsThatAreNotOptionsAreRefused) {
  EXPECT_FALSE(GossipService::decode_options(""));
  EXPECT_FALSE(GossipService::decode_options("not a multiple of 8"));
  EXPECT_FALSE(GossipService::decode_options(std::string(16, '\xff')));
}
