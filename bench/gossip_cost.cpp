// canopy-gossip-detect-bench cost and size: what the gossip detector costs
// (bench/gossip_cost.sh runs both; docs/benchmarks.md).
//
//   canopy-gossip-detect-bench cost --out DIR [--topology SPEC] [--configs off,dbrr:500,dbrr:100]
//       [--rounds R] [--settle-s S] [--window-s W]
//     On real processes: for each of R rounds (default 3), each configuration in turn
//     (A B C A B C: the machine is shared, so each round compares its own), a tree is
//     launched (default b:4^3, 64 back-ends), left S s (default 5) to settle, then
//     measured for W s (default 10): the CPU time (the scheduler's runtime of every
//     thread, /proc/PID/task/TID/sched) of every process of the tree, the front-end
//     (this program) included, and the
//     bytes every TCP socket of them sent (the kernel's tcpi_bytes_sent, via ss).
//     Writes DIR/cost.csv, one row per measurement; prints, per configuration, the
//     median over rounds and the gossip's share (the configuration minus "off" in the
//     same round, median over rounds) per member and second.
//
//   canopy-gossip-detect-bench size [--n 64,1024] [--topologies b:4^3,b:32^2,b:4^5]
//       [--periods-ms 500,100]
//     Computed: the bytes of one Table message on the wire (the frame the links send,
//     transport/frame.h) for n members (and version 2's plain table, computed); then,
//     for each topology with n back-ends and each schedule (BRR, DBRR), the mean tree
//     hops of a table over a cycle and the share crossing the front-end, hence the
//     bytes per member per second (frame * hops / T) and the front-end's load. The
//     CPU of one table (built and framed; read and merged; read, copied and framed
//     again by a process on the way) is timed here, in this process, outside any tree.
#include <unistd.h>

#include <algorithm>
#include <capnp/serialize.h>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "core/service.h"
#include "gossip.capnp.h"
#include "gossip_tree.h"
#include "membership/gossip_schedule.h"
#include "membership/gossip_table.h"
#include "process_guard.h"
#include "transport/frame.h"

namespace canopy::gossip_bench {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Config {
  GossipSchedule schedule = GossipSchedule::off;
  milliseconds period{500};
};

std::vector<Config> parse_configs(const std::string& text) {
  std::vector<Config> out;
  for (const auto& item : split(text, ',')) {
    const auto parts = split(item, ':');
    auto schedule = gossip_schedule_from(parts.empty() ? "" : parts[0]);
    if (!schedule || parts.size() > 2 || (*schedule != GossipSchedule::off && parts.size() != 2)) {
      throw BadArgument("--configs " + text + ": expected off or SCHEDULE:PERIOD_MS, e.g. off,dbrr:500");
    }
    Config c{*schedule};
    if (parts.size() == 2) c.period = milliseconds(std::strtol(parts[1].c_str(), nullptr, 10));
    if (c.schedule != GossipSchedule::off && c.period.count() < 10) throw BadArgument("a period below 10 ms");
    out.push_back(c);
  }
  if (out.empty()) throw BadArgument("--configs: none given");
  return out;
}

struct Measure {
  int round = 0;
  std::string config;
  std::size_t processes = 0;
  double window_s = 0;
  double cpu[3] = {0, 0, 0};            // back-ends, commnodes, front-end (s)
  std::uint64_t bytes[3] = {0, 0, 0};  // the same
};

int cost(Args& a) {
  const std::string out = a.text("--out", "");
  if (out.empty()) throw BadArgument("--out DIR is required");
  const std::string spec = a.text("--topology", "b:4^3");
  const auto configs = parse_configs(a.text("--configs", "off,dbrr:500,dbrr:100"));
  const int rounds = static_cast<int>(a.number("--rounds", 3, 1, 100));
  const auto settle = std::chrono::seconds(a.number("--settle-s", 5, 0, 600));
  const auto window = std::chrono::seconds(a.number("--window-s", 10, 1, 3600));
  a.finish();
  auto topology = generate_topology(spec);
  if (!topology) throw BadArgument("--topology " + spec + ": " + topology.error());
  const auto n = topology->backends().size();
  fs::create_directories(out);
  std::vector<Measure> measures;
  for (int r = 0; r < rounds; ++r) {
    for (const auto& c : configs) {
      Measure m{r, config_name(c.schedule, c.period)};
      std::fprintf(stderr, "  round %d: %s\n", r, m.config.c_str());
      TreeSettings settings{.topology = spec, .schedule = c.schedule, .period = c.period,
                            .out = out + "/run-" + std::to_string(r) + "-" + m.config};
      auto net = launch_tree(settings, *topology);
      std::this_thread::sleep_for(settle);
      auto pids = tree_pids();
      pids[kFirstInternalRank] = getpid();
      std::vector<pid_t> all;
      for (const auto& [rank, pid] : pids) all.push_back(pid);
      auto role = [&](Rank r) { return r == kFirstInternalRank ? 2 : topology->at(r).role == Role::backend ? 0 : 1; };
      std::map<Rank, double> cpu0;
      for (const auto& [rank, pid] : pids) cpu0[rank] = cpu_seconds(pid);
      auto bytes0 = tcp_bytes_sent(all);
      const auto t0 = Steady::now();
      std::this_thread::sleep_for(window);
      auto bytes1 = tcp_bytes_sent(all);
      for (const auto& [rank, pid] : pids) {
        const double used = cpu_seconds(pid) - cpu0[rank];
        if (!std::isnan(used)) m.cpu[role(rank)] += used;
        m.bytes[role(rank)] += bytes1[pid] - std::min(bytes1[pid], bytes0[pid]);
      }
      m.window_s = std::chrono::duration<double>(Steady::now() - t0).count();
      m.processes = pids.size();
      shut_down(*net);
      net.reset();
      if (!testing::ProcessGuard::wait_for_none(10s).empty()) {
        testing::ProcessGuard::kill_all();
        throw Failure("processes left over after a shutdown (killed)");
      }
      measures.push_back(m);
    }
  }
  std::ofstream csv(out + "/cost.csv");
  csv << "round,config,backends,processes,window_s,cpu_s,cpu_backends_s,cpu_commnodes_s,cpu_frontend_s,bytes,"
         "bytes_backends,bytes_commnodes,bytes_frontend\n";
  std::map<std::pair<int, std::string>, const Measure*> by;
  for (const auto& m : measures) {
    by[{m.round, m.config}] = &m;
    csv << m.round << ',' << m.config << ',' << n << ',' << m.processes << ',' << m.window_s << ','
        << m.cpu[0] + m.cpu[1] + m.cpu[2] << ',' << m.cpu[0] << ',' << m.cpu[1] << ',' << m.cpu[2] << ','
        << m.bytes[0] + m.bytes[1] + m.bytes[2] << ',' << m.bytes[0] << ',' << m.bytes[1] << ',' << m.bytes[2]
        << '\n';
  }
  std::printf("benchmark,config,topology,metric,value,unit\n");
  auto cpu_rate = [](const Measure& m) { return (m.cpu[0] + m.cpu[1] + m.cpu[2]) / m.window_s; };
  auto byte_rate = [](const Measure& m) {
    return static_cast<double>(m.bytes[0] + m.bytes[1] + m.bytes[2]) / m.window_s;
  };
  for (const auto& c : configs) {
    const std::string name = config_name(c.schedule, c.period);
    std::vector<double> cpu, bytes, cpu_extra, bytes_extra, frontend_extra;
    for (int r = 0; r < rounds; ++r) {
      const Measure& m = *by.at({r, name});
      cpu.push_back(cpu_rate(m));
      bytes.push_back(byte_rate(m));
      if (auto off = by.find({r, "off"}); off != by.end() && name != "off") {
        cpu_extra.push_back((cpu_rate(m) - cpu_rate(*off->second)) / static_cast<double>(n));
        bytes_extra.push_back((byte_rate(m) - byte_rate(*off->second)) / static_cast<double>(n));
        frontend_extra.push_back((m.cpu[2] / m.window_s - off->second->cpu[2] / off->second->window_s));
      }
    }
    print_row("cost", name, spec, "tree_cpu_median", quantile(cpu, 0.5) * 1000, "ms_per_s");
    print_row("cost", name, spec, "tree_bytes_median", quantile(bytes, 0.5), "bytes_per_s");
    if (cpu_extra.empty()) continue;
    print_row("cost", name, spec, "gossip_cpu_per_member_median", quantile(cpu_extra, 0.5) * 1e6, "us_per_s");
    const auto [lo, hi] = std::minmax_element(cpu_extra.begin(), cpu_extra.end());
    print_row("cost", name, spec, "gossip_cpu_per_member_min", *lo * 1e6, "us_per_s");
    print_row("cost", name, spec, "gossip_cpu_per_member_max", *hi * 1e6, "us_per_s");
    print_row("cost", name, spec, "gossip_bytes_per_member_median", quantile(bytes_extra, 0.5), "bytes_per_s");
    print_row("cost", name, spec, "gossip_frontend_cpu_median", quantile(frontend_extra, 0.5) * 1000, "ms_per_s");
  }
  return 0;
}

// ---- size: computed ----

core::NodeIdentity member_identity() { return {.rank = 0, .role = Role::backend}; }

// The entries of a table of n members as a member sends it a few minutes into a run:
// epoch 0, beats of about 480 spread over 40 (start-ups seconds apart, tables a few
// rounds old), drawn with a fixed seed.
std::vector<membership::TableEntry> sample_entries(std::uint32_t n) {
  std::mt19937_64 rng(n);
  std::uniform_int_distribution<std::uint64_t> beat(460, 500);
  std::vector<membership::TableEntry> entries;
  for (Rank i = 0; i < n; ++i) entries.push_back({i, beat(rng)});
  return entries;
}

void fill_table(core::Outgoing& message, const std::vector<membership::TableEntry>& entries, Rank destination) {
  auto t = message.init<wire::gossip::Table>();
  t.setSource(0);
  t.setDestination(destination);
  const auto bytes = membership::encode_table(entries);
  t.setEntries(kj::arrayPtr(bytes.data(), bytes.size()));
}

// That table, framed as the links send it.
canopy::transport::FrameBuffer table_frame(std::uint32_t n) {
  core::Outgoing message(member_identity(), wire::gossip::SERVICE_ID, wire::gossip::Kind::TABLE);
  fill_table(message, sample_entries(n), n / 2);
  canopy::transport::FrameBuffer out;
  transport::append_frame(message.builder(), out);
  return out;
}

template <typename Message>
std::size_t frame_bytes(Message& message) {
  canopy::transport::FrameBuffer out;
  transport::append_frame(message.builder(), out);
  return out.size() * sizeof(capnp::word);
}

wire::gossip::Table::Reader table_of(capnp::FlatArrayMessageReader& reader) {
  return reader.getRoot<wire::Message>().getBody().getService().getBody().getAs<wire::gossip::Table>();
}

// Microseconds per call of `f`, over about 0.2 s.
template <typename F>
double time_us(F&& f) {
  std::size_t calls = 0;
  const auto start = Steady::now();
  while (Steady::now() - start < 200ms) {
    for (int i = 0; i < 16; ++i) f();
    calls += 16;
  }
  return std::chrono::duration<double, std::micro>(Steady::now() - start).count() / static_cast<double>(calls);
}

struct Timing {
  double send_us, receive_us, forward_us;
};

// What a member does to send a table, what its destination does to merge one (the
// loop of GossipService::merge over a std::map of peers), and what a process on the
// way does to pass one on; timed on this machine, for n members.
Timing time_table(std::uint32_t n) {
  struct Peer {
    std::uint64_t beat = 0;
    Steady::time_point grew;
  };
  std::map<Rank, Peer> peers;
  for (Rank r = 1; r < n; ++r) peers[r] = {};
  const auto frame = table_frame(n);
  const auto body = kj::arrayPtr(canopy::transport::as_capnp(frame.data() + 1), frame.size() - 1);
  canopy::transport::FrameBuffer sink;
  Timing t{};
  std::vector<membership::TableEntry> entries = sample_entries(n);
  t.send_us = time_us([&] {
    for (std::uint32_t i = 1; i < n; ++i) entries[i].beat = peers[i].beat;
    core::Outgoing message(member_identity(), wire::gossip::SERVICE_ID, wire::gossip::Kind::TABLE);
    fill_table(message, entries, n / 2);
    sink.clear();
    transport::append_frame(message.builder(), sink);
  });
  std::uint64_t bump = 0;
  t.receive_us = time_us([&] {
    capnp::FlatArrayMessageReader reader(body);
    const auto data = table_of(reader).getEntries();
    const auto decoded = membership::decode_table({data.begin(), data.size()});
    const auto now = Steady::now();
    ++bump;
    for (const auto& [rank, beat] : *decoded) {
      auto it = peers.find(rank);
      if (it == peers.end() || beat + bump <= it->second.beat) continue;
      it->second.beat = beat + bump;
      it->second.grew = now;
    }
  });
  t.forward_us = time_us([&] {
    capnp::FlatArrayMessageReader reader(body);
    core::Outgoing out(member_identity(), wire::gossip::SERVICE_ID, wire::gossip::Kind::TABLE);
    out.set<wire::gossip::Table>(table_of(reader));
    sink.clear();
    transport::append_frame(out.builder(), sink);
  });
  return t;
}

// Tree hops between two ranks, and whether the path goes through the root.
struct Paths {
  explicit Paths(const Topology& t) : t_(t) {}
  std::vector<Rank> up(Rank r) const {
    std::vector<Rank> chain{r};
    for (auto p = t_.at(r).parent; p; p = t_.at(*p).parent) chain.push_back(*p);
    return chain;
  }
  std::pair<int, bool> between(Rank a, Rank b) const {
    const auto ua = up(a), ub = up(b);
    for (std::size_t i = 0; i < ua.size(); ++i) {
      auto it = std::find(ub.begin(), ub.end(), ua[i]);
      if (it != ub.end()) return {static_cast<int>(i + (it - ub.begin())), ua[i] == t_.root().rank};
    }
    return {0, false};
  }
  const Topology& t_;
};

int size(Args& a) {
  std::vector<std::uint32_t> ns;
  for (const auto& v : split(a.text("--n", "64,1024"), ',')) ns.push_back(static_cast<std::uint32_t>(std::stoul(v)));
  const auto specs = split(a.text("--topologies", "b:4^3,b:32^2,b:4^5"), ',');
  std::vector<double> periods;
  for (const auto& v : split(a.text("--periods-ms", "500,100"), ',')) periods.push_back(std::stod(v));
  a.finish();
  std::printf("benchmark,config,topology,metric,value,unit\n");
  std::map<std::uint32_t, std::size_t> frames;
  std::map<std::uint32_t, Timing> timings;
  for (auto n : ns) {
    if (n < 2) throw BadArgument("--n: at least 2");
    const std::string config = "n=" + std::to_string(n);
    frames[n] = table_frame(n).size() * sizeof(capnp::word);
    print_row("size", config, "-", "table_frame", static_cast<double>(frames[n]), "bytes");
    print_row("size", config, "-", "table_frame_per_member", static_cast<double>(frames[n]) / n, "bytes");
    // Version 2's plain table for comparison: a UInt32 and a UInt64 list, 12 bytes a
    // member, in a frame of the same header.
    const auto header = table_frame(2).size() * sizeof(capnp::word) - membership::encode_table(sample_entries(2)).size();
    print_row("size", config, "-", "table_plain_v2", static_cast<double>(header + 12 * n), "bytes");
    timings[n] = time_table(n);
    print_row("size", config, "-", "send_cpu", timings[n].send_us, "us");
    print_row("size", config, "-", "receive_merge_cpu", timings[n].receive_us, "us");
    print_row("size", config, "-", "forward_cpu", timings[n].forward_us, "us");
  }
  core::Outgoing ping(member_identity(), wire::gossip::SERVICE_ID, wire::gossip::Kind::PING);
  ping.init<wire::gossip::Ping>().setNonce(1);
  print_row("size", "-", "-", "ping_frame", static_cast<double>(frame_bytes(ping)), "bytes");
  core::Outgoing pong(member_identity(), wire::gossip::SERVICE_ID, wire::gossip::Kind::PONG);
  pong.init<wire::gossip::Pong>().setBeat(500);
  print_row("size", "-", "-", "pong_frame", static_cast<double>(frame_bytes(pong)), "bytes");

  for (const auto& spec : specs) {
    auto topology = generate_topology(spec);
    if (!topology) throw BadArgument("--topologies " + spec + ": " + topology.error());
    const auto ring = topology->backends();
    const auto n = static_cast<std::uint32_t>(ring.size());
    if (!frames.count(n)) continue;
    const Paths paths(*topology);
    for (auto schedule : {GossipSchedule::brr, GossipSchedule::dbrr}) {
      const auto rounds = membership::cycle_rounds(schedule, n);
      std::mt19937_64 rng(1);
      double hops = 0, through_root = 0;
      for (std::uint32_t r = 1; r <= rounds; ++r) {
        for (std::uint32_t s = 0; s < n; ++s) {
          const auto [h, root] = paths.between(ring[s], ring[membership::gossip_target(schedule, s, r, n, rng)]);
          hops += h;
          through_root += root;
        }
      }
      const double tables = static_cast<double>(rounds) * n;
      const double mean_hops = hops / tables, root_share = through_root / tables;
      const std::string config = std::string(to_string(schedule)) + " n=" + std::to_string(n);
      print_row("size", config, spec, "mean_hops", mean_hops, "hops");
      print_row("size", config, spec, "through_frontend_share", root_share, "fraction");
      const auto& tm = timings[n];
      for (double p : periods) {
        const double per_s = 1000.0 / p;
        const std::string at = config + " T=" + std::to_string(static_cast<int>(p));
        // Bytes the tree's sockets send per member per second: the table once per
        // hop. The front-end receives and sends each table that crosses it.
        const double frame = static_cast<double>(frames[n]);
        print_row("size", at, spec, "bytes_per_member", frame * mean_hops * per_s, "bytes_per_s");
        print_row("size", at, spec, "frontend_bytes_in_plus_out",
                  2.0 * root_share * n * frame * per_s, "bytes_per_s");
        // CPU: built and sent once, merged once, passed on by hops - 1 processes.
        print_row("size", at, spec, "cpu_per_member_computed",
                  (tm.send_us + tm.receive_us + (mean_hops - 1) * tm.forward_us) * per_s, "us_per_s");
        print_row("size", at, spec, "frontend_cpu_computed", root_share * n * tm.forward_us * per_s / 1000.0,
                  "ms_per_s");
      }
    }
  }
  return 0;
}

}  // namespace

int cost_main(Args& args) { return cost(args); }
int size_main(Args& args) { return size(args); }

}  // namespace canopy::gossip_bench
