// The address a front-end tells its children (core/reachable.h, issue 49): never
// a loopback one for a child on another host; --advertise takes only a numeric
// address of this host. Over namespaces, the whole of it: tests/netns/
// frontend_behind_loopback.sh.
#include <gtest/gtest.h>

#include "canopy/topology.h"
#include "core/reachable.h"
#include "transport/addresses.h"

using canopy::Topology;
using canopy::core::choose_reachable_address;

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
  auto chosen = choose_reachable_address(t, t.root().rank, "");
  ASSERT_TRUE(chosen) << chosen.error();
  EXPECT_TRUE(chosen->empty());
  EXPECT_EQ(t.address_of("localhost"), "127.0.0.1");
}

TEST(Reachable, AdvertiseTakesANumericAddressOfThisHostOnly) {
  Topology t = tree(kLocal);
  auto named = choose_reachable_address(t, t.root().rank, "127.0.0.1");
  ASSERT_TRUE(named) << named.error();
  EXPECT_EQ(t.address_of("localhost"), "127.0.0.1");
  auto name = choose_reachable_address(t, t.root().rank, "localhost");
  ASSERT_FALSE(name);
  EXPECT_NE(name.error().find("not a numeric IPv4 or IPv6 address"), std::string::npos) << name.error();
  auto foreign = choose_reachable_address(t, t.root().rank, "192.0.2.7");  // TEST-NET-1: on no interface here
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.error().find("not an address of this host (its addresses: "), std::string::npos) << foreign.error();
}

// Other hosts that resolve here to loopback addresses are this machine: the
// front-end keeps its address (tests on one machine listen on loopback only). A host
// on another machine (a TEST-NET address, never connected to) makes it choose an
// address of its own, or say why it cannot.
TEST(Reachable, AFrontEndOnLoopbackChoosesAnAddressOfItsOwnOnlyForAnotherMachine) {
  constexpr const char* kFar = R"(
hosts:
  - {name: far, address: FAR}
nodes:
  - {rank: 1000000, role: frontend, host: localhost}
  - {rank: 0, role: backend, host: far}
edges:
  - {parent: 1000000, children: [0]}
)";
  auto with = [&](const std::string& address) {
    std::string yaml = kFar;
    yaml.replace(yaml.find("FAR"), 3, address);
    return tree(yaml.c_str());
  };
  Topology same = with("127.0.0.2");
  auto kept = choose_reachable_address(same, same.root().rank, "");
  ASSERT_TRUE(kept) << kept.error();
  EXPECT_TRUE(kept->empty()) << (*kept)[0];
  EXPECT_EQ(same.address_of("localhost"), "127.0.0.1");

  Topology other = with("192.0.2.1");
  auto chosen = choose_reachable_address(other, other.root().rank, "");
  const auto here = canopy::transport::local_addresses();
  if (here.empty() || canopy::transport::is_loopback(here.front())) {
    ASSERT_FALSE(chosen);
    EXPECT_NE(chosen.error().find("this host has no other address"), std::string::npos) << chosen.error();
    return;
  }
  ASSERT_TRUE(chosen) << chosen.error();
  ASSERT_EQ(chosen->size(), 1u);
  const std::string told = other.address_of("localhost");
  EXPECT_FALSE(canopy::transport::is_loopback(told)) << told;
  EXPECT_NE(std::find(here.begin(), here.end(), told), here.end()) << told << " is not an address of this host";
  EXPECT_NE((*chosen)[0].find("the front-end's host 'localhost' resolves to 127.0.0.1 here"), std::string::npos)
      << (*chosen)[0];
}

// A commnode does the same when its part of the tree arrives (issue 49): on a host
// whose name resolves to loopback there, with children or adopters on other hosts,
// it listens on an address of its own they can reach, and tells its children that.
TEST(Reachable, ACommnodeOnLoopbackChoosesAnAddressOfItsOwnOrSaysWhy) {
  Topology t = tree(R"(
hosts:
  - {name: far, address: 192.0.2.1}
  - {name: login, address: 127.0.0.3}
nodes:
  - {rank: 1000000, role: frontend, host: login}
  - {rank: 1000001, role: commnode, host: localhost}
  - {rank: 0, role: backend, host: far}
  - {rank: 1, role: backend, host: localhost}
edges:
  - {parent: 1000000, children: [1000001]}
  - {parent: 1000001, children: [0, 1]}
)");
  auto chosen = choose_reachable_address(t, 1000001, "");
  const auto here = canopy::transport::local_addresses();
  if (here.empty() || canopy::transport::is_loopback(here.front())) {
    ASSERT_FALSE(chosen);
    EXPECT_NE(chosen.error().find("an address for host 'localhost' in the topology"), std::string::npos) << chosen.error();
    return;
  }
  ASSERT_TRUE(chosen) << chosen.error();
  ASSERT_EQ(chosen->size(), 1u);
  EXPECT_NE((*chosen)[0].find("the commnode 1000001's host 'localhost' resolves to 127.0.0.1 here"), std::string::npos)
      << (*chosen)[0];
  EXPECT_NE((*chosen)[0].find("an address for host 'localhost' in the topology"), std::string::npos) << (*chosen)[0];
  const std::string told = t.address_of("localhost");
  EXPECT_NE(std::find(here.begin(), here.end(), told), here.end()) << told << " is not an address of this host";
  // A commnode whose tree is all on its host keeps its address.
  Topology local = tree(R"(
nodes:
  - {rank: 1000000, role: frontend, host: localhost}
  - {rank: 1000001, role: commnode, host: localhost}
  - {rank: 0, role: backend, host: localhost}
edges:
  - {parent: 1000000, children: [1000001]}
  - {parent: 1000001, children: [0]}
)");
  auto kept = choose_reachable_address(local, 1000001, "");
  ASSERT_TRUE(kept) << kept.error();
  EXPECT_TRUE(kept->empty());
  EXPECT_EQ(local.address_of("localhost"), "127.0.0.1");
}
