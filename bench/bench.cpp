// canopy-bench: tree instantiation time, broadcast+reduce round-trip latency and
// reduce throughput on localhost, with a raw TCP ping-pong between two processes
// measured in the same run for reference. Prints CSV (docs/benchmarks.md).
//
//   canopy-bench [--quick] [--samples N] [--topologies b:4,b:2^2,...]
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "canopy/frontend.h"
#include "demo_protocol.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Options {
  std::vector<std::string> topologies = {"b:4", "b:2^2", "b:4^2", "b:16^2"};
  int instantiations = 5;
  int samples = 2000;
  int warmup = 200;
  int waves_small = 20000;
  int waves_large = 5000;
};

struct Stats {
  double median, p10, p90;
  std::size_t n;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<std::size_t>(q * (v.size() - 1) + 0.5))]; };
  return {at(0.5), at(0.1), at(0.9), v.size()};
}

void row(const std::string& bench, const std::string& topology, int payload, const std::string& metric,
         const Stats& s, const std::string& unit) {
  std::printf("%s,%s,%d,%s,%.3f,%.3f,%.3f,%s,%zu\n", bench.c_str(), topology.c_str(), payload, metric.c_str(),
              s.median, s.p10, s.p90, unit.c_str(), s.n);
  std::fflush(stdout);
}

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "canopy-bench: %s\n", message.c_str());
  std::exit(1);
}

std::string sibling(const char* name) {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / name).string();
}

std::unique_ptr<canopy::Network> launch(const std::string& spec) {
  auto topology = canopy::generate_topology(spec);
  if (!topology) die(topology.error());
  canopy::LaunchOptions options;
  options.topology = *topology;
  options.backend_argv = {sibling("canopy-demo-backend")};
  options.commnode_exe = sibling("canopy-commnode");
  auto network = canopy::Network::launch(std::move(options));
  if (!network) die(network.error());
  return std::move(*network);
}

canopy::Packet receive_one(canopy::Network& net) {
  auto in = net.receive(30s);
  if (!in) die(in.error());
  if (!*in) die("no result within 30 s");
  return std::move((*in)->packet);
}

void instantiate(const Options& o, const std::string& spec) {
  std::vector<double> ms;
  for (int i = 0; i < o.instantiations; ++i) {
    auto start = Clock::now();
    auto net = launch(spec);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    (void)net->shutdown();
  }
  row("instantiate", spec, 0, "launch_time", stats(ms), "ms");
}

void roundtrip_and_throughput(const Options& o, const std::string& spec, double* rt_0b) {
  auto net = launch(spec);
  auto stream = net->create_stream({.upstream_filter = "sum"});
  if (!stream) die(stream.error());
  for (int payload : {0, 1024}) {
    canopy::Packet echo{canopy::demo::kEchoTag, {}};
    if (payload) echo = canopy::Packet{canopy::demo::kEchoTag, {std::vector<std::int32_t>(payload / 4, 1)}};
    std::vector<double> us;
    for (int i = 0; i < o.warmup + o.samples; ++i) {
      auto start = Clock::now();
      if (!net->broadcast(*stream, echo)) die("broadcast failed");
      receive_one(*net);
      if (i >= o.warmup) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
    auto s = stats(us);
    if (payload == 0 && rt_0b) *rt_0b = s.median;
    row("roundtrip", spec, payload, "broadcast_reduce_latency", s, "us");
  }
  int waves = net->topology().size() > 100 ? o.waves_large : o.waves_small;
  std::vector<double> rates;
  for (int rep = 0; rep < 3; ++rep) {
    auto start_packet = canopy::Packet::pack(canopy::demo::kStartTag, "%d %d %d", waves, 0, 0);
    auto start = Clock::now();
    if (!net->broadcast(*stream, *start_packet)) die("broadcast failed");
    for (int w = 0; w < waves; ++w) receive_one(*net);
    rates.push_back(waves / std::chrono::duration<double>(Clock::now() - start).count());
  }
  row("throughput", spec, 4, "reduce_waves_per_second", stats(rates), "waves/s");
  (void)net->shutdown();
}

bool read_exact(int fd, char* buf, std::size_t n) {
  while (n) {
    ssize_t r = read(fd, buf, n);
    if (r <= 0) return false;
    buf += r;
    n -= r;
  }
  return true;
}

bool write_exact(int fd, const char* buf, std::size_t n) {
  while (n) {
    ssize_t r = write(fd, buf, n);
    if (r <= 0) return false;
    buf += r;
    n -= r;
  }
  return true;
}

// Ping-pong between this process and a forked echo process over loopback TCP.
double raw_tcp(const Options& o, std::size_t bytes) {
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), len) || listen(listener, 1) ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len)) {
    die(std::string("raw TCP set-up: ") + std::strerror(errno));
  }
  int rounds = o.warmup + o.samples;
  pid_t child = fork();
  if (child == 0) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr)) _exit(1);
    std::vector<char> buf(bytes);
    for (int i = 0; i < rounds; ++i) {
      if (!read_exact(fd, buf.data(), bytes) || !write_exact(fd, buf.data(), bytes)) _exit(1);
    }
    _exit(0);
  }
  int fd = accept(listener, nullptr, nullptr);
  close(listener);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> buf(bytes, 'x');
  std::vector<double> us;
  for (int i = 0; i < rounds; ++i) {
    auto start = Clock::now();
    if (!write_exact(fd, buf.data(), bytes) || !read_exact(fd, buf.data(), bytes)) die("raw TCP ping-pong failed");
    if (i >= o.warmup) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  close(fd);
  waitpid(child, nullptr, 0);
  auto s = stats(us);
  row("raw_tcp_roundtrip", "2 processes", static_cast<int>(bytes), "pingpong_latency", s, "us");
  return s.median;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      o.instantiations = 3;
      o.samples = 300;
      o.warmup = 50;
      o.waves_small = 2000;
      o.waves_large = 1000;
    } else if (a == "--samples" && i + 1 < argc) {
      o.samples = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--topologies" && i + 1 < argc) {
      o.topologies.clear();
      std::stringstream list(argv[++i]);
      for (std::string t; std::getline(list, t, ',');) o.topologies.push_back(t);
    } else {
      std::fprintf(stderr, "usage: canopy-bench [--quick] [--samples N] [--topologies b:4,b:2^2,...]\n");
      return 2;
    }
  }
  std::printf("benchmark,topology,payload_bytes,metric,median,p10,p90,unit,samples\n");
  double raw_1b = raw_tcp(o, 1);
  raw_tcp(o, 1024);
  for (const auto& spec : o.topologies) {
    instantiate(o, spec);
    double rt = 0;
    roundtrip_and_throughput(o, spec, &rt);
    if (spec == "b:2^2") {
      double ratio = rt / (2 * raw_1b);
      row("ratio", spec, 0, "roundtrip_over_2x_raw_tcp", {ratio, ratio, ratio, 1}, "x");
    }
  }
  return 0;
}
