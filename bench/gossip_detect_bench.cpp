// canopy-gossip-detect-bench: the gossip failure detector (membership/gossip.h) on
// real processes (docs/benchmarks.md, "Gossip: detection time (paper 003 Fig. 6),
// false positives and cost"). Every back-end is canopy-gossip-backend, which writes
// each failure it learns of to a file. Four modes:
//
//   canopy-gossip-detect-bench detect --out DIR [--topology SPEC] [--schedule brr|dbrr|rr|random]
//       [--period-ms T] [--max-hangup-ms H] [--ping-timeout-ms P] [--samples S]
//       [--warmup-rounds R] [--first-host I] [--lost-ms L] [--suspect-ms S] [--linger-ms M] [--log]
//     Paper 003's Fig. 6 at one point: a tree per sample; after R rounds of gossip
//     (default 3⌈log2 n⌉: three BRR cycles, one and a half DBRR ones, so that both
//     schedules gossip as long and every heartbeat has reached every member, which
//     takes ⌈log2 n⌉ rounds, three times over) every back-end of one "host" (the back-ends below one leaf
//     commnode, which would share a host in a real run) is SIGSTOPped at once, and
//     every other back-end's first news of each of them is timed: its own gossip
//     event or a view without it, whichever came first. Another host per sample.
//     Defaults: b:4^2, brr, T = 500 ms, H = 0, P = T, 3 samples, and the tree's own
//     detection slowed to suspect 30 s, lost 60 s, so that the gossip finds them.
//     Once every survivor knows (or after three times the time it should take), the
//     run goes on for M ms (default 2T + 500 ms) before the stopped members are
//     killed: what the front-end saw by then (its first view without one of them) is
//     reported too.
//   canopy-gossip-detect-bench soak ...     false positives under load (gossip_soak.cpp)
//   canopy-gossip-detect-bench cost ...     CPU and bytes, gossip off and on (gossip_cost.cpp)
//   canopy-gossip-detect-bench size ...     the table's encoded size (gossip_cost.cpp)
//
// detect writes DIR/sample-K/ (the back-ends' events-RANK.csv, frontend.csv: the
// front-end's events), DIR/detect.csv (one row per survivor and stopped member),
// DIR/false.csv (every member other than the stopped ones that a view or a detector
// declared failed: false positives) and DIR/samples.csv; it prints summary rows
// (benchmark,config,topology,metric,value,unit) on stdout. Every mode checks at the
// end that no process it started is left (it is the subreaper of all of them),
// killing and reporting any that is; the stopped ones are killed and continued.
// Bad arguments exit with status 2, a failed run with status 1.
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "gossip_tree.h"
#include "membership/gossip_schedule.h"
#include "process_guard.h"

namespace canopy::gossip_bench {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kUsage =
    "usage: canopy-gossip-detect-bench detect --out DIR [--topology SPEC] [--schedule brr|dbrr|rr|random]\n"
    "         [--period-ms T] [--max-hangup-ms H] [--ping-timeout-ms P] [--samples S] [--warmup-rounds R]\n"
    "         [--first-host I] [--lost-ms L] [--suspect-ms S] [--linger-ms M] [--log]\n"
    "       canopy-gossip-detect-bench soak --out DIR [--topology SPEC] [--schedule S] [--period-ms T]\n"
    "         [--minutes M | --seconds S] [--pause-min-ms A] [--pause-max-ms B] [--gap-min-ms A] [--gap-max-ms B]\n"
    "         [--max-hangup-ms H] [--ping-timeout-ms P] [--lost-ms L] [--seed S] [--log]\n"
    "       canopy-gossip-detect-bench cost --out DIR [--topology SPEC] [--configs off,dbrr:500,...] [--rounds R]\n"
    "         [--settle-s S] [--window-s W]\n"
    "       canopy-gossip-detect-bench size [--n 64,1024] [--topologies b:4^3,b:32^2,b:4^5] [--periods-ms 500,100]\n";

struct Options {
  std::string out;
  std::string topology = "b:4^2";
  GossipSchedule schedule = GossipSchedule::brr;
  milliseconds period{500}, max_hangup{0}, ping_timeout{0}, lost{60000}, suspect{30000}, linger{0};
  int samples = 3;
  int first_host = 0;
  long warmup_rounds = 0;  // 0: 3⌈log2 n⌉
  bool log = false;
};

long warmup_rounds(const Options& o, std::uint32_t n) {
  return o.warmup_rounds > 0 ? o.warmup_rounds : 3 * static_cast<long>(membership::ceil_log2(n));
}

// What one survivor learned of one stopped member.
struct Pair {
  int sample = 0;
  Rank host = 0, member = 0, survivor = 0;
  std::int64_t stop_us = 0;
  std::int64_t gossip_us = -1, view_us = -1, failure_us = -1;  // -1: never
  std::int64_t learned_us = -1;
  std::string how = "none";  // gossip, view, failure (the links' own detection)
  bool after_view = false;   // the survivor had applied a view without another stopped member first
};

struct FalsePositive {
  int sample = 0;
  std::string where;  // "frontend" or the back-end's rank
  std::string kind;   // view, gossip, failure
  Rank member = 0;
  std::int64_t time_us = 0;
};

struct Sample {
  std::vector<Pair> pairs;
  std::vector<FalsePositive> false_positives;
  std::int64_t stop_us = 0, kill_us = 0;
  std::int64_t frontend_view_us = -1;  // the front-end's first view without a stopped member
  double waited_s = 0;
  bool complete = false;  // every survivor learned of every stopped member
};

void sleep_draining(Network& net, FrontEvents& fe, Steady::duration d) {
  const auto until = Steady::now() + d;
  while (Steady::now() < until) {
    fe.drain(net);
    std::this_thread::sleep_for(std::min<Steady::duration>(50ms, until - Steady::now()));
  }
}

// The first news of each stopped member at each survivor.
// News after `until_us` (when the stopped members were killed, which the tree then
// sees at once) is left out.
std::vector<Pair> pairs_of(const std::vector<BackendEvent>& events, const std::vector<Rank>& survivors,
                           const std::map<Rank, std::int64_t>& stopped, std::int64_t until_us) {
  std::map<std::pair<Rank, Rank>, Pair> out;
  std::map<Rank, std::int64_t> first_view;  // survivor -> first view without a stopped member
  for (Rank s : survivors) {
    for (const auto& [m, at] : stopped) out[{s, m}] = Pair{.member = m, .survivor = s, .stop_us = at};
  }
  auto earliest = [](std::int64_t& slot, std::int64_t t) {
    if (slot < 0 || t < slot) slot = t;
  };
  for (const auto& e : events) {
    auto it = out.find({e.rank, e.member});
    if (it == out.end() || e.time_us < it->second.stop_us || e.time_us > until_us) continue;
    if (e.kind == "gossip") earliest(it->second.gossip_us, e.time_us);
    if (e.kind == "view") {
      earliest(it->second.view_us, e.time_us);
      if (!first_view.count(e.rank) || e.time_us < first_view[e.rank]) first_view[e.rank] = e.time_us;
    }
    if (e.kind == "failure") earliest(it->second.failure_us, e.time_us);
  }
  std::vector<Pair> pairs;
  for (auto& [key, p] : out) {
    for (auto [t, how] : {std::pair{p.gossip_us, "gossip"}, {p.view_us, "view"}, {p.failure_us, "failure"}}) {
      if (t >= 0 && (p.learned_us < 0 || t < p.learned_us)) {
        p.learned_us = t;
        p.how = how;
      }
    }
    p.after_view = first_view.count(p.survivor) && p.learned_us > first_view[p.survivor];
    pairs.push_back(p);
  }
  return pairs;
}

Sample run_sample(const Options& o, const Topology& topology, int k) {
  const auto backends = topology.backends();
  const auto n = static_cast<std::uint32_t>(backends.size());
  const auto hosts = leaf_commnodes(topology);
  const Rank host = hosts[(static_cast<std::size_t>(o.first_host) + static_cast<std::size_t>(k) * hosts.size() /
                           static_cast<std::size_t>(o.samples)) % hosts.size()];
  const auto victims = topology.backends_below(host);
  std::vector<Rank> survivors;
  for (Rank b : backends) {
    if (!std::count(victims.begin(), victims.end(), b)) survivors.push_back(b);
  }
  const std::string dir = o.out + "/sample-" + std::to_string(k);
  fs::remove_all(dir);
  TreeSettings settings{.topology = o.topology, .schedule = o.schedule, .period = o.period,
                        .max_hangup = o.max_hangup, .ping_timeout = o.ping_timeout, .suspect = o.suspect,
                        .lost = o.lost, .out = dir, .log = o.log};
  auto net = launch_tree(settings, topology);
  FrontEvents fe;
  sleep_draining(*net, fe, o.period * warmup_rounds(o, n));

  const auto pids = tree_pids();
  std::map<Rank, std::int64_t> stopped;
  std::vector<pid_t> stopped_pids;
  for (Rank r : victims) {
    if (!pids.count(r)) throw Failure("back-end " + std::to_string(r) + " is not running");
  }
  for (Rank r : victims) {
    stopped[r] = realtime_us();
    ::kill(pids.at(r), SIGSTOP);
    stopped_pids.push_back(pids.at(r));
  }
  Sample sample;
  sample.stop_us = stopped.begin()->second;
  std::fprintf(stderr, "  sample %d: stopped host %u (back-ends %s)\n", k, host, ranks_text(victims).c_str());

  // Until every survivor has learned of every stopped member, or three times the
  // time the detector should need.
  const auto suspicion = o.period * membership::cleanup_rounds(o.schedule, n) + o.max_hangup;
  const auto ping = o.ping_timeout.count() > 0 ? o.ping_timeout : o.lost;
  const auto limit = 3 * (suspicion + ping) + 4 * o.period + 2s;
  const auto begin = Steady::now();
  while (Steady::now() - begin < limit) {
    sleep_draining(*net, fe, 100ms);
    const auto pairs = pairs_of(read_backend_events(dir, survivors), survivors, stopped, realtime_us());
    if (std::all_of(pairs.begin(), pairs.end(), [](const Pair& p) { return p.learned_us >= 0; })) {
      sample.complete = true;
      break;
    }
  }
  sample.waited_s = std::chrono::duration<double>(Steady::now() - begin).count();
  // A little longer, for what comes late (a false detection, the view).
  sleep_draining(*net, fe, o.linger.count() > 0 ? o.linger : 2 * o.period + 500ms);
  const std::int64_t end_us = realtime_us();
  sample.kill_us = end_us;
  for (pid_t pid : stopped_pids) {
    ::kill(pid, SIGKILL);
    ::kill(pid, SIGCONT);
  }
  std::this_thread::sleep_for(200ms);
  fe.drain(*net);
  shut_down(*net);
  net.reset();
  fe.write(dir + "/frontend.csv");
  auto left = testing::ProcessGuard::wait_for_none(10s);
  if (!left.empty()) {
    testing::ProcessGuard::kill_all();
    throw Failure(std::to_string(left.size()) + " processes left over after the shutdown of sample " +
                  std::to_string(k) + " (killed)");
  }

  const auto events = read_backend_events(dir, backends);
  sample.pairs = pairs_of(events, survivors, stopped, end_us);
  for (auto& p : sample.pairs) {
    p.sample = k;
    p.host = host;
  }
  // Until the stopped ones were killed above, nobody else may have been declared
  // failed: by a back-end's detector, by a view, by the tree.
  for (const auto& e : events) {
    if (!stopped.count(e.member) && e.time_us < end_us) {
      sample.false_positives.push_back({k, std::to_string(e.rank), e.kind, e.member, e.time_us});
    }
  }
  for (const auto& e : fe.all()) {
    std::vector<Rank> named = e.left;
    if (e.kind == "gossip" || e.kind == "failure") named = {e.rank};
    if ((e.kind != "view" && e.kind != "gossip" && e.kind != "failure") || e.time_us >= end_us) continue;
    for (Rank r : named) {
      if (!stopped.count(r)) sample.false_positives.push_back({k, "frontend", e.kind, r, e.time_us});
      if (e.kind == "view" && stopped.count(r) && sample.frontend_view_us < 0) sample.frontend_view_us = e.time_us;
    }
  }
  return sample;
}

int detect(const Options& o) {
  auto topology = generate_topology(o.topology);
  if (!topology) throw BadArgument("--topology " + o.topology + ": " + topology.error());
  const auto n = static_cast<std::uint32_t>(topology->backends().size());
  const auto hosts = leaf_commnodes(*topology);
  const std::string config = config_name(o.schedule, o.period);
  fs::create_directories(o.out);
  std::vector<Sample> samples;
  for (int k = 0; k < o.samples; ++k) samples.push_back(run_sample(o, *topology, k));

  std::ofstream pairs_csv(o.out + "/detect.csv");
  pairs_csv << "sample,host,member,survivor,stop_us,gossip_us,view_us,failure_us,learned_us,how,detection_ms,"
               "after_view\n";
  std::ofstream false_csv(o.out + "/false.csv");
  false_csv << "sample,where,kind,member,time_us\n";
  std::ofstream samples_csv(o.out + "/samples.csv");
  samples_csv << "sample,stop_us,pairs,learned,mean_ms,median_ms,max_ms,waited_s,complete,false_positives,"
                 "killed_after_s,frontend_view_after_s\n";
  std::vector<double> all, first, after;
  std::map<std::string, std::size_t> how;
  std::set<Rank> false_members;
  std::size_t false_events = 0, pairs = 0, frontend_views = 0;
  for (const auto& s : samples) {
    std::vector<double> here;
    for (const auto& p : s.pairs) {
      ++pairs;
      ++how[p.how];
      const double ms = p.learned_us >= 0 ? static_cast<double>(p.learned_us - p.stop_us) / 1000.0 : NAN;
      pairs_csv << p.sample << ',' << p.host << ',' << p.member << ',' << p.survivor << ',' << p.stop_us << ','
                << p.gossip_us << ',' << p.view_us << ',' << p.failure_us << ',' << p.learned_us << ',' << p.how
                << ',' << ms << ',' << (p.after_view ? 1 : 0) << '\n';
      if (std::isnan(ms)) continue;
      here.push_back(ms);
      all.push_back(ms);
      (p.after_view ? after : first).push_back(ms);
    }
    for (const auto& f : s.false_positives) {
      false_csv << f.sample << ',' << f.where << ',' << f.kind << ',' << f.member << ',' << f.time_us << '\n';
      false_members.insert(f.member);
      ++false_events;
    }
    samples_csv << &s - samples.data() << ',' << s.stop_us << ',' << s.pairs.size() << ',' << here.size() << ','
                << mean(here) << ',' << quantile(here, 0.5) << ','
                << (here.empty() ? NAN : *std::max_element(here.begin(), here.end())) << ',' << s.waited_s << ','
                << (s.complete ? 1 : 0) << ',' << s.false_positives.size() << ','
                << static_cast<double>(s.kill_us - s.stop_us) / 1e6 << ','
                << (s.frontend_view_us < 0 ? NAN : static_cast<double>(s.frontend_view_us - s.stop_us) / 1e6) << '\n';
    frontend_views += s.frontend_view_us >= 0;
  }

  const double t = static_cast<double>(o.period.count());
  const double cleanup = t * membership::cleanup_rounds(o.schedule, n);
  const double ping = static_cast<double>((o.ping_timeout.count() > 0 ? o.ping_timeout : o.lost).count());
  const double goal = cleanup + t;
  const auto within = std::count_if(all.begin(), all.end(), [&](double v) { return v <= goal; });
  auto row = [&](const std::string& metric, double value, const char* unit) {
    print_row("detect", config, o.topology, metric, value, unit);
  };
  std::printf("benchmark,config,topology,metric,value,unit\n");
  row("backends", n, "count");
  row("per_host", static_cast<double>(topology->backends_below(hosts.front()).size()), "count");
  row("samples", static_cast<double>(samples.size()), "count");
  row("period", t, "ms");
  row("max_hangup", static_cast<double>(o.max_hangup.count()), "ms");
  row("ping_timeout", ping, "ms");
  row("cleanup_rounds", membership::cleanup_rounds(o.schedule, n), "rounds");
  row("t_cleanup", cleanup, "ms");
  row("goal", goal, "ms");
  row("t_cleanup_plus_hangup_period_ping", cleanup + static_cast<double>(o.max_hangup.count()) + t + ping, "ms");
  row("warmup_rounds", static_cast<double>(warmup_rounds(o, n)), "rounds");
  row("pairs", static_cast<double>(pairs), "count");
  row("learned", static_cast<double>(all.size()), "count");
  row("by_gossip", static_cast<double>(how["gossip"]), "count");
  row("by_view", static_cast<double>(how["view"]), "count");
  row("by_failure", static_cast<double>(how["failure"]), "count");
  row("detection_mean", mean(all), "ms");
  row("detection_median", quantile(all, 0.5), "ms");
  row("detection_p10", quantile(all, 0.1), "ms");
  row("detection_p90", quantile(all, 0.9), "ms");
  row("detection_min", all.empty() ? NAN : *std::min_element(all.begin(), all.end()), "ms");
  row("detection_max", all.empty() ? NAN : *std::max_element(all.begin(), all.end()), "ms");
  row("within_goal", static_cast<double>(within), "count");
  row("before_any_view", static_cast<double>(first.size()), "count");
  row("before_any_view_mean", mean(first), "ms");
  row("after_a_view", static_cast<double>(after.size()), "count");
  row("after_a_view_mean", mean(after), "ms");
  row("samples_with_a_frontend_view_before_the_kill", static_cast<double>(frontend_views), "count");
  row("false_positive_members", static_cast<double>(false_members.size()), "count");
  row("false_positive_events", static_cast<double>(false_events), "count");
  return all.size() == pairs ? 0 : 1;
}

Options parse_detect(Args& a) {
  Options o;
  o.out = a.text("--out", "");
  if (o.out.empty()) throw BadArgument("--out DIR is required");
  o.topology = a.text("--topology", o.topology);
  o.schedule = a.schedule("--schedule", o.schedule);
  if (o.schedule == GossipSchedule::off) throw BadArgument("--schedule off: there is no detector to time");
  o.period = a.ms("--period-ms", o.period);
  if (o.period.count() < 10) throw BadArgument("--period-ms: at least 10");
  o.max_hangup = a.ms("--max-hangup-ms", o.max_hangup);
  o.ping_timeout = a.ms("--ping-timeout-ms", o.period);
  o.lost = a.ms("--lost-ms", o.lost);
  o.suspect = a.ms("--suspect-ms", o.suspect);
  o.linger = a.ms("--linger-ms", o.linger);
  o.samples = static_cast<int>(a.number("--samples", o.samples, 1, 1000));
  o.first_host = static_cast<int>(a.number("--first-host", o.first_host, 0, 1000000));
  o.warmup_rounds = a.number("--warmup-rounds", 0, 1, 100000);
  o.log = a.flag("--log");
  a.finish();
  return o;
}

}  // namespace

int detect_main(Args& args) { return detect(parse_detect(args)); }

}  // namespace canopy::gossip_bench

int main(int argc, char** argv) {
  using namespace canopy::gossip_bench;
  signal(SIGPIPE, SIG_IGN);
  const std::string mode = argc > 1 ? argv[1] : "";
  canopy::testing::ProcessGuard guard;
  try {
    self_directory();
    Args args(argc > 2 ? argc - 2 : 0, argv + (argc > 2 ? 2 : argc), {"--log", "--quick"});
    if (mode == "detect") return detect_main(args);
    if (mode == "soak") return soak_main(args);
    if (mode == "cost") return cost_main(args);
    if (mode == "size") return size_main(args);
    throw BadArgument(mode.empty() ? "a mode is required" : "unknown mode " + mode);
  } catch (const BadArgument& e) {
    std::fprintf(stderr, "canopy-gossip-detect-bench: %s\n%s", e.what(), kUsage);
    return 2;
  } catch (const std::exception& e) {  // Failure, and whatever else ends a run
    std::fprintf(stderr, "canopy-gossip-detect-bench: %s\n", e.what());
    canopy::testing::ProcessGuard::kill_all();
    return 1;
  }
}
