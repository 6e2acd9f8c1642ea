#include "run_output.h"

#include <poll.h>
#include <semaphore.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

namespace canopy::tools {

std::atomic<int> g_signal{0};

namespace {

sem_t g_interrupted;  // posted by the first signal, for the watchdog

}  // namespace

void catch_interrupts() {
  sem_init(&g_interrupted, 0, 0);
  struct sigaction sa {};
  sa.sa_handler = [](int sig) {
    if (g_signal.exchange(sig) == 0) {
      sem_post(&g_interrupted);
      return;
    }
    static const char again[] = "canopy: interrupted again: exiting at once\n";
    (void)!write(2, again, sizeof again - 1);
    _exit(130);
  };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // The command shuts its tree down on the first signal. Should that not end within
  // kStopLimit (a front-end filter that never returns holds the network's thread,
  // and a run waiting on it never ended, even on SIGINT: issue 45), the process
  // exits anyway; its commnodes find their parent gone and stop their subtrees.
  std::thread([] {
    while (sem_wait(&g_interrupted) != 0) {
    }
    std::this_thread::sleep_for(kStopLimit);
    std::fprintf(stderr, "canopy: the tree did not stop within %lld s of the signal (a filter that never returns?); "
                 "exiting\n", static_cast<long long>(kStopLimit.count()));
    std::fflush(stderr);
    _exit(130);
  }).detach();
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string json_string(const std::string& s) { return to_json(Value{s}); }

std::string count(std::size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string rank_list(const std::vector<Rank>& ranks) {
  std::string out = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out + "]";
}

std::string event_text(const Event& e) {
  char line[1024];
  if (e.kind == Event::Kind::failure) {
    std::snprintf(line, sizeof line, "failure of %u: %s", e.rank, e.reason.c_str());
  } else if (e.kind == Event::Kind::adoption) {
    std::snprintf(line, sizeof line, "%u adopted by %u (incarnation %u)", e.rank, e.adopter, e.incarnation);
  } else if (e.kind == Event::Kind::gossip) {
    std::snprintf(line, sizeof line, "gossip: back-end %u found back-end %u failed (its heartbeat still for %lld ms)",
                  e.detector, e.rank, static_cast<long long>(e.silent.count()));
  } else if (e.kind == Event::Kind::view) {
    std::snprintf(line, sizeof line, "view %llu: %zu members, left %s, joined %s, stabilised in %lld us",
                  static_cast<unsigned long long>(e.view.id), e.view.members.size(), rank_list(e.left).c_str(),
                  rank_list(e.joined).c_str(), static_cast<long long>(e.stabilise.count()));
  } else if (e.kind == Event::Kind::frontend_lost) {
    std::snprintf(line, sizeof line, "the front-end was lost: %s", e.reason.c_str());
  } else if (e.kind == Event::Kind::promoted) {
    std::snprintf(line, sizeof line, "commnode %u took the root's place and adopted %u process(es) in %lld us",
                  e.rank, e.adopted, static_cast<long long>(e.after.count()));
  } else if (e.kind == Event::Kind::reattached) {
    std::snprintf(line, sizeof line,
                  "re-attached to commnode %u, %.3f s after the front-end was lost (connect and handshake %lld us)%s",
                  e.rank, static_cast<double>(e.after.count()) / 1e6, static_cast<long long>(e.connect.count()),
                  e.incomplete_streams.empty() ? "" : "; some streams may have lost data");
  } else if (e.kind == Event::Kind::service) {
    std::snprintf(line, sizeof line, "service %s of %u: %s", e.service.c_str(), e.rank, e.detail.c_str());
  } else {
    std::snprintf(line, sizeof line,
                  "%u recovered under %u after %u attempt(s): choose %lld us, connect %lld us, "
                  "compensate %lld us, cleanup %lld us%s",
                  e.rank, e.adopter, e.attempts, static_cast<long long>(e.choose.count()),
                  static_cast<long long>(e.connect.count()), static_cast<long long>(e.compensate.count()),
                  static_cast<long long>(e.cleanup.count()),
                  e.incomplete_streams.empty() ? "" : " (some streams may have lost data)");
  }
  return line;
}

std::vector<Event> print_events(Network& net, bool jsonl, StatusWriter& status) {
  std::vector<Event> events;
  while (auto e = net.next_event(std::chrono::milliseconds(0))) {
    const std::string text = event_text(*e);
    if (jsonl) {
      std::printf("%s\n", to_json(*e).c_str());
    } else {
      std::printf("event: %s\n", text.c_str());
    }
    std::fflush(stdout);
    status.note(*e, text);
    events.push_back(std::move(*e));
  }
  if (events.empty()) {
    status.refresh(net);
  } else {
    status.update(net);
  }
  return events;
}

// Sleeps until a packet or an event is ready, or `timeout` has passed. Waiting on
// both, not on packets alone, lets the run print a failure when it is heard, even
// when no packet follows it (a loss between two slow waves, or after the last).
void wait_for_packet_or_event(const Network& net, std::chrono::milliseconds timeout) {
  pollfd fds[2] = {{net.event_fd(), POLLIN, 0}, {net.events_fd(), POLLIN, 0}};
  poll(fds, 2, static_cast<int>(timeout.count()));  // EINTR (a signal) just ends the wait early
}

}  // namespace canopy::tools
