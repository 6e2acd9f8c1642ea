// canopy-bench: tree instantiation time, broadcast+reduce round-trip latency and
// reduce throughput on localhost, with a raw TCP ping-pong between two processes
// measured in the same run for reference. Prints CSV (docs/benchmarks.md).
//
//   canopy-bench [--quick] [--samples N] [--instantiations N] [--topologies b:4,b:2^2,...]
//                [--backend NAME]
//
// canopy-commnode and canopy-demo-backend (or the back-end NAME) are taken from the
// directory of this executable (build/bin, or the install's bin). Every Network is
// shut down or destroyed before the program ends, also on error; at the end the
// program checks that none of the processes it started, directly or not, is still
// alive.
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "canopy/frontend.h"
#include "demo_protocol.h"
#include "pingpong.h"
#include "process_guard.h"
#include "bench_util.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Options {
  std::vector<std::string> topologies = {"b:4", "b:2^2", "b:4^2", "b:16^2"};
  int instantiations = 5;
  int samples = 2000;
  int warmup = 200;
  int throughput_reps = 3;
  int waves_small = 20000;  // trees of up to 100 processes
  int waves_large = 5000;   // larger trees (b:16^2)
  bool instantiate_only = false;  // no raw TCP, round trips or throughput
  std::string backend = "canopy-demo-backend";  // a program next to this one
};

// A failure: reported on stderr by main(), which then exits with status 1. Thrown
// rather than exit()ing so that every live Network is destroyed on the way out,
// which tears its tree down.
using canopy::bench::Failure;  // pingpong.h's: one kind of failure for the whole program

using canopy::bench::Stats;

// Nearest-rank percentiles of the samples (bench_util.h); none is a failure.
Stats stats(std::vector<double> v) {
  const Stats s = canopy::bench::nearest_rank_stats(std::move(v));
  if (s.n == 0) throw Failure("no samples");
  return s;
}

void row(const std::string& bench, const std::string& topology, int payload, const std::string& metric,
         const Stats& s, const std::string& unit) {
  std::printf("%s,%s,%d,%s,%.3f,%.3f,%.3f,%s,%zu\n", bench.c_str(), topology.c_str(), payload, metric.c_str(),
              s.median, s.p10, s.p90, unit.c_str(), s.n);
  std::fflush(stdout);
}

// A program next to this executable; fails if it is not there.
std::string sibling(const char* name) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Failure(std::string("cannot read /proc/self/exe: ") + ec.message());
  auto path = self.parent_path() / name;
  if (access(path.c_str(), X_OK) != 0) {
    throw Failure(path.string() + " is missing or not executable (build the canopy-bench target, which builds it)");
  }
  return path.string();
}

std::unique_ptr<canopy::Network> launch(const Options& o, const std::string& spec) {
  auto topology = canopy::generate_topology(spec);
  if (!topology) throw Failure("topology \"" + spec + "\": " + topology.error());
  canopy::LaunchOptions options;
  options.topology = *topology;
  options.backend_argv = {sibling(o.backend.c_str())};
  options.commnode_exe = sibling("canopy-commnode");
  auto network = canopy::Network::launch(std::move(options));
  if (!network) throw Failure("launching " + spec + ": " + network.error());
  return std::move(*network);
}

void shutdown(canopy::Network& net, const std::string& spec) {
  if (auto r = net.shutdown(); !r) throw Failure("shutting down " + spec + ": " + r.error());
}

canopy::Packet receive_one(canopy::Network& net, const std::string& spec, const char* what) {
  auto in = net.receive(30s);
  if (!in) throw Failure(spec + ", " + what + ": " + in.error());
  if (!*in) throw Failure(spec + ", " + what + ": no result within 30 s");
  return std::move((*in)->packet);
}

void instantiate(const Options& o, const std::string& spec) {
  std::vector<double> ms;
  for (int i = 0; i < o.instantiations; ++i) {
    auto start = Clock::now();
    auto net = launch(o, spec);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (i == 0) {
      // What the launch sent (and the traffic request's own frames down: one per
      // process but the root), to set beside canopy-sim's figure (docs/simulation.md).
      auto traffic = net->traffic();
      if (!traffic) throw Failure("traffic of " + spec + ": " + traffic.error());
      const double bytes = static_cast<double>(traffic->total.bytes_sent);
      const double messages = static_cast<double>(traffic->total.messages_sent);
      row("instantiate", spec, 0, "launch_bytes_sent", stats({bytes}), "bytes");
      row("instantiate", spec, 0, "launch_messages_sent", stats({messages}), "messages");
    }
    shutdown(*net, spec);
  }
  row("instantiate", spec, 0, "launch_time", stats(ms), "ms");
}

// Round trips (0 B, 4 B and 1 KiB) and throughput on one tree; returns the 0 B median (µs).
double roundtrip_and_throughput(const Options& o, const std::string& spec) {
  auto net = launch(o, spec);
  const auto backends = static_cast<std::uint32_t>(net->topology().backends().size());
  auto stream = net->create_stream({.upstream_filter = "sum"});
  if (!stream) throw Failure("creating a sum stream on " + spec + ": " + stream.error());


  double median_0b = 0;
  // 4 B is one int32 (the MRNet API benchmark's "%d" down and its sum up, without
  // the format string); 1 KiB an array of 256.
  for (int payload : {0, 4, 1024}) {
    canopy::Packet echo{canopy::demo::kEchoTag, {}};
    if (payload == 4) echo = canopy::Packet{canopy::demo::kEchoTag, {std::int32_t{1}}};
    if (payload > 4) echo = canopy::Packet{canopy::demo::kEchoTag, {std::vector<std::int32_t>(payload / 4, 1)}};
    std::vector<double> us;
    us.reserve(o.samples);
    for (int i = 0; i < o.warmup + o.samples; ++i) {
      auto start = Clock::now();
      if (auto r = net->broadcast(*stream, echo); !r) throw Failure("broadcast on " + spec + ": " + r.error());
      auto reply = receive_one(*net, spec, "round trip");
      auto end = Clock::now();
      if (i >= o.warmup) us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
      // The reply must be the aggregate of every back-end's echo.
      bool ok = reply.tag() == canopy::demo::kEchoTag && reply.contributors() == backends &&
                reply.size() == echo.size();
      if (ok && payload == 4) {
        const auto* sum = std::get_if<std::int32_t>(&reply[0]);
        ok = sum && *sum == static_cast<std::int32_t>(backends);
      } else if (ok && payload) {
        const auto* sums = std::get_if<std::vector<std::int32_t>>(&reply[0]);
        ok = sums && sums->size() == static_cast<std::size_t>(payload / 4) &&
             std::all_of(sums->begin(), sums->end(), [&](std::int32_t v) { return v == static_cast<std::int32_t>(backends); });
      }
      if (!ok) {
        throw Failure(spec + ", round trip " + std::to_string(i) + ": unexpected reply (tag " +
                      std::to_string(reply.tag()) + ", " + std::to_string(reply.contributors()) + " of " +
                      std::to_string(backends) + " contributors, format \"" + reply.format() + "\")");
      }
    }
    auto s = stats(us);
    if (payload == 0) median_0b = s.median;
    row("roundtrip", spec, payload, "broadcast_reduce_latency", s, "us");
  }

  const int waves = net->topology().size() > 100 ? o.waves_large : o.waves_small;
  std::vector<double> rates;
  for (int rep = 0; rep < o.throughput_reps; ++rep) {
    auto start_packet = canopy::Packet::pack(canopy::demo::kStartTag, "%d %d %d", waves, 0, 0);
    if (!start_packet) throw Failure(start_packet.error());
    auto start = Clock::now();
    if (auto r = net->broadcast(*stream, *start_packet); !r) throw Failure("broadcast on " + spec + ": " + r.error());
    for (int w = 0; w < waves; ++w) {
      auto result = receive_one(*net, spec, "throughput");
      if (result.tag() != w || result.contributors() != backends) {
        throw Failure(spec + ", throughput: wave " + std::to_string(w) + " arrived as tag " +
                      std::to_string(result.tag()) + " with " + std::to_string(result.contributors()) + " of " +
                      std::to_string(backends) + " contributors");
      }
    }
    rates.push_back(waves / std::chrono::duration<double>(Clock::now() - start).count());
  }
  row("throughput", spec, 4, "reduce_waves_per_second", stats(rates), "waves/s");
  shutdown(*net, spec);
  return median_0b;
}

// Ping-pong of `bytes`-byte messages between this process and an echo process (this
// program again) over loopback TCP; returns the median round trip (µs).
double raw_tcp(const Options& o, std::size_t bytes) {
  auto s = stats(canopy::bench::pingpong_raw(o.samples, bytes, o.warmup));
  row("raw_tcp_roundtrip", "2 processes", static_cast<int>(bytes), "pingpong_latency", s, "us");
  return s.median;
}

// Waits up to 5 s for every process this one started to be gone; kills and reports
// any that is left. Returns false if some were.
bool check_nothing_left() {
  auto left = canopy::testing::ProcessGuard::wait_for_none(5s);
  if (left.empty()) return true;
  std::string pids;
  for (pid_t pid : left) {
    pids += ' ';
    pids += std::to_string(pid);
    kill(pid, SIGKILL);
  }
  std::this_thread::sleep_for(100ms);
  canopy::testing::ProcessGuard::reap();
  std::fprintf(stderr, "canopy-bench: %zu processes were still alive at the end (killed):%s\n", left.size(),
               pids.c_str());
  return false;
}

int run(const Options& o) {
  std::printf("benchmark,topology,payload_bytes,metric,median,p10,p90,unit,samples\n");
  std::fflush(stdout);
  if (o.instantiate_only) {
    for (const auto& spec : o.topologies) instantiate(o, spec);
    return 0;
  }
  double raw_1b = raw_tcp(o, 1);
  raw_tcp(o, 1024);
  for (const auto& spec : o.topologies) {
    instantiate(o, spec);
    double rt_0b = roundtrip_and_throughput(o, spec);
    if (spec == "b:2^2") {
      double ratio = rt_0b / (2 * raw_1b);
      row("ratio", spec, 0, "roundtrip_over_2x_raw_tcp", {ratio, ratio, ratio, 1}, "x");
    }
  }
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: canopy-bench [--quick] [--samples N] [--instantiations N] [--topologies SPEC,SPEC,...]\n"
               "                    [--instantiate-only] [--backend NAME]\n"
               "  --quick        smoke run: 3 instantiations, 300 round trips, few waves\n"
               "  --samples N    round trips measured per topology and payload (default 2000)\n"
               "  --instantiations N  launches timed per topology (default 5; 1: only the\n"
               "                 process's first, cold, as an MRNet tool's one CreateNetworkFE)\n"
               "  --topologies   default b:4,b:2^2,b:4^2,b:16^2\n"
               "  --instantiate-only  time the launches alone (for profiling them)\n"
               "  --backend NAME the back-end program, next to this one (default\n"
               "                 canopy-demo-backend, linked lean; canopy-demo-backend-dynamic:\n"
               "                 the same linked against shared C++ libraries)\n"
               "prints CSV: benchmark,topology,payload_bytes,metric,median,p10,p90,unit,samples\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // The partner of the raw TCP ping-pong (bench/pingpong.h).
  if (argc == 4 && std::string(argv[1]) == "--echo-raw") {
    return canopy::bench::echo_raw(static_cast<std::uint16_t>(std::atoi(argv[2])), std::strtoul(argv[3], nullptr, 10));
  }
  Options o;
  int samples = 0;
  int instantiations = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") {
      o.instantiations = 3;
      o.samples = 300;
      o.warmup = 50;
      o.waves_small = 2000;
      o.waves_large = 500;
    } else if (a == "--samples" && i + 1 < argc) {
      samples = std::atoi(argv[++i]);
      if (samples < 1) return usage();
    } else if (a == "--instantiations" && i + 1 < argc) {
      instantiations = std::atoi(argv[++i]);
      if (instantiations < 1) return usage();
    } else if (a == "--topologies" && i + 1 < argc) {
      o.topologies.clear();
      std::stringstream list(argv[++i]);
      for (std::string t; std::getline(list, t, ',');) {
        if (!t.empty()) o.topologies.push_back(t);
      }
      if (o.topologies.empty()) return usage();
    } else if (a == "--backend" && i + 1 < argc) {
      o.backend = argv[++i];
      if (o.backend.empty() || o.backend.find('/') != std::string::npos) return usage();
    } else if (a == "--instantiate-only") {
      o.instantiate_only = true;
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else {
      return usage();
    }
  }
  if (samples) o.samples = samples;  // wins over --quick, in either order
  if (instantiations) o.instantiations = instantiations;  // likewise

  // Orphaned descendants (say, a back-end whose commnode died) come to this process
  // instead of init, so that check_nothing_left() sees every one of them.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  signal(SIGPIPE, SIG_IGN);

  int status = 0;
  try {
    status = run(o);
  } catch (const Failure& e) {
    std::fprintf(stderr, "canopy-bench: %s\n", e.what());
    status = 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "canopy-bench: unexpected error: %s\n", e.what());
    status = 1;
  }
  if (!check_nothing_left()) status = 1;
  return status;
}
