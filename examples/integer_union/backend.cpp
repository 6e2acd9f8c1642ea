// integer_union's back-end: on the start packet (workload.h) it sends its waves of
// pseudo-random integers, then its whole set on the check stream, and, if asked,
// records what it sent in <dir>/backend-<rank>.txt (one wave per line).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include <canopy/backend.h>

#include "workload.h"

namespace {

// Sends the workload; false if the network has stopped.
bool run(canopy::Backend& be, canopy::StreamId stream, const canopy::Packet& start) {
  std::int32_t waves = 0, per_wave = 0;
  canopy::StreamId check_stream = 0;
  std::string record;
  if (auto ok = start.unpack("%d %d %ud %s", waves, per_wave, check_stream, record); !ok) {
    std::fprintf(stderr, "integer_union_backend %u: bad start packet: %s\n", be.rank(), ok.error().c_str());
    return true;
  }
  std::ofstream out;
  if (!record.empty()) {
    auto path = record + "/backend-" + std::to_string(be.rank()) + ".txt";
    out.open(path, std::ios::trunc);
    if (!out) std::fprintf(stderr, "integer_union_backend %u: cannot write %s\n", be.rank(), path.c_str());
  }

  std::vector<std::int32_t> all;
  auto plan = integer_union::backend_waves(be.rank(), waves, per_wave);
  for (std::size_t w = 0; w < plan.size(); ++w) {
    if (!be.send(stream, canopy::Packet{static_cast<canopy::Tag>(w), {plan[w]}})) return false;
    all.insert(all.end(), plan[w].begin(), plan[w].end());
    if (out) {
      for (auto x : plan[w]) out << x << ' ';
      out << '\n';
    }
  }
  out.close();  // on disk before the front-end can know we are done
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return static_cast<bool>(be.send(check_stream, canopy::Packet{integer_union::kFullSetTag, {all}}));
}

}  // namespace

int main() {
  auto backend = canopy::Backend::connect();
  if (!backend) {
    std::fprintf(stderr, "integer_union_backend: %s\n", backend.error().c_str());
    return 1;
  }
  auto& be = **backend;
  while (true) {
    auto in = be.receive(std::chrono::minutes(10));
    if (!in) return 0;  // the network has shut down
    if (!*in || (*in)->packet.tag() != integer_union::kStartTag) continue;
    if (!run(be, (*in)->stream, (*in)->packet)) return 0;
  }
}
