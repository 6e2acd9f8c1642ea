// canopy-gossip-backend: a back-end of the gossip benchmarks (docs/benchmarks.md,
// "Gossip: detection time (paper 003 Fig. 6), false positives and cost"), started by
// canopy-gossip-detect-bench.
//
//   canopy-gossip-backend --out DIR
//
// It does nothing but listen to the tree's events. Every event that says a member
// failed goes at once into DIR/events-RANK.csv (flushed line by line: a back-end
// stopped or killed later keeps what it saw):
//
//   rank,kind,member,event_us,view,detector,silent_ms
//
//   gossip   this back-end's own gossip detector confirmed that `member` failed
//            (Event::Kind::gossip; detector is this back-end, silent_ms how long the
//            member's heartbeat had been still here)
//   view     it applied membership view `view`, in which `member` left (one line per
//            member that left)
//   failure  the tree told it that process `member` was lost (Event::Kind::failure)
//
// event_us is the event's time, when this process learned of it (CLOCK_REALTIME µs;
// every process of the benchmark runs on one host, so the clocks are the same).
// Exits when the network shuts down.
#include <poll.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "canopy/backend.h"

namespace {

long long us_of(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

void record(std::FILE* f, canopy::Rank self, const canopy::Event& e) {
  using Kind = canopy::Event::Kind;
  const auto view = static_cast<unsigned long long>(e.view.id);
  if (e.kind == Kind::gossip) {
    std::fprintf(f, "%u,gossip,%u,%lld,%llu,%u,%lld\n", self, e.rank, us_of(e.time), view, e.detector,
                 static_cast<long long>(e.silent.count()));
  } else if (e.kind == Kind::view) {
    for (canopy::Rank r : e.left) std::fprintf(f, "%u,view,%u,%lld,%llu,,\n", self, r, us_of(e.time), view);
  } else if (e.kind == Kind::failure) {
    std::fprintf(f, "%u,failure,%u,%lld,,,\n", self, e.rank, us_of(e.time));
  } else {
    return;
  }
  std::fflush(f);
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc != 3 || std::string(argv[1]) != "--out") {
    std::fprintf(stderr, "usage: canopy-gossip-backend --out DIR (started by canopy-gossip-detect-bench)\n");
    return 2;
  }
  auto backend = canopy::Backend::connect();
  if (!backend) {
    std::fprintf(stderr, "canopy-gossip-backend: %s\n", backend.error().c_str());
    return 1;
  }
  canopy::Backend& be = **backend;
  const std::string path = std::string(argv[2]) + "/events-" + std::to_string(be.rank()) + ".csv";
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "canopy-gossip-backend %u: cannot write %s: %s\n", be.rank(), path.c_str(),
                 std::strerror(errno));
    return 1;
  }
  std::fprintf(f, "rank,kind,member,event_us,view,detector,silent_ms\n");
  std::fflush(f);
  while (true) {
    pollfd p[2] = {{be.events_fd(), POLLIN, 0}, {be.event_fd(), POLLIN, 0}};
    poll(p, 2, 200);
    while (auto e = be.next_event(std::chrono::milliseconds(0))) record(f, be.rank(), *e);
    auto in = be.receive(std::chrono::milliseconds(0));
    if (!in) break;  // the network has shut down, or this back-end was declared failed
  }
  while (auto e = be.next_event(std::chrono::milliseconds(0))) record(f, be.rank(), *e);
  std::fclose(f);
  return 0;
}
