// The package test's front-end: launches a b:2^2 tree (two commnodes and four
// back-ends), asks every back-end on a stream with the built-in `sum` and on one with
// the plugin `package_max`, and checks both answers. Exit status 0 when both are
// right.
//   package_frontend                          the commnode as Network finds it
//                                             ($CANOPY_COMMNODE, PATH)
//   package_frontend --compiled-in-commnode   $<TARGET_FILE:Canopy::commnode>
#include <algorithm>
#include <iostream>
#include <string>

#include <canopy/frontend.h>

#include "protocol.h"

namespace {

// Sends one request down `stream` and checks the single aggregate against `expected`.
bool ask(canopy::Network& network, canopy::StreamId stream, const char* what, std::int32_t expected) {
  if (auto sent = network.broadcast(stream, canopy::Packet{package_test::kAskTag, {}}); !sent) {
    std::cerr << "package_frontend: broadcast on the " << what << " stream: " << sent.error() << "\n";
    return false;
  }
  auto in = network.receive(std::chrono::seconds(20));
  if (!in) {
    std::cerr << "package_frontend: " << what << ": " << in.error() << "\n";
    return false;
  }
  if (!*in) {
    std::cerr << "package_frontend: " << what << ": no answer within 20 s\n";
    return false;
  }
  std::int32_t value = 0;
  if (auto ok = (*in)->packet.unpack("%d", value); !ok || value != expected) {
    std::cerr << "package_frontend: " << what << ": got " << (*in)->packet.format() << " "
              << (ok ? std::to_string(value) : ok.error()) << ", expected " << expected << "\n";
    return false;
  }
  std::cout << what << " = " << value << " from " << (*in)->packet.contributors() << " back-ends\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  canopy::LaunchOptions options;
  if (argc == 2 && std::string(argv[1]) == "--compiled-in-commnode") {
    options.commnode_exe = PACKAGE_COMMNODE;
  } else if (argc != 1) {
    std::cerr << "usage: package_frontend [--compiled-in-commnode]\n";
    return 2;
  }
  auto topology = canopy::generate_topology("b:2^2");
  if (!topology) {
    std::cerr << "package_frontend: " << topology.error() << "\n";
    return 1;
  }
  std::int32_t sum = 0, max = 0;
  for (canopy::Rank rank : topology->backends()) {
    sum += package_test::answer(rank);
    max = std::max(max, package_test::answer(rank));
  }

  options.topology = *topology;
  options.backend_argv = {PACKAGE_BACKEND};
  auto network = canopy::Network::launch(std::move(options));
  if (!network) {
    std::cerr << "package_frontend: " << network.error() << "\n";
    return 1;
  }
  auto& net = **network;

  auto sum_stream = net.create_stream({.upstream_filter = "sum"});
  if (!sum_stream) {
    std::cerr << "package_frontend: " << sum_stream.error() << "\n";
    return 1;
  }
  if (auto loaded = net.load_filter(PACKAGE_FILTER, "package_max"); !loaded) {
    std::cerr << "package_frontend: " << loaded.error() << "\n";
    return 1;
  }
  auto max_stream = net.create_stream({.upstream_filter = "package_max"});
  if (!max_stream) {
    std::cerr << "package_frontend: " << max_stream.error() << "\n";
    return 1;
  }
  bool ok = ask(net, *sum_stream, "sum", sum) && ask(net, *max_stream, "package_max", max);
  if (auto down = net.shutdown(); !down) {
    std::cerr << "package_frontend: shutdown: " << down.error() << "\n";
    ok = false;
  }
  return ok ? 0 : 1;
}
