// canopy-filter-bench: filter execution inside one node, without processes or
// sockets: packets per second through a filter at a given fan-out, and heap
// allocations per packet, with and without the wire encoding. Prints CSV
// (docs/benchmarks.md, "Filter execution").
//
//   canopy-filter-bench [--quick] [--runs N] [--only NAME,...]
//
// A wave is `fan-out` packets, one per child, as a node in wait-for-all mode
// filters them; packets/s = waves/s x fan-out. Each figure is the median of N
// timed runs (p10 and p90 beside it), each run a fresh filter instance.
//
// Two paths are measured:
//   filter   Filter::execute on waves built in advance: the cost of the filter.
//   codec    what a node's data path adds around it, minus the sockets: every input
//            packet is encoded as its sender does (a stream service message in
//            its envelope, framed with append_frame) and decoded as the
//            parent does (FrameReader, FlatArrayMessageReader, decode_packet), and
//            each wave's output is encoded and framed again.
//
// Allocations are counted by this executable's own operator new and malloc family
// (below), which forward to glibc's allocator: every heap allocation of the
// process is seen, those of Cap'n Proto (calloc) included. Not under the
// sanitizers, which bring their own allocator; there the counts are left out.
#include <capnp/serialize.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "canopy.capnp.h"
#include "canopy/call_tree.h"
#include "core/codec.h"
#include "core/service.h"
#include "filters/filter.h"
#include "streams.capnp.h"
#include "transport/frame.h"
#include "bench_util.h"

// ---- allocation counting ----

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CANOPY_COUNT_ALLOCATIONS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CANOPY_COUNT_ALLOCATIONS 0
#endif
#endif
#ifndef CANOPY_COUNT_ALLOCATIONS
#define CANOPY_COUNT_ALLOCATIONS 1
#endif

namespace {

// Plain counters: the benchmark is single-threaded, and counting is switched on
// only around the measured waves.
struct AllocationCount {
  bool on = false;
  std::uint64_t calls = 0;
  std::uint64_t bytes = 0;
  void add(std::size_t n) {
    if (on) {
      ++calls;
      bytes += n;
    }
  }
};
AllocationCount g_allocations;

}  // namespace

#if CANOPY_COUNT_ALLOCATIONS
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);

// The C allocator, for Cap'n Proto's segments and anything else written in C style.
void* malloc(std::size_t n) {
  g_allocations.add(n);
  return __libc_malloc(n);
}
void* calloc(std::size_t count, std::size_t n) {
  g_allocations.add(count * n);
  return __libc_calloc(count, n);
}
void* realloc(void* p, std::size_t n) {
  g_allocations.add(n);
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
}

namespace {
void* counted_new(std::size_t n, std::size_t align = 0) {
  g_allocations.add(n);
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t) ? __libc_memalign(align, n) : __libc_malloc(n);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return counted_new(n); }
void* operator new[](std::size_t n) { return counted_new(n); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_new(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_new(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_new(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { __libc_free(p); }
void operator delete[](void* p) noexcept { __libc_free(p); }
void operator delete(void* p, std::size_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::size_t) noexcept { __libc_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { __libc_free(p); }
#endif

namespace {

using Clock = std::chrono::steady_clock;
using canopy::Packet;
using canopy::filters::Filter;
using canopy::filters::FilterRegistry;
using Wave = std::vector<Packet>;

struct Options {
  int runs = 7;
  std::vector<std::string> only;  // benchmark names to run; empty: all
  // Integers (array elements and scalars) per timed run, which sets the number of
  // waves: about the same work whatever the fan-out and packet size.
  std::size_t elements_per_run = 4'000'000;
  // The "every integer is new" workload keeps every integer in the filter's state.
  std::size_t new_elements_per_run = 1'000'000;
};

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using canopy::bench::Stats;

// Nearest-rank percentiles of the samples (bench_util.h).
Stats stats(std::vector<double> v) { return canopy::bench::nearest_rank_stats(std::move(v)); }

void row(const std::string& bench, const std::string& params, const std::string& metric, const Stats& s,
         const char* unit) {
  std::printf("%s,%s,%s,%.3f,%.3f,%.3f,%s,%zu\n", bench.c_str(), params.c_str(), metric.c_str(), s.median, s.p10,
              s.p90, unit, s.n);
  std::fflush(stdout);
}

// One workload: a filter and the waves it is fed.
struct Workload {
  std::string benchmark;       // CSV column 1
  std::string filter;          // as the registry names it
  std::size_t fanout = 0;
  std::string packet;          // what one packet holds, for the params column
  std::vector<Wave> pool;      // cycled through; each wave has `fanout` packets
  std::size_t waves = 0;       // per timed run
  bool warm_up = true;         // feed the pool once before measuring (false: every input must be new)

  std::string params() const { return "fanout=" + std::to_string(fanout) + ";" + packet; }
};

// Packets as a node receives them from its children.
Packet child_packet(canopy::Rank child, std::vector<canopy::Value> values) {
  Packet p(1, std::move(values));
  p.set_source(child);
  return p;
}

// sum: one int64 and a 16-element int64 array per packet.
Workload sum_workload(std::size_t fanout, const Options& o, std::mt19937_64& random) {
  Workload w{"sum", "sum", fanout, "int64+16xint64", {}, 0, true};
  w.pool.resize(16);
  for (auto& wave : w.pool) {
    for (std::size_t c = 0; c < fanout; ++c) {
      std::vector<std::int64_t> xs(16);
      for (auto& x : xs) x = static_cast<std::int64_t>(random() % 1000);
      wave.push_back(child_packet(c, {static_cast<std::int64_t>(random() % 1000), std::move(xs)}));
    }
  }
  w.waves = std::max<std::size_t>(20, o.elements_per_run / (fanout * 17));
  return w;
}

// union and incremental_union: 64 random int64 per packet from [0, 65536). After
// its warm-up, incremental_union has seen every one of them: the steady state of a
// long-running stream, where nothing is new.
Workload union_workload(const std::string& filter, std::size_t fanout, const Options& o, std::mt19937_64& random) {
  Workload w{filter == "union" ? "union" : "incremental_union_seen", filter, fanout, "64xint64<65536", {}, 0, true};
  w.pool.resize(64);
  for (auto& wave : w.pool) {
    for (std::size_t c = 0; c < fanout; ++c) {
      std::vector<std::int64_t> xs(64);
      for (auto& x : xs) x = static_cast<std::int64_t>(random() % 65536);
      wave.push_back(child_packet(c, {std::move(xs)}));
    }
  }
  w.waves = std::max<std::size_t>(20, o.elements_per_run / (fanout * 64));
  return w;
}

// incremental_union where every integer is new: the state grows by fan-out x 64
// integers per wave. Distinct values scattered over the whole 64-bit range:
// SplitMix64's finaliser is a bijection, so no two of its outputs are equal.
Workload new_union_workload(std::size_t fanout, const Options& o) {
  Workload w{"incremental_union_new", "incremental_union", fanout, "64xint64_all_new", {}, 0, false};
  w.waves = std::max<std::size_t>(20, o.new_elements_per_run / (fanout * 64));
  w.pool.resize(w.waves);
  std::uint64_t i = 0;
  for (auto& wave : w.pool) {
    for (std::size_t c = 0; c < fanout; ++c) {
      std::vector<std::int64_t> xs(64);
      for (auto& x : xs) {
        std::uint64_t h = ++i;
        h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
        h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
        x = static_cast<std::int64_t>(h ^ (h >> 31));
      }
      wave.push_back(child_packet(c, {std::move(xs)}));
    }
  }
  return w;
}

// prefix_tree: each child sends its call tree: 8 of 32 possible stack traces (12
// frames deep, sharing prefixes as real ones do), under its own rank. After the
// warm-up the merged tree no longer grows; every wave still emits all of it.
Workload prefix_tree_workload(std::size_t fanout, const Options& o, std::mt19937_64& random) {
  Workload w{"prefix_tree", "prefix_tree", fanout, "8_of_32_paths_depth_12", {}, 0, true};
  std::vector<std::vector<std::string>> paths(32);
  for (std::size_t i = 0; i < paths.size(); ++i) {
    paths[i] = {"_start", "__libc_start_main", "main", "solver_loop"};
    for (std::size_t d = 4; d < 12; ++d) {
      // Branch early on few names, later on more, so the tree fans out with depth.
      paths[i].push_back("fn_" + std::to_string(d) + "_" + std::to_string(i % (d - 2)));
    }
  }
  std::size_t nodes = 0;
  w.pool.resize(16);
  for (auto& wave : w.pool) {
    for (std::size_t c = 0; c < fanout; ++c) {
      canopy::CallTree tree;
      for (int k = 0; k < 8; ++k) tree.add_path(paths[random() % paths.size()], static_cast<canopy::Rank>(c));
      nodes += tree.node_count();
      Packet p = tree.to_packet(1);
      p.set_source(static_cast<canopy::Rank>(c));
      wave.push_back(std::move(p));
    }
  }
  // Work grows with the nodes per packet (about 50 here); a node (a string lookup
  // among its siblings, a rank-set check, and its share of the whole tree emitted
  // every wave) costs about 8 integers of the other workloads, so that runs take
  // about as long.
  const std::size_t per_packet = std::max<std::size_t>(1, nodes / (w.pool.size() * fanout));
  w.waves = std::max<std::size_t>(20, o.elements_per_run / (fanout * per_packet * 8));
  return w;
}

// The wire path around the filter (see the top of the file).
class Wire {
 public:
  // Encodes `packet` as a node sends it up and frames it into `out`.
  static void send(const Packet& packet, canopy::transport::FrameBuffer& out) {
    canopy::core::Outgoing message({.rank = packet.source(), .incarnation = 1}, canopy::wire::streams::SERVICE_ID,
                                   canopy::wire::streams::Kind::DATA);
    auto data = message.init<canopy::wire::DataPacket>();
    data.setStreamId(1);
    canopy::core::encode_packet(packet, data);
    canopy::transport::append_frame(message.builder(), out);
  }

  // Receives the one frame in `bytes` as a link does and decodes its packet.
  Packet receive(const canopy::transport::FrameBuffer& frame) {
    const std::size_t n = frame.size() * sizeof(capnp::word);
    auto space = reader_.prepare(n);
    std::memcpy(space.data(), frame.data(), n);
    reader_.commit(n);
    auto body = reader_.next();
    if (!body) throw Failure("frame not decoded: " + reader_.error());
    capnp::FlatArrayMessageReader message(kj::ArrayPtr<const capnp::word>(body->body.data(), body->body.size()));
    auto envelope = message.getRoot<canopy::wire::Message>().getBody().getService();
    return canopy::core::decode_packet(envelope.getBody().getAs<canopy::wire::DataPacket>());
  }

 private:
  canopy::transport::FrameReader reader_;
};

class Runner {
 public:
  explicit Runner(const Options& o) : options_(o) {}

  void run(const Workload& w) {
    if (!options_.only.empty() && std::find(options_.only.begin(), options_.only.end(), w.benchmark) == options_.only.end()) {
      return;
    }
    std::vector<double> filter_rate, codec_rate;
    for (int r = 0; r < options_.runs; ++r) {
      filter_rate.push_back(packets_per_second(w, false));
      codec_rate.push_back(packets_per_second(w, true));
    }
    row(w.benchmark, w.params(), "filter_throughput", stats(filter_rate), "packets/s");
    row(w.benchmark, w.params(), "codec_filter_throughput", stats(codec_rate), "packets/s");
#if CANOPY_COUNT_ALLOCATIONS
    for (bool codec : {false, true}) {
      auto [calls, bytes, packets] = allocations(w, codec);
      const std::string prefix = codec ? "codec_filter_" : "filter_";
      row(w.benchmark, w.params(), prefix + "allocations", {calls / packets, calls / packets, calls / packets,
                                                            static_cast<std::size_t>(packets)}, "allocs/packet");
      row(w.benchmark, w.params(), prefix + "allocated_bytes",
          {bytes / packets, bytes / packets, bytes / packets, static_cast<std::size_t>(packets)}, "bytes/packet");
    }
#endif
  }

 private:
  std::unique_ptr<Filter> fresh(const Workload& w) {
    auto filter = registry_.create(w.filter, canopy::FilterContext{.children = static_cast<std::uint32_t>(w.fanout)});
    if (!filter) throw Failure(w.filter + ": " + filter.error());
    if (w.warm_up) {
      for (const auto& wave : w.pool) execute(**filter, wave);
    }
    return std::move(*filter);
  }

  void execute(Filter& filter, const Wave& wave) {
    out_.clear();
    if (auto r = filter.execute(wave, out_); !r) throw Failure(std::string(filter.name()) + ": " + r.error());
    if (out_.size() != 1) throw Failure(std::string(filter.name()) + ": " + std::to_string(out_.size()) + " packets out of one wave");
  }

  // One wave: through the filter alone, or decoded from and encoded to the wire.
  void wave(Filter& filter, const Wave& input, bool codec) {
    if (!codec) {
      execute(filter, input);
      return;
    }
    received_.clear();
    for (const auto& packet : input) {
      frame_.clear();
      Wire::send(packet, frame_);
      received_.push_back(wire_.receive(frame_));
    }
    execute(filter, received_);
    frame_.clear();
    Wire::send(out_.front(), frame_);
  }

  double packets_per_second(const Workload& w, bool codec) {
    auto filter = fresh(w);
    const auto start = Clock::now();
    for (std::size_t i = 0; i < w.waves; ++i) wave(*filter, w.pool[i % w.pool.size()], codec);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return static_cast<double>(w.waves * w.fanout) / seconds;
  }

  struct Counted {
    double calls, bytes, packets;
  };
  Counted allocations(const Workload& w, bool codec) {
    auto filter = fresh(w);
    wave(*filter, w.pool[0], codec);  // buffers reach their steady size before counting...
    if (!w.warm_up) filter = fresh(w);  // ...but "all new" must not see any wave twice
    g_allocations = {};
    g_allocations.on = true;
    for (std::size_t i = 0; i < w.waves; ++i) wave(*filter, w.pool[i % w.pool.size()], codec);
    g_allocations.on = false;
    const double packets = static_cast<double>(w.waves * w.fanout);
    return {static_cast<double>(g_allocations.calls), static_cast<double>(g_allocations.bytes), packets};
  }

  const Options& options_;
  FilterRegistry registry_ = FilterRegistry::with_builtins();
  std::vector<Packet> out_;
  std::vector<Packet> received_;
  canopy::transport::FrameBuffer frame_;
  Wire wire_;
};

int usage(const char* self) {
  std::fprintf(stderr,
               "usage: %s [--quick] [--runs N] [--only NAME,...]\n"
               "  NAME: sum, union, incremental_union_seen, incremental_union_new, prefix_tree\n",
               self);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int runs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      o.runs = 3;
      o.elements_per_run = 250'000;
      o.new_elements_per_run = 100'000;
    } else if (arg == "--only" && i + 1 < argc) {
      std::string list = argv[++i];
      for (std::size_t at = 0; at <= list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        o.only.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    } else if (arg == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
      if (runs < 1) return usage(argv[0]);
    } else {
      return usage(argv[0]);
    }
  }
  if (runs) o.runs = runs;  // wins over --quick, whatever the order
  if (!CANOPY_COUNT_ALLOCATIONS) {
    std::fprintf(stderr, "canopy-filter-bench: built with a sanitizer: allocations are not counted\n");
  }
  try {
    std::mt19937_64 random(42);  // the same inputs in every run of the program
    Runner runner(o);
    std::printf("benchmark,params,metric,median,p10,p90,unit,samples\n");
    for (std::size_t fanout : {16, 64}) {
      runner.run(sum_workload(fanout, o, random));
      runner.run(union_workload("union", fanout, o, random));
      runner.run(union_workload("incremental_union", fanout, o, random));
      runner.run(new_union_workload(fanout, o));
      runner.run(prefix_tree_workload(fanout, o, random));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "canopy-filter-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
