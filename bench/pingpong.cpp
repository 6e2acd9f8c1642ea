// Two-process ping-pongs on loopback (bench/pingpong.h).
#include "pingpong.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <thread>

#include <boost/asio.hpp>
#include <capnp/serialize.h>

#include "core/loop_thread.h"
#include "core/service.h"
#include "membership.capnp.h"
#include "transport/tcp_link.h"

extern char** environ;

namespace canopy::bench {

using namespace std::chrono_literals;
namespace asio = boost::asio;

std::string self_exe() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Failure("cannot read /proc/self/exe: " + ec.message());
  return self.string();
}

namespace {
//
// The partner is this executable again, started with --echo-raw or --echo-link, so
// that no process forks while it has threads (the Networks of earlier samples have).

pid_t spawn_self(const std::vector<std::string>& args) {
  std::vector<std::string> all{self_exe()};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (int err = posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ)) {
    throw Failure(std::string("posix_spawn: ") + std::strerror(err));
  }
  return pid;
}

void reap(pid_t pid, const char* what) {
  int status = 0;
  for (int i = 0; i < 500; ++i) {  // 5 s
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw Failure(std::string(what) + " partner failed");
      return;
    }
    std::this_thread::sleep_for(10ms);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  throw Failure(std::string(what) + " partner did not exit");
}

}  // namespace

// A VIEW_ACK, as a process of the tree sends it up: the message of the membership
// protocol that the ping-pong bounces.
std::unique_ptr<core::Outgoing> view_ack(Rank sender) {
  canopy::core::NodeIdentity id{.rank = sender, .role = canopy::Role::commnode};
  auto m = std::make_unique<canopy::core::Outgoing>(id, canopy::wire::membership::SERVICE_ID, canopy::wire::membership::Kind::VIEW_ACK);
  m->init<canopy::wire::membership::ViewAck>().setId(1);
  return m;
}

bool read_exact(int fd, char* buf, std::size_t n) {
  while (n) {
    ssize_t r = read(fd, buf, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    buf += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

bool write_exact(int fd, const char* buf, std::size_t n) {
  while (n) {
    ssize_t r = send(fd, buf, n, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    buf += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

int echo_raw(std::uint16_t port, std::size_t bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  int one = 1;
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr)) return 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> buf(bytes);
  while (read_exact(fd, buf.data(), bytes)) {
    if (!write_exact(fd, buf.data(), bytes)) return 1;
  }
  return 0;
}

int listen_loopback(std::uint16_t& port) {
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), len) || listen(listener, 1) ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len)) {
    throw Failure(std::string("listening on loopback: ") + std::strerror(errno));
  }
  port = ntohs(addr.sin_port);
  return listener;
}

std::vector<double> pingpong_raw(int rounds, std::size_t bytes, int warmup) {
  std::uint16_t port = 0;
  int listener = listen_loopback(port);
  pid_t child = spawn_self({"--echo-raw", std::to_string(port), std::to_string(bytes)});
  int fd = accept(listener, nullptr, nullptr);
  close(listener);
  if (fd < 0) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    throw Failure(std::string("raw ping-pong: accept: ") + std::strerror(errno));
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> buf(bytes, 'x');
  std::vector<double> rtt;
  if (warmup < 0) warmup = std::max(10, rounds / 10);
  bool ok = true;
  for (int i = 0; i < warmup + rounds && ok; ++i) {
    auto start = Clock::now();
    ok = write_exact(fd, buf.data(), bytes) && read_exact(fd, buf.data(), bytes);
    if (i >= warmup) rtt.push_back(us(Clock::now() - start));
  }
  close(fd);
  reap(child, "raw ping-pong");
  if (!ok) throw Failure("raw ping-pong failed");
  return rtt;
}

int echo_link(std::uint16_t port) {
  canopy::core::LoopThread loop;
  std::promise<void> closed;
  auto link = loop.call([&]() -> std::shared_ptr<canopy::transport::TcpLink> {
    boost::system::error_code ec;
    auto socket = canopy::transport::connect_tcp(loop.io(), "127.0.0.1", port, ec);
    if (ec) return nullptr;
    auto l = canopy::transport::TcpLink::create(std::move(socket));
    auto reply = std::shared_ptr<canopy::core::Outgoing>(view_ack(2).release());
    l->start(
        [raw = l.get(), reply](capnp::MessageReader& m) {
          // Read it as a node reads a service message, then answer.
          auto body = m.getRoot<canopy::wire::Message>().getBody();
          if (body.isService()) (void)body.getService().getBody().getAs<canopy::wire::membership::ViewAck>().getId();
          raw->send(reply->builder());
        },
        [&closed](std::string_view) { closed.set_value(); });
    return l;
  });
  if (!link) return 1;
  closed.get_future().wait();
  loop.stop();
  return 0;
}

// Two processes, each with an asio event loop on a thread of its own, joined by a
// TcpLink (the transport of every link of the tree), bouncing a VIEW_ACK: the path a
// membership message takes between neighbours, without the node core's dispatch.
// Timed on the loop thread, as link_bench does. With `gap` zero the next ping leaves
// as soon as the answer is in (the classic ping-pong: both processes stay hot);
// otherwise after `gap`, so that both sides have gone to sleep in epoll_wait, as every
// process of an idle tree has when a view change reaches it. Returns the round trips
// (µs).
std::vector<double> pingpong_link(int rounds, std::chrono::microseconds gap) {
  canopy::core::LoopThread loop;
  asio::ip::tcp::acceptor acceptor(loop.io(), {asio::ip::make_address("127.0.0.1"), 0});
  const auto port = acceptor.local_endpoint().port();
  std::promise<std::shared_ptr<canopy::transport::TcpLink>> accepted;
  loop.call([&] {
    acceptor.async_accept([&](const boost::system::error_code& ec, asio::ip::tcp::socket s) {
      if (ec) accepted.set_value(nullptr);
      else accepted.set_value(canopy::transport::TcpLink::create(std::move(s)));
    });
  });
  pid_t child = spawn_self({"--echo-link", std::to_string(port)});
  auto future = accepted.get_future();
  if (future.wait_for(10s) != std::future_status::ready) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    throw Failure("link ping-pong: the partner did not connect");
  }
  auto link = future.get();
  if (!link) throw Failure("link ping-pong: accept failed");
  std::vector<double> rtt;
  std::promise<void> done;
  const int warmup = std::max(10, rounds / 10);
  int count = 0;
  Clock::time_point sent_at;
  auto ping = std::shared_ptr<canopy::core::Outgoing>(view_ack(1).release());
  asio::steady_timer timer(loop.io());
  loop.call([&] {
    link->start(
        [&](capnp::MessageReader& m) {
          auto now = Clock::now();
          auto body = m.getRoot<canopy::wire::Message>().getBody();
          if (body.isService()) (void)body.getService().getBody().getAs<canopy::wire::membership::ViewAck>().getId();
          if (count++ >= warmup) rtt.push_back(us(now - sent_at));
          if (count == warmup + rounds) return done.set_value();
          if (gap.count() == 0) {
            sent_at = Clock::now();
            return link->send(ping->builder());
          }
          timer.expires_after(gap);
          timer.async_wait([&](const boost::system::error_code& ec) {
            if (ec) return;
            sent_at = Clock::now();
            link->send(ping->builder());
          });
        },
        [&](std::string_view) {
          if (count < warmup + rounds) {
            count = warmup + rounds;
            done.set_value();
          }
        });
    sent_at = Clock::now();
    link->send(ping->builder());
  });
  bool finished = done.get_future().wait_for(60s) == std::future_status::ready;
  loop.call([&] {
    timer.cancel();
    link->detach();
  });  // the partner reads end of file and exits
  loop.stop();
  if (!finished || static_cast<int>(rtt.size()) < rounds) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    throw Failure("link ping-pong did not complete");
  }
  reap(child, "link ping-pong");
  return rtt;
}

}  // namespace canopy::bench
