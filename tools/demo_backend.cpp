// canopy-demo-backend: the back-end of `canopy run`'s demo workload
// (tools/demo_protocol.h, docs/demo.md). Exits when the network shuts down.
#include <chrono>
#include <cstdio>
#include <thread>

#include "canopy/backend.h"
#include "demo_protocol.h"

int main() {
  // Echoes are answered on the loop thread, without waking this one: the round-trip
  // benchmark measures the tree, not two thread switches per back-end.
  auto backend = canopy::Backend::connect([](canopy::Backend& be, const canopy::Received& in) {
    if (in.packet.tag() != canopy::demo::kEchoTag) return false;
    (void)be.send(in.stream, in.packet);
    return true;
  });
  if (!backend) {
    std::fprintf(stderr, "canopy-demo-backend: %s\n", backend.error().c_str());
    return 1;
  }
  auto& be = **backend;
  while (true) {
    auto in = be.receive(std::chrono::hours(24));
    if (!in) return 0;  // the network stopped
    if (!*in) continue;
    const auto& [stream, packet] = **in;
    std::int32_t waves = 0, interval_ms = 0, shape = 0;
    if (packet.tag() != canopy::demo::kStartTag || !packet.unpack("%d %d %d", waves, interval_ms, shape)) {
      std::fprintf(stderr, "canopy-demo-backend %u: ignoring a packet \"%s\" with tag %d\n", be.rank(),
                   packet.format().c_str(), packet.tag());
      continue;
    }
    for (std::int32_t w = 0; w < waves; ++w) {
      std::int32_t v = canopy::demo::demo_value(w, be.rank());
      canopy::Packet out = shape ? canopy::Packet{w, {std::vector<std::int32_t>{v}}} : canopy::Packet{w, {v}};
      if (!be.send(stream, out)) return 0;
      if (interval_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    }
  }
}
