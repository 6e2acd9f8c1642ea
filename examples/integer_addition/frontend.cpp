// integer_addition's front-end: launches a tree, loads the plugin int_add into it,
// and asks every back-end for its rank plus a round number, three rounds; the tree
// adds the answers up and the front-end checks each sum.
//
//   integer_addition_frontend [--tree SPEC]     default b:2^2 (2 commnodes, 4 back-ends)
//
// The back-end program and int_add.so are found beside this program; canopy-commnode
// on PATH or in $CANOPY_COMMNODE.
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>

#include <canopy/frontend.h>

namespace {

std::filesystem::path program_directory() {
  return std::filesystem::canonical("/proc/self/exe").parent_path();
}

int fail(const std::string& message) {
  std::cerr << "integer_addition_frontend: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec = "b:2^2";
  if (argc == 3 && std::string(argv[1]) == "--tree") {
    spec = argv[2];
  } else if (argc != 1) {
    std::cerr << "usage: integer_addition_frontend [--tree SPEC]\n";
    return 2;
  }
  auto topology = canopy::generate_topology(spec);
  if (!topology) return fail(topology.error());

  const auto here = program_directory();
  canopy::LaunchOptions options;
  options.topology = *topology;
  options.backend_argv = {(here / "integer_addition_backend").string()};
  auto network = canopy::Network::launch(std::move(options));
  if (!network) return fail(network.error());
  auto& net = **network;

  // The plugin goes into the front-end and every commnode; the path must be valid on
  // every host of the tree (here all are localhost).
  if (auto loaded = net.load_filter((here / "int_add.so").string(), "int_add"); !loaded) {
    return fail(loaded.error());
  }
  auto stream = net.create_stream({.upstream_filter = "int_add"});
  if (!stream) return fail(stream.error());

  const auto backends = topology->backends();
  for (std::int64_t round = 0; round < 3; ++round) {
    if (auto sent = net.broadcast(*stream, canopy::Packet{static_cast<canopy::Tag>(round), {round}}); !sent) {
      return fail(sent.error());
    }
    auto in = net.receive(std::chrono::seconds(20));
    if (!in) return fail(in.error());
    if (!*in) return fail("no sum within 20 s");
    std::int64_t sum = 0;
    if (auto ok = (*in)->packet.unpack("%ld", sum); !ok) return fail(ok.error());

    std::int64_t expected = 0;
    for (canopy::Rank rank : backends) expected += static_cast<std::int64_t>(rank) + round;
    std::cout << "round " << round << ": sum of rank + " << round << " over " << (*in)->packet.contributors()
              << " back-ends = " << sum << (sum == expected ? " (correct)" : " (WRONG)") << "\n";
    if (sum != expected) return fail("expected " + std::to_string(expected));
  }
  if (auto down = net.shutdown(); !down) return fail(down.error());
  return 0;
}
