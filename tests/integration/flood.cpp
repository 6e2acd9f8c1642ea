// canopy-flood: the load of bench/backpressure.sh (docs/benchmarks.md, "Back-pressure").
//
//   canopy-flood [--tree SPEC] [--packet-bytes N] [--seconds S]
//       front-end: launches SPEC (default b:1x4) with this program as every back-end,
//       opens a concat stream that forwards each packet on its own (dont_wait),
//       receives for S seconds (default 12), printing one CSV line a second
//       (second, packets, MiB received in it), then stops the back-ends and shuts
//       the tree down. The script around it stops and continues this process to
//       make the front-end slow, and reads the commnode's memory meanwhile. On
//       SIGUSR1 the program calls no receive() for 5 s while the process runs
//       (the front-end's inbox fills: its bound is tested).
//   canopy-flood --backend N
//       back-end: on the front-end's first packet, sends packets of N bytes (an
//       int32 array) as fast as send() takes them, until told to stop.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "canopy/backend.h"
#include "canopy/frontend.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::uint32_t kGo = 1;
constexpr std::uint32_t kStop = 2;
constexpr std::uint32_t kData = 3;

std::atomic<bool> g_idle{false};  // SIGUSR1: the program stops receiving for a while

int backend(std::size_t bytes) {
  auto be = canopy::Backend::connect();
  if (!be) {
    std::fprintf(stderr, "canopy-flood back-end: %s\n", be.error().c_str());
    return 1;
  }
  canopy::StreamId stream = 0;
  while (true) {  // the go packet names the stream
    auto in = (*be)->receive(60s);
    if (!in || !*in) return 1;
    if ((*in)->packet.tag() == kGo) {
      stream = (*in)->stream;
      break;
    }
  }
  const canopy::Packet packet(kData, {std::vector<std::int32_t>(bytes / 4, static_cast<std::int32_t>((*be)->rank()))});
  for (std::uint64_t sent = 0;; ++sent) {
    if (!(*be)->send(stream, packet)) return 0;  // the network stopped
    if (sent % 16 == 0) {
      auto in = (*be)->receive(0ms);
      if (!in) return 0;
      if (*in && (*in)->packet.tag() == kStop) return 0;
    }
  }
}

int frontend(const std::string& spec, std::size_t bytes, int seconds) {
  auto topology = canopy::generate_topology(spec);
  if (!topology) {
    std::fprintf(stderr, "canopy-flood: %s\n", topology.error().c_str());
    return 2;
  }
  canopy::LaunchOptions options;
  options.topology = *topology;
  options.backend_argv = {std::filesystem::read_symlink("/proc/self/exe").string(), "--backend",
                          std::to_string(bytes)};
  // The script stops this process for seconds: the commnode must not take that for
  // a lost front-end.
  options.fault_tolerance.suspect = 30s;
  options.fault_tolerance.lost = 60s;
  auto network = canopy::Network::launch(std::move(options));
  if (!network) {
    std::fprintf(stderr, "canopy-flood: %s\n", network.error().c_str());
    return 1;
  }
  auto& net = **network;
  auto stream = net.create_stream({.upstream_filter = "concat", .sync = canopy::SyncMode::dont_wait});
  if (!stream) {
    std::fprintf(stderr, "canopy-flood: %s\n", stream.error().c_str());
    return 1;
  }
  signal(SIGUSR1, [](int) { g_idle = true; });
  std::printf("second,packets,mib\n");
  std::fflush(stdout);
  std::fprintf(stderr, "canopy-flood: tree up, flooding\n");
  if (auto sent = net.broadcast(*stream, canopy::Packet(kGo, {})); !sent) return 1;
  const auto start = Clock::now();
  std::uint64_t packets = 0, received_bytes = 0;
  int second = 1;
  while (second <= seconds) {
    if (g_idle.exchange(false)) std::this_thread::sleep_for(5s);
    auto in = net.receive(50ms);
    if (!in) {
      std::fprintf(stderr, "canopy-flood: %s\n", in.error().c_str());
      return 1;
    }
    if (*in) {
      ++packets;
      for (const auto& v : (*in)->packet.values()) {
        if (auto* a = std::get_if<std::vector<std::int32_t>>(&v)) received_bytes += a->size() * 4;
      }
    }
    // Seconds of the wall clock: a second spent stopped counts, with nothing in it.
    while (Clock::now() - start >= std::chrono::seconds(second) && second <= seconds) {
      std::printf("%d,%llu,%.1f\n", second, static_cast<unsigned long long>(packets), received_bytes / 1048576.0);
      std::fflush(stdout);
      packets = received_bytes = 0;
      ++second;
    }
  }
  (void)net.broadcast(*stream, canopy::Packet(kStop, {}));
  auto stopped = net.shutdown();
  if (!stopped) std::fprintf(stderr, "canopy-flood: shutdown: %s\n", stopped.error().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string spec = "b:1x4";
  std::size_t bytes = 64 * 1024;
  int seconds = 12;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "canopy-flood: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (arg == "--backend") return backend(std::stoul(value()));
      if (arg == "--tree") spec = value();
      else if (arg == "--packet-bytes") bytes = std::stoul(value());
      else if (arg == "--seconds") seconds = std::stoi(value());
      else {
        std::fprintf(stderr, "usage: canopy-flood [--tree SPEC] [--packet-bytes N] [--seconds S]\n");
        return 2;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "canopy-flood: %s takes a number\n", arg.c_str());
      return 2;
    }
  }
  if (bytes < 4 || seconds < 1) {
    std::fprintf(stderr, "canopy-flood: --packet-bytes is at least 4, --seconds at least 1\n");
    return 2;
  }
  return frontend(spec, bytes, seconds);
}
