// The address a front-end tells its children (frontend/reachable.h, issue 49): never
// a loopback one for a child on another host; --advertise takes only a numeric
// address of this host. Over namespaces, the whole of it: tests/netns/
// frontend_behind_loopback.sh.
#include <gtest/gtest.h>

#include "canopy/topology.h"
#include "frontend/reachable.h"
#include "transport/addresses.h"

using canopy::Topology;
using canopy::frontend::choose_reachable_address;

namespace {

Topology tree(const char* yaml) {
  auto t = canopy::parse_topology_yaml(yaml, "test");
  EXPECT_TRUE(t) << t.error();
  return std::move(*t);
}

constexpr const char* kLocal = R"(
nodes:
  - {rank: 1000000, role: frontend, host: localhost}
  - {rank: 0, role: backend, host: localhost}
edges:
  - {parent: 1000000, children: [0]}
)";

}  // namespace

TEST(Reachable, AddressesAreTold) {
  EXPECT_TRUE(canopy::transport::is_loopback("127.0.1.1"));
  EXPECT_TRUE(canopy::transport::is_loopback("::1"));
  EXPECT_FALSE(canopy::transport::is_loopback("10.0.0.1"));
  EXPECT_FALSE(canopy::transport::is_loopback("localhost")) << "a name is not an address";
  EXPECT_EQ(canopy::transport::resolve("127.0.0.1"), std::vector<std::string>{"127.0.0.1"});
  EXPECT_EQ(canopy::transport::source_towards("127.0.0.1"), "127.0.0.1");
  const auto here = canopy::transport::local_addresses();
  ASSERT_FALSE(here.empty());
  EXPECT_TRUE(canopy::transport::is_loopback(here.back())) << "loopback addresses come last";
}

TEST(Reachable, ATreeOnOneHostKeepsItsAddress) {
  Topology t = tree(kLocal);
  auto chosen = choose_reachable_address(t, "");
  ASSERT_TRUE(chosen) << chosen.error();
  EXPECT_TRUE(chosen->empty());
  EXPECT_EQ(t.address_of("localhost"), "127.0.0.1");
}

TEST(Reachable, AdvertiseTakesANumericAddressOfThisHostOnly) {
  Topology t = tree(kLocal);
  auto named = choose_reachable_address(t, "127.0.0.1");
  ASSERT_TRUE(named) << named.error();
  EXPECT_EQ(t.address_of("localhost"), "127.0.0.1");
  auto name = choose_reachable_address(t, "localhost");
  ASSERT_FALSE(name);
  EXPECT_NE(name.error().find("not a numeric IPv4 or IPv6 address"), std::string::npos) << name.error();
  auto foreign = choose_reachable_address(t, "192.0.2.7");  // TEST-NET-1: on no interface here
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.error().find("not an address of this host (its addresses: "), std::string::npos) << foreign.error();
}

// A remote host the front-end reaches through loopback only (it resolves to
// 127.0.0.2): no address of the front-end would do better, and none is chosen that
// is not this host's.
TEST(Reachable, AFrontEndOnLoopbackChoosesAnAddressOfItsOwnOrSaysWhy) {
  Topology t = tree(R"(
hosts:
  - {name: far, address: 127.0.0.2}
nodes:
  - {rank: 1000000, role: frontend, host: localhost}
  - {rank: 0, role: backend, host: far}
edges:
  - {parent: 1000000, children: [0]}
)");
  auto chosen = choose_reachable_address(t, "");
  ASSERT_TRUE(chosen) << chosen.error();
  ASSERT_EQ(chosen->size(), 1u);
  const auto here = canopy::transport::local_addresses();
  const std::string told = t.address_of("localhost");
  EXPECT_NE(std::find(here.begin(), here.end(), told), here.end()) << told << " is not an address of this host";
  EXPECT_NE((*chosen)[0].find("'far' resolves to 127.0.0.2, a loopback address"), std::string::npos) << (*chosen)[0];
}
