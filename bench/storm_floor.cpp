// canopy-storm-floor: the least a recovery storm can cost on this machine, with no
// Canopy in it (docs/fault-tolerance.md, "The floor under Figure 6").
//
// It builds the message pattern of Figure 6 with standby links out of bare processes
// and TCP connections on loopback, and times it the way canopy-recovery-bench times
// Canopy's: a victim process holds one connection to each of F orphans; every orphan
// also holds an open connection to one of A adopters (orphan i to adopter i mod A),
// and every adopter one to the front-end (this process). The front-end SIGKILLs the
// victim. Each orphan, on reading its parent's end of file, writes an adoption
// request (64 bytes) to its adopter, reads the answer (256 bytes) and writes its
// state (128 bytes); the adopter answers each request and, for each state, writes a
// report (64 bytes) to the front-end. Every process waits in epoll_wait, as Canopy's
// do, and does nothing else: no decoding, no state, no logging. The processes are
// forked from this small program (no exec), so their pages are shared and warm,
// which Canopy's are not: what it measures is a floor.
//
//   canopy-storm-floor [--fanout F] [--adopters A] [--timeline]
//
// Prints one line: "overall_ms=X last_detect_ms=Y victim_exit_ms=Z", from the kill
// to the front-end's reading the last report, to the last orphan's reading its
// parent's end of file, and to the victim's exit (its pidfd readable). With
// --timeline, then a line "ORPHAN DETECT_MS REPORT_MS" for each orphan (0 to F-1):
// from the kill to its reading the end of file, and to the front-end's reading its
// report. Exit status 1, with the reason on stderr, if the storm does not complete in
// 10 s. Every process it starts dies with it (PR_SET_PDEATHSIG) and is reaped.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kRequest = 64, kAnswer = 256, kState = 128, kReport = 64;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "canopy-storm-floor: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

std::int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// Reads exactly n bytes (a blocking socket); false at end of file.
bool read_all(int fd, void* buf, std::size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t got = read(fd, p, n);
    if (got == 0) return false;
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

void write_all(int fd, const void* buf, std::size_t n) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t put = write(fd, p, n);
    if (put < 0) {
      if (errno == EINTR) continue;
      die("write");
    }
    p += put;
    n -= static_cast<std::size_t>(put);
  }
}

// A connected pair of TCP sockets on loopback, as Canopy's links are (no delay).
std::pair<int, int> tcp_pair(int listener, const sockaddr_in& at) {
  const int a = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (a < 0) die("socket");
  if (connect(a, reinterpret_cast<const sockaddr*>(&at), sizeof at) != 0) die("connect");
  const int b = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (b < 0) die("accept");
  const int one = 1;
  setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return {a, b};
}

// In a new child: closes every descriptor above 2 but `keep` and `ready`, dies with
// its parent, says it is ready, and runs `body` (which never returns).
template <typename Body>
pid_t spawn(const std::vector<int>& keep, int ready, int max_fd, Body body) {
  const pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid > 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const std::set<int> kept(keep.begin(), keep.end());
  for (int fd = 3; fd <= max_fd; ++fd) {
    if (fd != ready && !kept.count(fd)) close(fd);
  }
  body(ready);
  _exit(0);
}

void say_ready(int ready) {
  const char c = 'r';
  write_all(ready, &c, 1);
  close(ready);
}

int add_to(int epoll, int fd) {
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.fd = fd;
  if (epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &e) != 0) die("epoll_ctl");
  return fd;
}

[[noreturn]] void orphan(int parent, int standby, int ready, std::int32_t index) {
  const int epoll = epoll_create1(0);
  add_to(epoll, parent);
  say_ready(ready);
  char buf[kAnswer];
  for (;;) {
    epoll_event e{};
    if (epoll_wait(epoll, &e, 1, -1) != 1) continue;
    // The end of file (or a reset) says the parent is gone; nothing else comes.
    const ssize_t got = read(parent, buf, sizeof buf);
    if (got > 0 || (got < 0 && errno == EINTR)) continue;
    const std::int64_t detected = now_ns();
    close(parent);
    std::memset(buf, 0, sizeof buf);
    write_all(standby, buf, kRequest);
    if (!read_all(standby, buf, kAnswer)) _exit(1);
    std::memcpy(buf, &detected, sizeof detected);
    std::memcpy(buf + sizeof detected, &index, sizeof index);
    write_all(standby, buf, kState);
    // Stays, as an adopted orphan does, until the front-end ends the run.
    for (;;) pause();
  }
}

[[noreturn]] void adopter(const std::vector<int>& children, int up, int ready) {
  const int epoll = epoll_create1(0);
  for (int fd : children) add_to(epoll, fd);
  std::vector<bool> asked(static_cast<std::size_t>(*std::max_element(children.begin(), children.end()) + 1));
  say_ready(ready);
  std::vector<epoll_event> events(children.size());
  char buf[kAnswer] = {};
  for (;;) {
    const int n = epoll_wait(epoll, events.data(), static_cast<int>(events.size()), -1);
    for (int i = 0; i < n; ++i) {
      const int fd = events[static_cast<std::size_t>(i)].data.fd;
      if (!asked[static_cast<std::size_t>(fd)]) {
        if (!read_all(fd, buf, kRequest)) _exit(1);
        asked[static_cast<std::size_t>(fd)] = true;
        write_all(fd, buf, kAnswer);
      } else {
        if (!read_all(fd, buf, kState)) _exit(1);
        write_all(up, buf, kReport);  // the orphan's detection time and index travel in its first bytes
        epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nullptr);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int fanout = 128, adopters = 16;
  bool timeline = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--timeline") {
      timeline = true;
    } else if ((a == "--fanout" || a == "--adopters") && i + 1 < argc) {
      const int n = std::atoi(argv[++i]);
      if (n < 1 || n > 1024) {
        std::fprintf(stderr, "canopy-storm-floor: %s takes 1 to 1024, not '%s'\n", a.c_str(), argv[i]);
        return 2;
      }
      (a == "--fanout" ? fanout : adopters) = n;
    } else {
      std::fprintf(stderr, "usage: canopy-storm-floor [--fanout F] [--adopters A] [--timeline]\n");
      return 2;
    }
  }
  adopters = std::min(adopters, fanout);
  signal(SIGPIPE, SIG_IGN);
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof at;
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
      listen(listener, 1024) != 0 || getsockname(listener, reinterpret_cast<sockaddr*>(&at), &len) != 0) {
    die("listen on 127.0.0.1");
  }
  std::vector<std::pair<int, int>> parent_links, standby_links, up_links;
  for (int i = 0; i < fanout; ++i) parent_links.push_back(tcp_pair(listener, at));
  for (int i = 0; i < fanout; ++i) standby_links.push_back(tcp_pair(listener, at));
  for (int a = 0; a < adopters; ++a) up_links.push_back(tcp_pair(listener, at));
  int ready_pipe[2];
  if (pipe(ready_pipe) != 0) die("pipe");
  int max_fd = ready_pipe[1];
  for (const auto* links : {&parent_links, &standby_links, &up_links}) {
    for (auto [a, b] : *links) max_fd = std::max({max_fd, a, b});
  }

  std::vector<pid_t> children;
  std::vector<int> victim_keeps;
  for (auto [a, b] : parent_links) victim_keeps.push_back(a);
  const pid_t victim = spawn(victim_keeps, ready_pipe[1], max_fd, [](int ready) {
    say_ready(ready);
    for (;;) pause();
  });
  children.push_back(victim);
  for (int a = 0; a < adopters; ++a) {
    std::vector<int> mine;
    for (int i = a; i < fanout; i += adopters) mine.push_back(standby_links[static_cast<std::size_t>(i)].first);
    const int up = up_links[static_cast<std::size_t>(a)].second;
    std::vector<int> keep = mine;
    keep.push_back(up);
    children.push_back(spawn(keep, ready_pipe[1], max_fd, [&](int ready) { adopter(mine, up, ready); }));
  }
  for (int i = 0; i < fanout; ++i) {
    const int parent = parent_links[static_cast<std::size_t>(i)].second;
    const int standby = standby_links[static_cast<std::size_t>(i)].second;
    children.push_back(spawn({parent, standby}, ready_pipe[1], max_fd,
                             [&](int ready) { orphan(parent, standby, ready, i); }));
  }
  // The front-end keeps only its ends of the adopters' links.
  close(ready_pipe[1]);
  close(listener);
  for (auto* links : {&parent_links, &standby_links}) {
    for (auto [a, b] : *links) close(a), close(b);
  }
  for (auto [a, b] : up_links) close(b);

  char ready[4096];
  std::size_t said = 0;
  while (said < children.size()) {
    const ssize_t got = read(ready_pipe[0], ready, sizeof ready);
    if (got <= 0) die("waiting for the processes to be ready");
    said += static_cast<std::size_t>(got);
  }
  usleep(200 * 1000);  // every process asleep in epoll_wait, as a tree in its steady state

  const int epoll = epoll_create1(0);
  for (auto [a, b] : up_links) add_to(epoll, a);
  // The victim's own exit (its descriptors closed, hence every end of file sent):
  // its pidfd becomes readable.
  const int victim_fd = static_cast<int>(syscall(SYS_pidfd_open, victim, 0));
  if (victim_fd < 0) die("pidfd_open");
  add_to(epoll, victim_fd);
  const std::int64_t killed = now_ns();
  if (kill(victim, SIGKILL) != 0) die("kill");
  std::int64_t last_detect = 0, last_report = 0, victim_gone = 0;
  // Each orphan's detection and report, from the kill (ns): --timeline.
  std::vector<std::pair<std::int64_t, std::int64_t>> each(static_cast<std::size_t>(fanout));
  int reports = 0;
  const std::int64_t deadline = killed + 10'000'000'000;
  std::vector<epoll_event> events(static_cast<std::size_t>(adopters) + 1);
  char buf[kReport];
  while ((reports < fanout || victim_gone == 0) && now_ns() < deadline) {
    const int n = epoll_wait(epoll, events.data(), static_cast<int>(events.size()), 100);
    for (int i = 0; i < n; ++i) {
      const int fd = events[static_cast<std::size_t>(i)].data.fd;
      if (fd == victim_fd) {
        victim_gone = now_ns();
        epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nullptr);
        continue;
      }
      if (!read_all(fd, buf, kReport)) die("an adopter ended");
      last_report = now_ns();
      std::int64_t detected = 0;
      std::int32_t index = 0;
      std::memcpy(&detected, buf, sizeof detected);
      std::memcpy(&index, buf + sizeof detected, sizeof index);
      last_detect = std::max(last_detect, detected);
      if (index >= 0 && index < fanout) each[static_cast<std::size_t>(index)] = {detected - killed, last_report - killed};
      ++reports;
    }
  }
  for (pid_t pid : children) kill(pid, SIGKILL);
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  if (reports < fanout) {
    std::fprintf(stderr, "canopy-storm-floor: %d of %d orphans reported in 10 s\n", reports, fanout);
    return 1;
  }
  std::printf("overall_ms=%.3f last_detect_ms=%.3f victim_exit_ms=%.3f\n",
              static_cast<double>(last_report - killed) / 1e6, static_cast<double>(last_detect - killed) / 1e6,
              static_cast<double>(victim_gone - killed) / 1e6);
  if (timeline) {
    for (std::size_t i = 0; i < each.size(); ++i) {
      std::printf("%zu %.3f %.3f\n", i, static_cast<double>(each[i].first) / 1e6,
                  static_cast<double>(each[i].second) / 1e6);
    }
  }
  return 0;
}
