// canopy-mrnet-bench: one MRNet-API front-end, measured the same way whatever it is
// linked against: Canopy's MRNet layer (target canopy-mrnet-bench) or MRNet 5.0.1
// itself (bench/mrnet_api.sh compiles this file against an MRNet installation). It
// uses MRNet 5.0.1's API only.
//
//   canopy-mrnet-bench [options] TOPOLOGY_FILE BACKEND_EXE
//     --name NAME          the topology column (default: the file's name)
//     --backends N         fail unless the tree has N back-ends
//     --samples N          round trips measured (default 300), after
//     --warmup N           unmeasured ones (default 50)
//     --waves W            waves per throughput run (default 2000)
//     --throughput-reps R  throughput runs (default 3)
//     --timeout S          give up after S seconds in all (default 300)
//
// On the tree of TOPOLOGY_FILE (MRNet's format), with BACKEND_EXE
// (canopy-mrnet-bench-be) on every leaf, it measures:
//   instantiate  CreateNetworkFE until it returns; then, apart, new_Stream (sum,
//                wait for all) and the first round trip, which proves every
//                back-end answers;
//   roundtrip    the front-end sends "%d" on the sum stream and flushes, every
//                back-end answers "%d", the front-end receives the one sum: each
//                round trip timed on its own after the warm-up;
//   throughput   the front-end asks every back-end for W waves of "%d" sent as fast
//                as it can, and receives the W sums: waves per second.
// Every result is checked (tag, and the sum of what every back-end sent); a wrong
// one ends the run with status 1 and no row. Prints CSV with canopy-bench's columns:
//   benchmark,topology,payload_bytes,metric,median,p10,p90,unit,samples
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "mrnet/MRNet.h"
#include "mrnet_api_protocol.h"
#include "bench_util.h"

using namespace MRN;

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string topology_file;
  std::string backend_exe;
  std::string name;
  int backends = -1;  // not checked
  int samples = 300;
  int warmup = 50;
  int waves = 2000;
  int throughput_reps = 3;
  int timeout_s = 300;
};

// Ends the run: main() prints it, deletes the network (which tears the tree down)
// and exits with status 1.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using canopy::bench::Stats;

// Nearest-rank percentiles of the samples (bench_util.h); none is a failure.
Stats stats(std::vector<double> v) {
  const Stats s = canopy::bench::nearest_rank_stats(std::move(v));
  if (s.n == 0) throw Failure("no samples");
  return s;
}

void row(const char* benchmark, const Options& o, const char* metric, const Stats& s, const char* unit) {
  std::printf("%s,%s,4,%s,%.3f,%.3f,%.3f,%s,%zu\n", benchmark, o.name.c_str(), metric, s.median, s.p10, s.p90, unit,
              s.n);
  std::fflush(stdout);
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void send_down(Network* net, Stream* stream, int tag, int value) {
  if (stream->send(tag, "%d", value) != 0 || stream->flush() != 0) {
    net->print_error("canopy-mrnet-bench: send");
    throw Failure("sending tag " + std::to_string(tag) + " failed");
  }
}

// Receives one packet on `stream`; fails unless it has `tag` and "%d" == `expected`.
void receive_sum(Network* net, Stream* stream, int tag, int expected, const char* what) {
  int got_tag = 0;
  PacketPtr packet;
  if (stream->recv(&got_tag, packet) != 1) {
    net->print_error("canopy-mrnet-bench: recv");
    throw Failure(std::string(what) + ": recv failed");
  }
  int sum = 0;
  if (packet->unpack("%d", &sum) != 0) throw Failure(std::string(what) + ": the result is not \"%d\"");
  if (got_tag != tag || sum != expected) {
    throw Failure(std::string(what) + ": expected tag " + std::to_string(tag) + " and sum " +
                  std::to_string(expected) + ", got tag " + std::to_string(got_tag) + " and sum " +
                  std::to_string(sum));
  }
}

// Everything after CreateNetworkFE, on a live network.
void measure(const Options& o, Network* net, double create_ms) {
  Communicator* all = net->get_BroadcastCommunicator();
  if (!all) throw Failure("no broadcast communicator");
  const int backends = static_cast<int>(all->size());
  if (o.backends >= 0 && backends != o.backends) {
    throw Failure("the tree has " + std::to_string(backends) + " back-ends, not " + std::to_string(o.backends));
  }

  auto start = Clock::now();
  Stream* stream = net->new_Stream(all, TFILTER_SUM, SFILTER_WAITFORALL);
  if (!stream) {
    net->print_error("canopy-mrnet-bench: new_Stream");
    throw Failure("new_Stream(TFILTER_SUM, SFILTER_WAITFORALL) failed");
  }
  send_down(net, stream, kTagEcho, 1);
  receive_sum(net, stream, kTagEcho, backends, "first round trip");
  const double first_ms = ms_since(start);
  row("instantiate", o, "create_network_fe", {create_ms, create_ms, create_ms, 1}, "ms");
  row("instantiate", o, "new_stream_and_first_roundtrip", {first_ms, first_ms, first_ms, 1}, "ms");

  std::vector<double> us;
  us.reserve(o.samples);
  for (int i = 0; i < o.warmup + o.samples; ++i) {
    const int value = i % 1000 + 1;  // the sum stays far from overflow on any tree
    auto t0 = Clock::now();
    send_down(net, stream, kTagEcho, value);
    receive_sum(net, stream, kTagEcho, value * backends, "round trip");
    if (i >= o.warmup) us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  row("roundtrip", o, "broadcast_reduce_latency", stats(us), "us");

  std::vector<double> rates;
  for (int rep = 0; rep < o.throughput_reps; ++rep) {
    auto t0 = Clock::now();
    send_down(net, stream, kTagStream, o.waves);
    for (int w = 0; w < o.waves; ++w) receive_sum(net, stream, kTagWave, w * backends, "throughput");
    rates.push_back(o.waves / std::chrono::duration<double>(Clock::now() - t0).count());
  }
  row("throughput", o, "reduce_waves_per_second", stats(rates), "waves/s");

  // Every back-end answers the exit before the network goes, so that none is still
  // sending when the front-end tears the tree down.
  send_down(net, stream, kTagExit, 0);
  receive_sum(net, stream, kTagExit, backends, "exit");
  delete stream;
}

void on_timeout(int) {
  const char text[] = "canopy-mrnet-bench: timed out (--timeout)\n";
  [[maybe_unused]] auto n = write(2, text, sizeof text - 1);
  _exit(1);
}

int usage() {
  std::fprintf(stderr,
               "usage: canopy-mrnet-bench [--name NAME] [--backends N] [--samples N] [--warmup N] [--waves W]\n"
               "                          [--throughput-reps R] [--timeout S] TOPOLOGY_FILE BACKEND_EXE\n"
               "prints CSV: benchmark,topology,payload_bytes,metric,median,p10,p90,unit,samples\n");
  return 2;
}

// The value of option `argv[i]` as a positive number (advancing i), or -1.
int number_after(int argc, char** argv, int& i) {
  if (i + 1 >= argc) return -1;
  char* end = nullptr;
  const long v = std::strtol(argv[++i], &end, 10);
  return (end == argv[i] || *end || v < 0 || v > 100000000) ? -1 : static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    int* target = nullptr;
    if (a == "--name" && i + 1 < argc) {
      o.name = argv[++i];
      continue;
    }
    if (a == "--backends") target = &o.backends;
    else if (a == "--samples") target = &o.samples;
    else if (a == "--warmup") target = &o.warmup;
    else if (a == "--waves") target = &o.waves;
    else if (a == "--throughput-reps") target = &o.throughput_reps;
    else if (a == "--timeout") target = &o.timeout_s;
    else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return usage();
    } else {
      positional.push_back(a);
      continue;
    }
    *target = number_after(argc, argv, i);
    if (*target < 0) return usage();
  }
  if (positional.size() != 2 || o.samples < 1 || o.waves < 1 || o.throughput_reps < 1 || o.timeout_s < 1) {
    return usage();
  }
  o.topology_file = positional[0];
  o.backend_exe = positional[1];
  if (o.name.empty()) o.name = o.topology_file.substr(o.topology_file.find_last_of('/') + 1);

  // A back-end that never answers would block recv for ever: give up instead. The
  // caller (bench/mrnet_api.sh) kills what is left of the tree.
  signal(SIGALRM, on_timeout);
  alarm(static_cast<unsigned>(o.timeout_s));
  signal(SIGPIPE, SIG_IGN);

  std::printf("benchmark,topology,payload_bytes,metric,median,p10,p90,unit,samples\n");
  std::fflush(stdout);
  const char* backend_argv[] = {NULL};
  auto start = Clock::now();
  Network* net = Network::CreateNetworkFE(o.topology_file.c_str(), o.backend_exe.c_str(), backend_argv);
  const double create_ms = ms_since(start);
  if (!net || net->has_Error()) {
    if (net) net->print_error("canopy-mrnet-bench: CreateNetworkFE");
    std::fprintf(stderr, "canopy-mrnet-bench: cannot create the network of %s\n", o.topology_file.c_str());
    delete net;
    return 1;
  }
  int status = 0;
  try {
    measure(o, net, create_ms);
  } catch (const Failure& e) {
    std::fprintf(stderr, "canopy-mrnet-bench: %s: %s\n", o.name.c_str(), e.what());
    status = 1;
  }
  delete net;  // tears the tree down
  return status;
}
