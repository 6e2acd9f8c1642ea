// What canopy-gossip-detect-bench's modes share (bench/gossip_detect_bench.cpp,
// docs/benchmarks.md, "Gossip: detection time (paper 003 Fig. 6), false positives and
// cost"): a tree of canopy-gossip-backend processes launched with gossip settings,
// its processes by rank, the front-end's events, the back-ends' event files, and
// small helpers (times, quantiles, CSV).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "canopy/frontend.h"

#include "bench_util.h"

namespace canopy::gossip_bench {

// An error that ends a run: main prints it and exits with status 1.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// CLOCK_REALTIME in µs: the clock of every process's event times.
using bench::realtime_us;
using bench::us_of;

using bench::quantile;  // NaN for none
double mean(const std::vector<double>& v);         // NaN for none
using bench::split;
std::string ranks_text(const std::vector<Rank>& ranks);  // "3 7 12"
// "off", or "brr:500" (a schedule and T_gossip in ms).
std::string config_name(GossipSchedule schedule, std::chrono::milliseconds period);

// The directory of this executable, where canopy-commnode and canopy-gossip-backend
// are. Found at the first call (main makes it early): /proc/self/exe no longer
// resolves once the executable is replaced, by a rebuild during a run.
const std::string& self_directory();

// How a tree is launched: its gossip and the tree's own detection. Zero durations
// keep the library's defaults.
struct TreeSettings {
  std::string topology = "b:4^2";
  GossipSchedule schedule = GossipSchedule::off;
  std::chrono::milliseconds period{500};
  std::chrono::milliseconds max_hangup{500};
  std::chrono::milliseconds ping_timeout{0};
  std::chrono::milliseconds suspect{0}, lost{0};
  std::string out;   // the back-ends' directory (events-RANK.csv); created
  bool log = false;  // every process logs at info level into out/logs
};

// Launches `topology` with canopy-gossip-backend as every back-end (found next to
// this executable, like canopy-commnode); throws Failure if it does not come up.
std::unique_ptr<Network> launch_tree(const TreeSettings& settings, const Topology& topology);

// Network::shutdown(), saying on stderr if it failed.
void shut_down(Network& network);

// The live processes this program started, directly or not, by their rank
// (CANOPY_RANK in their environment): back-ends and commnodes.
std::map<Rank, pid_t> tree_pids();

// The leaf commnodes of `topology` (the parents of back-ends), ascending: in a real
// run the back-ends below one of them would share a host.
std::vector<Rank> leaf_commnodes(const Topology& topology);

// The events the front-end heard of, with the time it learned each.
struct FrontEvent {
  std::string kind;  // failure, adoption, recovered, view, gossip
  Rank rank = 0;
  std::int64_t time_us = 0;
  std::uint64_t view = 0;
  std::vector<Rank> left;
  Rank detector = 0;
  std::int64_t silent_ms = 0;
};

class FrontEvents {
 public:
  void drain(Network& network);
  const std::vector<FrontEvent>& all() const { return events_; }
  // kind,rank,time_us,view,left,detector,silent_ms
  void write(const std::string& path) const;

 private:
  std::vector<FrontEvent> events_;
};

// One line of a back-end's events-RANK.csv (bench/gossip_backend.cpp).
struct BackendEvent {
  Rank rank = 0;      // who heard it
  std::string kind;   // gossip, view, failure
  Rank member = 0;    // who failed
  std::int64_t time_us = 0;
  std::uint64_t view = 0;
  std::int64_t silent_ms = 0;
};

// Every line of DIR/events-RANK.csv for the given back-ends (missing files: none).
std::vector<BackendEvent> read_backend_events(const std::string& dir, const std::vector<Rank>& backends);

// CPU time of process `pid`, all its live threads, in seconds: the scheduler's
// runtime of each (/proc/PID/task/TID/sched, to the ns), else utime + stime from
// /proc/PID/stat (in 10 ms ticks); NaN if it is gone.
double cpu_seconds(pid_t pid);

// Bytes sent on every established TCP socket of the given processes, as the kernel
// counts them (tcpi_bytes_sent, read with `ss -tinpH`), by pid. Throws Failure if
// ss cannot be run.
std::map<pid_t, std::uint64_t> tcp_bytes_sent(const std::vector<pid_t>& pids);

// A bad command line: main prints it with the usage and exits with status 2.
struct BadArgument : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "--name value" options and "--name" flags after a mode's name. Reading an option
// marks it known; finish() throws BadArgument for any left unread.
class Args {
 public:
  Args(int argc, char** argv, const std::vector<std::string>& flags);
  std::string text(const std::string& name, const std::string& fallback);
  long number(const std::string& name, long fallback, long low, long high);
  std::chrono::milliseconds ms(const std::string& name, std::chrono::milliseconds fallback);
  GossipSchedule schedule(const std::string& name, GossipSchedule fallback);
  bool flag(const std::string& name);
  void finish() const;

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> read_;
};

// The modes (bench/gossip_detect_bench.cpp, gossip_soak.cpp, gossip_cost.cpp); each
// takes the arguments after its name and returns the exit status.
int detect_main(Args& args);
int soak_main(Args& args);
int cost_main(Args& args);
int size_main(Args& args);

// A summary row: benchmark,config,topology,metric,value,unit on stdout.
void print_row(const std::string& benchmark, const std::string& config, const std::string& topology,
               const std::string& metric, double value, const char* unit);

}  // namespace canopy::gossip_bench
