// canopy-ring-backend: a back-end of the ring-token benchmark (paper 001 §V-B;
// docs/benchmarks.md, "Ring of tokens"), started by canopy-ring-bench.
//
//   canopy-ring-backend --out DIR --backends N [--ring view|all] [--tokens T]
//                       [--rate TOKENS_PER_S] [--pings P] [--ping-gap-us US]
//                       [--near RANK:HOPS] [--far RANK:HOPS] [--quiet-ms MS]
//
// Every back-end forwards every token it gets to the next member after itself in its
// current membership view, wrapping around (--ring view), or to rank+1 mod N over all
// N back-ends without looking at any view (--ring all: the ring the runtime before
// the membership service can run too). It forwards on its event-loop thread (the
// Backend handler), so a hop costs the tree's latency and no thread switch; it
// answers pings there too.
//
// Rank 0, told to start by the driver, first times ping-pongs with a near and a far
// back-end, alternately (the driver names them with their tree distance): 2P "hot"
// ones back to back, from its loop thread, then 2P "cold" ones, one every
// --ping-gap-us (default 3 ms, so that every process on the way is idle, as a
// failure notification finds them), from its main thread. Then it injects T tokens,
// one every 1/rate s (rate 0: all at once), each with an id and its send time, and
// records each token that comes back (main thread): round trip, hops, the view it
// came back in. When every token is back, or none has come back for --quiet-ms, it
// writes its files and tells the driver.
//
// Every back-end writes DIR/views-RANK.csv, one line per membership view it applied,
// at once (a back-end killed later keeps what it saw): when it got it (the event's
// time, CLOCK_REALTIME us), the view id, who left and who joined. Rank 0 also writes
// DIR/tokens.csv and DIR/pings.csv. Exits when the network shuts down.
//
// It builds against the runtime before the membership service too (no canopy/view.h
// there): then it has no view events and only --ring all.
#include <poll.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "canopy/backend.h"
#include "ring_protocol.h"

#if __has_include("canopy/view.h")
#define CANOPY_RING_HAS_VIEW 1
#define RECEIVED_VIEW(in) (in).view
#else
#define CANOPY_RING_HAS_VIEW 0
#define RECEIVED_VIEW(in) std::uint64_t{0}
#endif

namespace {

using canopy::Rank;
using Steady = std::chrono::steady_clock;
namespace ring = canopy::ring;
using canopy::bench::realtime_us;
using canopy::bench::us_of;

struct Options {
  std::string out;
  std::uint32_t backends = 0;
  bool by_view = CANOPY_RING_HAS_VIEW;
  std::uint64_t tokens = 1000;
  double rate = 1000;  // tokens per second; 0 = all at once
  int pings = 100;        // hot ones, then as many cold ones, alternately near and far
  int ping_gap_us = 3000;  // between cold pings
  Rank near = 1, far = 1;
  int near_hops = 2, far_hops = 2;
  int quiet_ms = 500;
};

bool parse_target(const char* text, Rank& rank, int& hops) {
  return std::sscanf(text, "%u:%d", &rank, &hops) == 2 && hops > 0;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!v) return false;
    ++i;
    if (a == "--out") {
      o.out = v;
    } else if (a == "--backends") {
      o.backends = static_cast<std::uint32_t>(std::strtoul(v, nullptr, 10));
    } else if (a == "--ring") {
      if (std::string(v) != "view" && std::string(v) != "all") return false;
      o.by_view = std::string(v) == "view";
    } else if (a == "--tokens") {
      o.tokens = std::strtoull(v, nullptr, 10);
    } else if (a == "--rate") {
      o.rate = std::strtod(v, nullptr);
    } else if (a == "--pings") {
      o.pings = std::atoi(v);
    } else if (a == "--ping-gap-us") {
      o.ping_gap_us = std::atoi(v);
    } else if (a == "--near") {
      if (!parse_target(v, o.near, o.near_hops)) return false;
    } else if (a == "--far") {
      if (!parse_target(v, o.far, o.far_hops)) return false;
    } else if (a == "--quiet-ms") {
      o.quiet_ms = std::atoi(v);
    } else {
      return false;
    }
  }
#if !CANOPY_RING_HAS_VIEW
  if (o.by_view) return false;
#endif
  return !o.out.empty() && o.backends > 0;
}

// The ring as this back-end knows it. The handler (loop thread) and the main thread
// both drain view events through it, under its mutex.
class Ring {
 public:
  Ring(canopy::Backend& be, const Options& o) : be_(be), o_(o), self_(be.rank()) {
#if CANOPY_RING_HAS_VIEW
    // Here, on the main thread: Backend::view() called from the handler (the loop
    // thread) would wait for the loop itself and never return.
    // The first view comes with the launch plan, just after connect() returns.
    canopy::View view = be.view();
    for (int i = 0; i < 10000 && view.members.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      view = be.view();
    }
    members_ = view.members;
    view_id_ = view.id;
#endif
    const std::string path = o.out + "/views-" + std::to_string(self_) + ".csv";
    views_ = std::fopen(path.c_str(), "w");
    if (!views_) {
      std::fprintf(stderr, "canopy-ring-backend %u: cannot write %s: %s\n", self_, path.c_str(), std::strerror(errno));
    } else {
      std::fprintf(views_, "rank,view,event_us,drained_us,left,joined,members\n");
      std::fflush(views_);
    }
  }
  ~Ring() {
    if (views_) std::fclose(views_);
  }

  // Takes every pending event; records and applies the views. Any thread.
  void drain_events() {
#if CANOPY_RING_HAS_VIEW
    std::lock_guard lock(mutex_);
    while (ring::readable(events_fd_)) {
      auto e = be_.next_event(std::chrono::milliseconds(0));
      if (!e) break;
      if (e->kind != canopy::Event::Kind::view) continue;
      if (e->view.id > view_id_) {
        view_id_ = e->view.id;
        members_ = e->view.members;
      }
      if (!views_) continue;
      auto list = [](const std::vector<Rank>& ranks) {
        std::string s;
        for (Rank r : ranks) s += (s.empty() ? "" : " ") + std::to_string(r);
        return s;
      };
      std::fprintf(views_, "%u,%llu,%lld,%lld,%s,%s,%zu\n", self_, static_cast<unsigned long long>(e->view.id),
                   static_cast<long long>(us_of(e->time)), static_cast<long long>(realtime_us()),
                   list(e->left).c_str(), list(e->joined).c_str(), e->view.members.size());
      std::fflush(views_);  // a back-end killed later keeps what it saw
    }
#endif
  }

  // The next back-end after this one: in the current view, or over all of them.
  // `view` is the view this process held when the packet arrived (Received::view):
  // the events are drained only when it is newer than the one known here.
  Rank next(std::uint64_t view) {
    if (!o_.by_view) return (self_ + 1) % o_.backends;
    if (view > view_id()) drain_events();
    std::lock_guard lock(mutex_);
    auto it = std::upper_bound(members_.begin(), members_.end(), self_);
    if (it != members_.end()) return *it;
    return members_.empty() ? 0 : members_.front();
  }

  std::uint64_t view_id() {
    std::lock_guard lock(mutex_);
    return view_id_;
  }

 private:
  canopy::Backend& be_;
  const Options& o_;
  const Rank self_;
  std::mutex mutex_;
  std::vector<Rank> members_;
  std::uint64_t view_id_ = 0;
  std::FILE* views_ = nullptr;
  int events_fd_ = be_.events_fd();
};

struct TokenRecord {
  std::int64_t send_us = -1, back_us = -1;
  Steady::time_point sent;
  double rtt_us = -1;
  std::uint32_t hops = 0;
  std::uint64_t view = 0;
};

// Rank 0: pings, then tokens, then files; on its main thread.
class Origin {
 public:
  Origin(canopy::Backend& be, Ring& ring, const Options& o) : be_(be), ring_(ring), o_(o), tokens_(o.tokens) {}

  // On the loop thread: true if it dealt with the packet.
  bool on_loop(const canopy::Received& in) {
    if (in.packet.tag() != ring::kPong) return false;
    on_pong(in.packet);
    return true;
  }

  // Runs until the network stops.
  void run() {
    const int fds[2] = {be_.event_fd(), be_.events_fd()};
    while (true) {
      ring_.drain_events();
      while (ring::readable(fds[0])) {
        auto in = be_.receive(std::chrono::milliseconds(0));
        if (!in) return;  // the network has shut down
        if (!*in) break;
        on_packet(**in);
      }
      tick();
      pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
      timespec wait = timeout();
      ppoll(p, 2, &wait, nullptr);
    }
  }

 private:
  enum class Phase { idle, pinging, tokens, done };

  void on_packet(const canopy::Received& in) {
    const auto& pk = in.packet;
    switch (pk.tag()) {
      case ring::kStart:
        if (phase_ != Phase::idle) return;
        stream_ = in.stream;
        p2p_ = std::get<std::uint32_t>(pk[0]);
        phase_ = Phase::pinging;
        if (o_.pings > 0) {
          send_ping(0);
        } else {
          pings_done_.store(true, std::memory_order_release);
        }
        return;
      case ring::kPong:  // one that came before the handler had the origin
        on_pong(pk);
        return;
      case ring::kToken: {
        const auto id = std::get<std::uint64_t>(pk[0]);
        if (id >= tokens_.size() || tokens_[id].back_us >= 0) return;
        auto& t = tokens_[id];
        const auto now = Steady::now();
        t.back_us = realtime_us();
        t.rtt_us = std::chrono::duration<double, std::micro>(now - t.sent).count();
        t.hops = std::get<std::uint32_t>(pk[2]) + 1;
        t.view = ring_.view_id();
        ++back_;
        last_back_ = now;
        return;
      }
      default:
        return;
    }
  }

  // A pong, on the loop thread (the handler). Hot pings (the first 2P) follow each
  // other at once from here, so that a ping-pong costs the tree's hops and no thread
  // switch at rank 0; cold ones (the next 2P) are sent by the main thread, one every
  // --ping-gap-us, so that each finds every process on its way idle, as a failure
  // notification does.
  void on_pong(const canopy::Packet& pk) {
    const std::uint64_t seq = ping_seq_.load(std::memory_order_acquire);
    if (pings_done_.load(std::memory_order_acquire) || std::get<std::uint64_t>(pk[0]) != seq) return;
    const double rtt = std::chrono::duration<double, std::micro>(Steady::now() - ping_sent_).count();
    const auto hot = static_cast<std::uint64_t>(2 * o_.pings);
    pings_.push_back({ping_target_, seq < hot, rtt});
    ping_seq_.store(seq + 1, std::memory_order_release);
    if (seq + 1 < hot) {
      send_ping(seq + 1);
    } else if (seq + 1 < 2 * hot) {
      ping_out_.store(false, std::memory_order_release);
    } else {
      pings_done_.store(true, std::memory_order_release);
    }
  }

  // The main thread's part of the pings: the cold ones.
  void tick_pings() {
    const auto hot = static_cast<std::uint64_t>(2 * o_.pings);
    const std::uint64_t seq = ping_seq_.load(std::memory_order_acquire);
    if (seq < hot || ping_out_.load(std::memory_order_acquire) || pings_done_.load(std::memory_order_acquire)) return;
    const auto now = Steady::now();
    if (now - last_cold_ < std::chrono::microseconds(o_.ping_gap_us)) return;
    last_cold_ = now;
    ping_out_.store(true, std::memory_order_release);
    send_ping(seq);
  }

  void send_ping(std::uint64_t seq) {
    ping_target_ = seq % 2 == 0 ? o_.near : o_.far;
    ping_sent_ = Steady::now();
    (void)be_.send_to(ping_target_, p2p_, canopy::Packet{ring::kPing, {std::uint64_t{seq}}});
  }

  void start_tokens() {
    phase_ = Phase::tokens;
    start_ = Steady::now();
    const std::int64_t start_us = realtime_us();
    (void)be_.send(stream_, canopy::Packet{ring::kStarted, {std::vector<std::int64_t>{start_us}}});
  }

  void inject(std::uint64_t id) {
    auto& t = tokens_[id];
    t.sent = Steady::now();
    t.send_us = realtime_us();
    last_sent_ = t.sent;
    (void)be_.send_to(ring_.next(ring_.view_id()), p2p_,
                      canopy::Packet{ring::kToken, {std::uint64_t{id}, std::int64_t{t.send_us}, std::uint32_t{0}}});
  }

  // The time of token `i` in the schedule.
  Steady::time_point due(std::uint64_t i) const {
    if (o_.rate <= 0) return start_;
    return start_ + std::chrono::duration_cast<Steady::duration>(std::chrono::duration<double>(i / o_.rate));
  }

  void tick() {
    if (phase_ == Phase::pinging) tick_pings();
    if (phase_ == Phase::pinging && pings_done_.load(std::memory_order_acquire)) start_tokens();
    if (phase_ != Phase::tokens) return;
    const auto now = Steady::now();
    while (sent_ < tokens_.size() && due(sent_) <= now) inject(sent_++);
    if (sent_ < tokens_.size()) return;
    const auto quiet = std::chrono::milliseconds(o_.quiet_ms);
    if (back_ == tokens_.size() || (now - last_sent_ >= quiet && now - last_back_ >= quiet)) finish();
  }

  timespec timeout() const {
    auto wait = std::chrono::nanoseconds(std::chrono::milliseconds(phase_ == Phase::pinging ? 1 : 100));
    if (phase_ == Phase::tokens) {
      const auto now = Steady::now();
      auto next = sent_ < tokens_.size() ? due(sent_) : now + std::chrono::milliseconds(10);
      wait = std::max(std::chrono::nanoseconds(0), std::min(wait, std::chrono::nanoseconds(next - now)));
    }
    return timespec{static_cast<time_t>(wait.count() / 1000000000), static_cast<long>(wait.count() % 1000000000)};
  }

  void finish() {
    phase_ = Phase::done;
    std::string path = o_.out + "/tokens.csv";
    if (std::FILE* f = std::fopen(path.c_str(), "w")) {
      std::fprintf(f, "token,send_us,back_us,rtt_us,hops,view\n");
      for (std::size_t i = 0; i < tokens_.size(); ++i) {
        const auto& t = tokens_[i];
        std::fprintf(f, "%zu,%lld,%lld,%.1f,%u,%llu\n", i, static_cast<long long>(t.send_us),
                     static_cast<long long>(t.back_us), t.rtt_us, t.hops, static_cast<unsigned long long>(t.view));
      }
      std::fclose(f);
    }
    path = o_.out + "/pings.csv";
    if (std::FILE* f = std::fopen(path.c_str(), "w")) {
      std::fprintf(f, "target,tree_hops,kind,rtt_us\n");
      for (const auto& p : pings_) {
        std::fprintf(f, "%u,%d,%s,%.1f\n", p.target, p.target == o_.near ? o_.near_hops : o_.far_hops,
                     p.hot ? "hot" : "cold", p.rtt_us);
      }
      std::fclose(f);
    }
    (void)be_.send(stream_, canopy::Packet{ring::kDone, {std::vector<std::int64_t>{
                                                           static_cast<std::int64_t>(sent_),
                                                           static_cast<std::int64_t>(back_)}}});
  }

  canopy::Backend& be_;
  Ring& ring_;
  const Options& o_;
  Phase phase_ = Phase::idle;
  canopy::StreamId stream_ = 0;  // to the driver
  canopy::StreamId p2p_ = 0;     // for send_to
  struct Ping {
    Rank target;
    bool hot;
    double rtt_us;
  };
  std::atomic<std::uint64_t> ping_seq_{0};  // the pong awaited
  std::atomic<bool> ping_out_{true};        // a cold ping is on its way
  Rank ping_target_ = 0;                    // of the ping on its way; written by its sender
  Steady::time_point ping_sent_;
  Steady::time_point last_cold_;
  std::vector<Ping> pings_;  // the loop thread's until pings_done_
  std::atomic<bool> pings_done_{false};
  std::vector<TokenRecord> tokens_;
  std::uint64_t sent_ = 0, back_ = 0;
  Steady::time_point start_, last_sent_, last_back_;
};

// A token or ping at a back-end other than rank 0: forwarded or answered at once.
bool relay(canopy::Backend& be, Ring& ring, const canopy::Received& in) {
  const auto& pk = in.packet;
  if (pk.tag() == ring::kToken) {
    canopy::Packet out = pk;
    out.values()[2] = std::get<std::uint32_t>(pk[2]) + 1;
    (void)be.send_to(ring.next(RECEIVED_VIEW(in)), in.stream, out);
    return true;
  }
  if (pk.tag() == ring::kPing) {
    (void)be.send_to(pk.source(), in.stream, canopy::Packet{ring::kPong, {pk[0]}});
    return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: canopy-ring-backend --out DIR --backends N [--ring view|all] [--tokens T] [--rate R]\n"
                 "         [--pings P] [--ping-gap-us US] [--near RANK:HOPS] [--far RANK:HOPS] [--quiet-ms MS]\n"
                 "(started by canopy-ring-bench as a Canopy back-end%s)\n",
                 CANOPY_RING_HAS_VIEW ? "" : "; this build has no membership view: --ring all only");
    return 2;
  }
  // The handler runs on the loop thread; it is installed before the first packet,
  // and reads `ring`, which exists only once connect() returned: until then it
  // leaves packets to the main thread, which relays them the same way.
  std::atomic<Ring*> ring_ptr{nullptr};
  std::atomic<Origin*> origin_ptr{nullptr};
  auto handler = [&ring_ptr, &origin_ptr](canopy::Backend& be, const canopy::Received& in) {
    if (be.rank() == 0) {
      Origin* origin = origin_ptr.load(std::memory_order_acquire);
      return origin && origin->on_loop(in);
    }
    Ring* ring = ring_ptr.load(std::memory_order_acquire);
    return ring && relay(be, *ring, in);
  };
  auto backend = canopy::Backend::connect(handler);
  if (!backend) {
    std::fprintf(stderr, "canopy-ring-backend: %s\n", backend.error().c_str());
    return 1;
  }
  canopy::Backend& be = **backend;
  Ring ring(be, o);
  ring_ptr.store(&ring, std::memory_order_release);
  if (be.rank() == 0) {
    Origin origin(be, ring, o);
    origin_ptr.store(&origin, std::memory_order_release);
    origin.run();
    origin_ptr.store(nullptr, std::memory_order_release);
  } else {
    while (true) {
      auto in = be.receive(std::chrono::milliseconds(200));
      if (!in) break;  // the network has shut down
      if (*in) relay(be, ring, **in);  // one that came before the handler had the ring
      ring.drain_events();
    }
  }
  ring.drain_events();
  return 0;
}
