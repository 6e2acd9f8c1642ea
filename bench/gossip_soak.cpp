// canopy-gossip-detect-bench soak: false positives of the gossip detector while
// commnodes hang for less than the tree's `lost` (bench/gossip_soak.sh runs it under
// load; docs/benchmarks.md).
//
//   canopy-gossip-detect-bench soak --out DIR [--topology SPEC] [--schedule dbrr|brr|...]
//       [--period-ms T] [--minutes M | --seconds S] [--pause-min-ms A] [--pause-max-ms B]
//       [--gap-min-ms A] [--gap-max-ms B] [--max-hangup-ms H] [--ping-timeout-ms P]
//       [--lost-ms L] [--seed S] [--log]
//
// One tree (default b:2x4x4: 32 back-ends below 8 leaf commnodes below 2 others;
// DBRR, T = 200 ms, the library's max_hangup (500 ms), ping time-out (0: the tree's
// `lost`) and `lost` (5 s)). With 32 members the suspicion time is 2.5 s (BRR) and
// 3.5 s (DBRR), so that some pauses outlast it and the ping procedure is exercised;
// with 64 DBRR's would be 4.1 s, above nearly every pause. After three cycles of gossip,
// for the duration (default 10 minutes): a commnode other than the front-end, drawn
// at random, is SIGSTOPped, SIGCONTed after a pause drawn in [A, B] (default 0.5-4 s,
// shorter than `lost`), and the next follows after a gap drawn in [A, B] (default
// 0.5-2 s). Then it waits `lost` + the suspicion time + 2 s for late consequences.
// Nobody fails, so every member declared failed, by a view, by a back-end's
// detector, by a report at the front-end or by the tree's own detection, is a false
// positive.
//
// Writes DIR/pauses.csv (commnode,pid,members_below,stop_us,cont_us,pause_ms),
// DIR/events.csv (where,kind,member,time_us,detector,silent_ms: every piece of news
// of a failure, at the front-end or at a back-end), DIR/frontend.csv, the back-ends'
// events-RANK.csv, and with --log the processes' logs in DIR/logs, from which it
// counts the detectors' suspicions and how each was cleared. Prints summary rows.
// Status 1 if anything was declared failed.
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
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

struct SoakOptions {
  std::string out;
  std::string topology = "b:2x4x4";
  GossipSchedule schedule = GossipSchedule::dbrr;
  milliseconds period{200}, max_hangup{500}, ping_timeout{0}, lost{5000};
  milliseconds duration{600000};
  milliseconds pause_min{500}, pause_max{4000}, gap_min{500}, gap_max{2000};
  std::uint64_t seed = 1;
  bool log = false;
};

struct Pause {
  Rank commnode = 0;
  pid_t pid = 0;
  std::size_t below = 0;
  std::int64_t stop_us = 0, cont_us = 0;
};

// A pause in progress is always ended, whatever happens.
struct Continue {
  pid_t pid = 0;
  ~Continue() {
    if (pid > 0) ::kill(pid, SIGCONT);
  }
};

// What the detectors logged (--log): suspicions, and how they ended.
struct Logged {
  std::size_t suspect = 0, answered = 0, grew_again = 0, confirmed = 0;
};

Logged count_logs(const std::string& dir) {
  Logged out;
  if (!fs::exists(dir)) return out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      if (line.find(" is suspect: its heartbeat has been still") != std::string::npos) ++out.suspect;
      if (line.find(" answered the ping: alive") != std::string::npos) ++out.answered;
      if (line.find("'s heartbeat grew again; no longer suspect") != std::string::npos) ++out.grew_again;
      if (line.find("gossip: back-end ") != std::string::npos && line.find(" failed (gossip:") != std::string::npos) {
        ++out.confirmed;
      }
    }
  }
  return out;
}

milliseconds draw(std::mt19937_64& rng, milliseconds low, milliseconds high) {
  return milliseconds(std::uniform_int_distribution<long>(low.count(), high.count())(rng));
}

int soak(const SoakOptions& o) {
  auto topology = generate_topology(o.topology);
  if (!topology) throw BadArgument("--topology " + o.topology + ": " + topology.error());
  const auto backends = topology->backends();
  const auto n = static_cast<std::uint32_t>(backends.size());
  std::vector<Rank> commnodes;
  for (const auto& node : topology->nodes()) {
    if (node.role == Role::commnode) commnodes.push_back(node.rank);
  }
  if (commnodes.empty()) throw BadArgument("--topology " + o.topology + " has no commnode to pause");
  fs::remove_all(o.out);
  TreeSettings settings{.topology = o.topology, .schedule = o.schedule, .period = o.period,
                        .max_hangup = o.max_hangup, .ping_timeout = o.ping_timeout, .lost = o.lost, .out = o.out,
                        .log = o.log};
  auto net = launch_tree(settings, *topology);
  FrontEvents fe;
  auto wait = [&](Steady::duration d) {
    const auto until = Steady::now() + d;
    while (Steady::now() < until) {
      fe.drain(*net);
      std::this_thread::sleep_for(std::min<Steady::duration>(50ms, until - Steady::now()));
    }
  };
  wait(3 * o.period * membership::cycle_rounds(o.schedule, n));

  std::mt19937_64 rng(o.seed);
  std::vector<Pause> pauses;
  const auto start = Steady::now();
  const std::int64_t start_us = realtime_us();
  while (Steady::now() - start < o.duration) {
    const Rank victim = commnodes[std::uniform_int_distribution<std::size_t>(0, commnodes.size() - 1)(rng)];
    const auto pids = tree_pids();
    if (!pids.count(victim)) {
      std::fprintf(stderr, "canopy-gossip-detect-bench soak: commnode %u is gone; not pausing it\n", victim);
      wait(draw(rng, o.gap_min, o.gap_max));
      continue;
    }
    Pause p{victim, pids.at(victim), topology->backends_below(victim).size()};
    {
      Continue guard{p.pid};
      p.stop_us = realtime_us();
      ::kill(p.pid, SIGSTOP);
      wait(draw(rng, o.pause_min, o.pause_max));
      p.cont_us = realtime_us();
    }
    pauses.push_back(p);
    wait(draw(rng, o.gap_min, o.gap_max));
  }
  const double duration_s = std::chrono::duration<double>(Steady::now() - start).count();
  const auto suspicion = o.period * membership::cleanup_rounds(o.schedule, n) + o.max_hangup;
  const auto ping = o.ping_timeout.count() > 0 ? o.ping_timeout : o.lost;
  wait(o.lost + suspicion + ping + 2s);
  const auto alive_at_end = tree_pids();
  const auto members_at_end = net->view().members.size();
  fe.drain(*net);
  shut_down(*net);
  net.reset();
  fe.write(o.out + "/frontend.csv");
  auto left = testing::ProcessGuard::wait_for_none(10s);
  if (!left.empty()) {
    testing::ProcessGuard::kill_all();
    throw Failure(std::to_string(left.size()) + " processes left over after the shutdown (killed)");
  }

  {
    std::ofstream out(o.out + "/pauses.csv");
    out << "commnode,pid,members_below,stop_us,cont_us,pause_ms\n";
    for (const auto& p : pauses) {
      out << p.commnode << ',' << p.pid << ',' << p.below << ',' << p.stop_us << ',' << p.cont_us << ','
          << static_cast<double>(p.cont_us - p.stop_us) / 1000.0 << '\n';
    }
  }
  std::set<Rank> declared;
  std::size_t fe_views = 0, fe_gossip = 0, fe_failures = 0, be_gossip = 0, be_views = 0, be_failures = 0;
  {
    std::ofstream out(o.out + "/events.csv");
    out << "where,kind,member,time_us,detector,silent_ms\n";
    for (const auto& e : fe.all()) {
      std::vector<Rank> named;
      if (e.kind == "view") {
        named = e.left;
        fe_views += !e.left.empty();
      } else if (e.kind == "gossip" || e.kind == "failure") {
        named = {e.rank};
        ++(e.kind == "gossip" ? fe_gossip : fe_failures);
      }
      for (Rank r : named) {
        out << "frontend," << e.kind << ',' << r << ',' << e.time_us << ',' << e.detector << ',' << e.silent_ms << '\n';
        declared.insert(r);
      }
    }
    for (const auto& e : read_backend_events(o.out, backends)) {
      out << e.rank << ',' << e.kind << ',' << e.member << ',' << e.time_us << ',' << e.rank << ',' << e.silent_ms
          << '\n';
      declared.insert(e.member);
      ++(e.kind == "gossip" ? be_gossip : e.kind == "view" ? be_views : be_failures);
    }
  }
  std::size_t backends_alive = 0;
  for (Rank b : backends) backends_alive += alive_at_end.count(b);
  std::vector<double> lengths;
  for (const auto& p : pauses) lengths.push_back(static_cast<double>(p.cont_us - p.stop_us) / 1000.0);
  const auto over = std::count_if(lengths.begin(), lengths.end(),
                                  [&](double ms) { return ms > static_cast<double>(suspicion.count()); });
  const Logged logged = count_logs(o.out + "/logs");
  const std::string config = config_name(o.schedule, o.period);
  auto row = [&](const std::string& metric, double value, const char* unit) {
    print_row("soak", config, o.topology, metric, value, unit);
  };
  std::printf("benchmark,config,topology,metric,value,unit\n");
  row("backends", n, "count");
  row("commnodes", static_cast<double>(commnodes.size()), "count");
  row("start_us", static_cast<double>(start_us), "us");
  row("duration", duration_s, "s");
  row("suspicion_time", static_cast<double>(suspicion.count()), "ms");
  row("ping_timeout", static_cast<double>(ping.count()), "ms");
  row("lost", static_cast<double>(o.lost.count()), "ms");
  row("pauses", static_cast<double>(pauses.size()), "count");
  row("pauses_over_suspicion_time", static_cast<double>(over), "count");
  row("pause_total", std::accumulate(lengths.begin(), lengths.end(), 0.0) / 1000.0, "s");
  row("pause_median", quantile(lengths, 0.5), "ms");
  row("pause_max", lengths.empty() ? NAN : *std::max_element(lengths.begin(), lengths.end()), "ms");
  if (o.log) {
    row("suspicions_logged", static_cast<double>(logged.suspect), "count");
    row("cleared_by_answer_logged", static_cast<double>(logged.answered), "count");
    row("cleared_by_heartbeat_logged", static_cast<double>(logged.grew_again), "count");
    row("confirmed_logged", static_cast<double>(logged.confirmed), "count");
  }
  row("frontend_views_with_left", static_cast<double>(fe_views), "count");
  row("frontend_gossip_reports", static_cast<double>(fe_gossip), "count");
  row("frontend_failures", static_cast<double>(fe_failures), "count");
  row("backend_gossip_events", static_cast<double>(be_gossip), "count");
  row("backend_view_left_events", static_cast<double>(be_views), "count");
  row("backend_failure_events", static_cast<double>(be_failures), "count");
  row("false_positive_members", static_cast<double>(declared.size()), "count");
  row("members_at_end", static_cast<double>(members_at_end), "count");
  row("backends_running_at_end", static_cast<double>(backends_alive), "count");
  return declared.empty() ? 0 : 1;
}

}  // namespace

int soak_main(Args& a) {
  SoakOptions o;
  const bool quick = a.flag("--quick");
  o.out = a.text("--out", "");
  if (o.out.empty()) throw BadArgument("--out DIR is required");
  o.topology = a.text("--topology", quick ? "b:4^2" : o.topology);
  o.schedule = a.schedule("--schedule", o.schedule);
  if (o.schedule == GossipSchedule::off) throw BadArgument("--schedule off: there is no detector to soak");
  o.period = a.ms("--period-ms", o.period);
  if (o.period.count() < 10) throw BadArgument("--period-ms: at least 10");
  o.duration = milliseconds(60000 * a.number("--minutes", quick ? 1 : 10, 0, 1440));
  o.duration = milliseconds(1000 * a.number("--seconds", o.duration.count() / 1000, 0, 86400));
  o.pause_min = a.ms("--pause-min-ms", o.pause_min);
  o.pause_max = a.ms("--pause-max-ms", o.pause_max);
  o.gap_min = a.ms("--gap-min-ms", o.gap_min);
  o.gap_max = a.ms("--gap-max-ms", o.gap_max);
  if (o.pause_min > o.pause_max || o.gap_min > o.gap_max) throw BadArgument("a minimum above its maximum");
  o.max_hangup = a.ms("--max-hangup-ms", o.max_hangup);
  o.ping_timeout = a.ms("--ping-timeout-ms", o.ping_timeout);
  o.lost = a.ms("--lost-ms", o.lost);
  o.seed = static_cast<std::uint64_t>(a.number("--seed", 1, 0, 1L << 40));
  o.log = a.flag("--log");
  a.finish();
  return soak(o);
}

}  // namespace canopy::gossip_bench
