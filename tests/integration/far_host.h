// A tree on another host, "far", whose address is loopback (127.0.0.2): its
// commnode and back-ends are started through the launcher template, so a test can
// see the launcher used, or stand a process of its own between parent and child,
// and still run anywhere. One commnode (1000001) with back-ends 0 and 1.
#pragma once

namespace canopy::testing {

inline constexpr const char* kFarTopologyYaml = R"(hosts:
  - {name: far, address: 127.0.0.2}
nodes:
  - {rank: 1000000, role: frontend}
  - {rank: 1000001, role: commnode, host: far}
  - {rank: 0, role: backend, host: far}
  - {rank: 1, role: backend, host: far}
edges:
  - {parent: 1000000, children: [1000001]}
  - {parent: 1000001, children: [0, 1]}
)";

}  // namespace canopy::testing
