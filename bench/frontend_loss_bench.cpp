// canopy-frontend-loss-bench: the front-end's own failure (docs/fault-tolerance.md,
// "When the front-end fails"), measured. For each fan-out F at the top, a tree
// b:Fx2 (F commnodes under the front-end, two back-ends each) runs the union workload
// under `canopy run --keep-tree-for`; its front-end is SIGKILLed, and this program,
// a second later, re-attaches as the new front-end (Network::reattach). Per run, CSV
// on stdout:
//
//   fanout,rep,processes,kill_to_promoted_ms,promote_ms,connect_ms,reattach_ms,
//   first_result_ms,union_size,required
//
//   kill_to_promoted_ms  from the SIGKILL to the last process left without the
//                        front-end adopted by the heir (the promoted event's time,
//                        on this machine's one clock)
//   promote_ms           the same from the heir's own detection of the loss
//   connect_ms           re-attach: first connection to the heir's topology
//   reattach_ms          Network::reattach() from call to return (the heir's state,
//                        view and report received)
//   first_result_ms      from the call to the first regenerated result in receive()
//
// Each run is checked before its row counts: the first regenerated result must hold
// every integer the back-ends recorded more than a second before the kill (the
// union's state, composed at the heir, is complete), the events frontend_lost,
// promoted and reattached must arrive, and nothing started may be left. A failed
// check stops the program with "canopy-frontend-loss-bench: FAILED ..." and exit 1.
//
//   canopy-frontend-loss-bench [--fanouts F,F,...] (default 8,16,32,64) [--reps N] (3)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "canopy/frontend.h"
#include "process_guard.h"
#include "run_canopy.h"
#include "union_record.h"

namespace {

using Clock = std::chrono::steady_clock;
using WallClock = std::chrono::system_clock;
using namespace std::chrono_literals;

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string self_directory() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
}

double ms(std::chrono::nanoseconds d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Row {
  int fanout = 0, rep = 0;
  std::size_t processes = 0;
  double kill_to_promoted = 0, promote = 0, connect = 0, reattach = 0, first_result = 0;
  std::size_t union_size = 0, required = 0;
};

// Every integer of the records in `dir` recorded before `before`.
std::set<std::int32_t> recorded_before(const std::string& dir, int backends, WallClock::time_point before) {
  std::set<std::int32_t> out;
  for (int r = 0; r < backends; ++r) {
    auto values = canopy::demo::read_record(dir + "/be-" + std::to_string(r) + ".txt");
    if (!values) throw Failure(values.error());
    for (const auto& v : *values) {
      if (v.time && *v.time < before) out.insert(v.value);
    }
  }
  return out;
}

Row run_once(int fanout, int rep) {
  char scratch[] = "/tmp/canopy-fe-bench-XXXXXX";
  const std::string dir = mkdtemp(scratch);
  const std::string status = dir + "/status.json", record = dir + "/record";
  Row row{.fanout = fanout, .rep = rep, .processes = std::size_t(1 + 3 * fanout)};
  const std::string canopy = self_directory() + "/canopy";
  const pid_t front_end = canopy::testing::start_process(
      {canopy, "run", "--tree", "b:" + std::to_string(fanout) + "x2", "--workload", "union", "--rate", "10",
       "--duration", "60", "--record", record, "--status", status, "--keep-tree-for", "60", "--format", "jsonl"},
      dir + "/run.out");
  if (front_end <= 0) throw Failure("cannot start " + canopy);
  auto cleanup = [&] {
    kill(front_end, SIGKILL);
    waitpid(front_end, nullptr, 0);
  };
  if (!canopy::testing::wait_for(
          [&] { return canopy::testing::slurp(status).find("union_until_ms") != std::string::npos; }, 60s)) {
    cleanup();
    throw Failure("the run of fan-out " + std::to_string(fanout) + " did not start its workload: " +
                  canopy::testing::slurp(dir + "/run.out"));
  }
  std::this_thread::sleep_for(2s);
  const auto killed_at = WallClock::now();
  cleanup();
  std::this_thread::sleep_for(1s);

  const auto start = Clock::now();
  auto network = canopy::Network::reattach({.reattach_file = status + ".reattach", .timeout = 20s});
  if (!network) throw Failure("re-attach at fan-out " + std::to_string(fanout) + ": " + network.error());
  row.reattach = ms(Clock::now() - start);
  auto& net = **network;
  std::set<std::int32_t> first;
  while (first.empty()) {
    auto in = net.receive(10s);
    if (!in) throw Failure("receive: " + in.error());
    if (!*in) throw Failure("no regenerated result within 10 s of the re-attach");
    for (const auto& v : (*in)->packet.values()) {
      if (auto* xs = std::get_if<std::vector<std::int32_t>>(&v)) {
        for (auto x : *xs) {
          if (x >= 0) first.insert(x);
        }
      }
    }
  }
  row.first_result = ms(Clock::now() - start);
  bool lost = false, promoted = false, reattached = false;
  while (auto e = net.next_event(std::chrono::milliseconds(promoted && reattached ? 0 : 2000))) {
    if (e->kind == canopy::Event::Kind::frontend_lost) lost = true;
    if (e->kind == canopy::Event::Kind::promoted) {
      promoted = true;
      row.promote = ms(e->after);
      row.kill_to_promoted = ms(e->time - killed_at);
      if (e->after.count() == 0) throw Failure("the promotion never completed (a process was not adopted)");
    }
    if (e->kind == canopy::Event::Kind::reattached) {
      reattached = true;
      row.connect = ms(e->connect);
    }
  }
  if (!lost || !promoted || !reattached) throw Failure("the events frontend_lost, promoted and reattached did not all arrive");
  const auto required = recorded_before(record, 2 * fanout, killed_at - 1s);
  for (auto x : required) {
    if (!first.count(x)) {
      throw Failure("the regenerated union lacks " + std::to_string(x) + ", recorded more than 1 s before the kill");
    }
  }
  row.union_size = first.size();
  row.required = required.size();
  if (auto stopped = net.shutdown(); !stopped) throw Failure("shutdown: " + stopped.error());
  network->reset();
  if (!canopy::testing::ProcessGuard::wait_for_none(15s).empty()) throw Failure("processes left after the run");
  std::filesystem::remove_all(dir);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> fanouts{8, 16, 32, 64};
  int reps = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--fanouts" && i + 1 < argc) {
      fanouts.clear();
      std::stringstream list(argv[++i]);
      for (std::string f; std::getline(list, f, ',');) fanouts.push_back(std::atoi(f.c_str()));
    } else {
      std::fprintf(stderr, "usage: canopy-frontend-loss-bench [--fanouts F,F,...] [--reps N]\n");
      return 2;
    }
  }
  canopy::testing::ProcessGuard guard;
  std::printf("fanout,rep,processes,kill_to_promoted_ms,promote_ms,connect_ms,reattach_ms,first_result_ms,union_size,"
              "required\n");
  try {
    for (int rep = 1; rep <= reps; ++rep) {
      for (int f : fanouts) {
        const Row r = run_once(f, rep);
        std::printf("%d,%d,%zu,%.3f,%.3f,%.3f,%.3f,%.3f,%zu,%zu\n", r.fanout, r.rep, r.processes, r.kill_to_promoted,
                    r.promote, r.connect, r.reattach, r.first_result, r.union_size, r.required);
        std::fflush(stdout);
      }
    }
  } catch (const Failure& e) {
    std::fprintf(stderr, "canopy-frontend-loss-bench: FAILED %s\n", e.what());
    return 1;
  }
  return 0;
}
