// integer_addition's back-end, started by its parent in the tree: for every request
// (one int64, the round r) it answers with its rank + r.
#include <chrono>
#include <cstdio>

#include <canopy/backend.h>

int main() {
  auto backend = canopy::Backend::connect();  // reads what the parent put in the environment
  if (!backend) {
    std::fprintf(stderr, "integer_addition_backend: %s\n", backend.error().c_str());
    return 1;
  }
  auto& be = **backend;
  while (true) {
    auto in = be.receive(std::chrono::minutes(10));
    if (!in) return 0;    // the network has shut down
    if (!*in) continue;   // nothing yet
    std::int64_t round = 0;
    if (auto ok = (*in)->packet.unpack("%ld", round); !ok) {
      std::fprintf(stderr, "integer_addition_backend %u: %s\n", be.rank(), ok.error().c_str());
      continue;
    }
    std::int64_t answer = static_cast<std::int64_t>(be.rank()) + round;
    if (!be.send((*in)->stream, canopy::Packet{(*in)->packet.tag(), {answer}})) return 0;
  }
}
