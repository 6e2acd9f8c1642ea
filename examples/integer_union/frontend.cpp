// integer_union's front-end: the back-ends send waves of integers up a stream with
// the built-in stateful filter incremental_union, which passes on, per wave, only
// the integers no earlier wave brought. The front-end checks that
//   - no integer comes out twice (each output holds only new integers), and
//   - everything that came out, together, is exactly the union of what the back-ends
//     sent: as the back-ends report it (their whole sets, merged on a second stream by
//     the stateless `union` filter) and as the front-end recomputes it (workload.h).
//
//   integer_union_frontend [--tree SPEC] [--waves N] [--record DIR]
//     --tree    default b:2^2 (2 commnodes, 4 back-ends)
//     --waves   waves each back-end sends, default 5 (25 integers each, from 0 to 499)
//     --record  each back-end writes what it sent to DIR/backend-<rank>.txt
//
// The back-end program is found beside this program; canopy-commnode on PATH or in
// $CANOPY_COMMNODE.
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>

#include <canopy/frontend.h>

#include "workload.h"

namespace {

constexpr int kPerWave = 25;

int fail(const std::string& message) {
  std::cerr << "integer_union_frontend: " << message << "\n";
  return 1;
}

std::string describe(const std::set<std::int32_t>& s) {
  std::string out = std::to_string(s.size()) + " integers";
  if (!s.empty()) out += " from " + std::to_string(*s.begin()) + " to " + std::to_string(*s.rbegin());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec = "b:2^2", record;
  int waves = 5;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 < argc && arg == "--tree") {
      spec = argv[++i];
    } else if (i + 1 < argc && arg == "--waves") {
      waves = std::stoi(argv[++i]);
    } else if (i + 1 < argc && arg == "--record") {
      record = std::filesystem::absolute(argv[++i]).string();
      std::filesystem::create_directories(record);
    } else {
      std::cerr << "usage: integer_union_frontend [--tree SPEC] [--waves N] [--record DIR]\n";
      return 2;
    }
  }
  if (waves < 1) return fail("--waves must be at least 1");
  auto topology = canopy::generate_topology(spec);
  if (!topology) return fail(topology.error());

  canopy::LaunchOptions options;
  options.topology = *topology;
  options.backend_argv = {
      (std::filesystem::canonical("/proc/self/exe").parent_path() / "integer_union_backend").string()};
  auto network = canopy::Network::launch(std::move(options));
  if (!network) return fail(network.error());
  auto& net = **network;

  auto incremental = net.create_stream({.upstream_filter = "incremental_union"});
  if (!incremental) return fail(incremental.error());
  auto check = net.create_stream({.upstream_filter = "union"});
  if (!check) return fail(check.error());
  auto start = canopy::Packet::pack(integer_union::kStartTag, "%d %d %ud %s", waves, kPerWave, *check, record);
  if (!start) return fail(start.error());
  if (auto sent = net.broadcast(*incremental, *start); !sent) return fail(sent.error());

  // The outputs of both streams arrive interleaved: waves waves, then one union.
  std::set<std::int32_t> emitted, reported;
  int waves_received = 0;
  bool have_report = false;
  while (waves_received < waves || !have_report) {
    auto in = net.receive(std::chrono::seconds(20));
    if (!in) return fail(in.error());
    if (!*in) return fail("nothing received within 20 s");
    std::vector<std::int32_t> values;
    if (auto ok = (*in)->packet.unpack("%ad", values); !ok) return fail(ok.error());
    if ((*in)->stream == *check) {
      reported.insert(values.begin(), values.end());
      have_report = true;
      continue;
    }
    for (auto x : values) {
      if (!emitted.insert(x).second) {
        return fail("incremental_union emitted " + std::to_string(x) + " a second time, at wave " +
                    std::to_string((*in)->packet.tag()));
      }
    }
    std::cout << "wave " << (*in)->packet.tag() << ": " << values.size() << " new integers from "
              << (*in)->packet.contributors() << " back-ends\n";
    ++waves_received;
  }

  std::set<std::int32_t> expected;
  for (canopy::Rank rank : topology->backends()) {
    for (const auto& wave : integer_union::backend_waves(rank, waves, kPerWave)) {
      expected.insert(wave.begin(), wave.end());
    }
  }
  std::cout << "incremental_union, all waves: " << describe(emitted) << "\n"
            << "union of the back-ends' sets: " << describe(reported) << "\n"
            << "recomputed:                   " << describe(expected) << "\n";
  if (emitted != reported || emitted != expected) return fail("the three sets differ");
  std::cout << "equal: every integer sent came out exactly once\n";
  if (auto down = net.shutdown(); !down) return fail(down.error());
  return 0;
}
