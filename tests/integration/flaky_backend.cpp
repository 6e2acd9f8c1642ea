// A back-end for tests that misbehaves on request; otherwise it runs the demo
// workload like canopy-demo-backend.
//   flaky_backend exit-at-start RANK CODE     rank RANK exits with CODE before connecting
//   flaky_backend exit-after RANK WAVES CODE  rank RANK exits with CODE after WAVES waves
//   flaky_backend ignore-shutdown             every rank keeps running after shutdown
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "canopy/backend.h"
#include "demo_protocol.h"

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  long my_rank = std::strtol(std::getenv("CANOPY_RANK") ? std::getenv("CANOPY_RANK") : "-1", nullptr, 10);
  long target = argc > 2 ? std::strtol(argv[2], nullptr, 10) : -2;
  if (mode == "exit-at-start" && my_rank == target) return argc > 3 ? std::atoi(argv[3]) : 1;
  int exit_after = mode == "exit-after" && my_rank == target ? std::atoi(argv[3]) : -1;
  int exit_code = mode == "exit-after" && argc > 4 ? std::atoi(argv[4]) : 1;

  auto backend = canopy::Backend::connect();
  if (!backend) {
    std::fprintf(stderr, "flaky_backend: %s\n", backend.error().c_str());
    return 1;
  }
  auto& be = **backend;
  while (true) {
    auto in = be.receive(std::chrono::hours(1));
    if (!in) {
      if (mode == "ignore-shutdown") std::this_thread::sleep_for(std::chrono::hours(1));
      return 0;
    }
    if (!*in) continue;
    const auto& stream = (*in)->stream;
    const auto& packet = (*in)->packet;
    std::int32_t waves = 0, interval_ms = 0, shape = 0;
    if (!packet.unpack("%d %d %d", waves, interval_ms, shape)) continue;
    for (std::int32_t w = 0; w < waves; ++w) {
      if (w == exit_after) std::_Exit(exit_code);
      (void)be.send(stream, canopy::Packet{w, {canopy::demo::demo_value(w, be.rank())}});
      if (interval_ms) std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
    }
  }
}
