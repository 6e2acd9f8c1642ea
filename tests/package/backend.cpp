// The package test's back-end: answers every request (protocol.h) until the network
// shuts down.
#include <chrono>
#include <cstdio>

#include <canopy/backend.h>

#include "protocol.h"

int main() {
  auto backend = canopy::Backend::connect();
  if (!backend) {
    std::fprintf(stderr, "package_backend: %s\n", backend.error().c_str());
    return 1;
  }
  auto& be = **backend;
  while (true) {
    auto in = be.receive(std::chrono::seconds(60));
    if (!in) return 0;  // the network shut down
    if (!*in) continue;
    if ((*in)->packet.tag() != package_test::kAskTag) continue;
    if (!be.send((*in)->stream, canopy::Packet{package_test::kAskTag, {package_test::answer(be.rank())}})) return 0;
  }
}
