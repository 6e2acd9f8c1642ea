#include "core/listener.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <random>

#include "core/log.h"
#include "transport/tcp_link.h"

namespace canopy::core {
namespace {

// The lowest descriptor a listening socket moves to: near the top of the range the
// process may open (at most 4,064, so that the kernel's table of descriptors stays
// small), or none when that range is small.
int listener_descriptor_floor() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0) return -1;
  const rlim_t cap = 4096;
  const rlim_t top = files.rlim_cur == RLIM_INFINITY ? cap : std::min(files.rlim_cur, cap);
  return top > 128 ? static_cast<int>(top - 32) : -1;
}

// When a process dies, Linux closes its sockets highest descriptor first. A listener
// above every link therefore refuses connections before any child or peer reads its
// link's end: an adopter's probe of a killed parent (core/node_accept.cpp) is
// refused at once, instead of being accepted by a listener that closes last, tens of
// milliseconds later when a hundred orphans wake on two cores (docs/fault-tolerance.md).
// Best effort: the listener stays where it is if it cannot move.
void move_high(asio::ip::tcp::acceptor& acceptor, const asio::ip::tcp& protocol) {
  const int floor = listener_descriptor_floor();
  const int fd = acceptor.native_handle();
  if (floor < 0 || fd >= floor) return;
  const int high = fcntl(fd, F_DUPFD_CLOEXEC, floor);
  if (high < 0) return;
  boost::system::error_code ec;
  acceptor.release(ec);
  if (ec) {
    ::close(high);
    return;
  }
  ::close(fd);
  acceptor.assign(protocol, high, ec);
}

}  // namespace

void reserve_listener_descriptor() {
  const int floor = listener_descriptor_floor();
  if (floor < 0) return;
  const int probe = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (probe < 0) return;
  const int high = fcntl(probe, F_DUPFD_CLOEXEC, floor);  // the table grows to hold it
  if (high >= 0) ::close(high);
  ::close(probe);
}

std::optional<std::size_t> raise_descriptor_limit() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == files.rlim_max) return std::nullopt;
  files.rlim_cur = files.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &files) != 0) return std::nullopt;
  return files.rlim_cur == RLIM_INFINITY ? std::numeric_limits<std::size_t>::max()
                                         : static_cast<std::size_t>(files.rlim_cur);
}

std::optional<std::size_t> descriptors_left() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0) return std::nullopt;
  if (files.rlim_cur == RLIM_INFINITY) return std::numeric_limits<std::size_t>::max();
  std::error_code ec;
  std::size_t open = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++open;
  if (ec) return std::nullopt;
  const auto limit = static_cast<std::size_t>(files.rlim_cur);
  return open >= limit ? 0 : limit - open;
}

Result<void> Listener::open(const std::vector<std::string>& names, std::uint16_t port, PortRange ports,
                            const transport::StripedOptions& striped, OnLink on_link) {
  std::vector<asio::ip::address> addresses;
  for (const std::string& name : names) {
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(name, ec);
    if (ec) {
      asio::ip::tcp::resolver resolver(io_);
      auto results = resolver.resolve(name, "0", ec);
      if (ec || results.empty()) return Error{"cannot resolve " + name + " to listen on: " + ec.message()};
      addr = results.begin()->endpoint().address();
    }
    addresses.push_back(addr);
  }
  Result<void> listening;
  if (port == 0 && !ports.any()) {
    listening = bind_in(addresses, ports);
  } else {
    for (int attempt = 0; attempt < 8; ++attempt) {
      listening = bind_all(addresses, port);
      if (listening || port != 0 || addresses.size() == 1) break;
    }
  }
  if (!listening) return listening;

  striped_ = std::make_unique<transport::StripedAcceptor>(
      io_, striped, [on_link](std::shared_ptr<transport::StripedLink> link) { on_link(std::move(link)); },
      [on_link](asio::ip::tcp::socket socket) { on_link(transport::TcpLink::create(std::move(socket))); });
  std::string where;
  for (const auto& a : addresses) where += (where.empty() ? "" : ", ") + a.to_string();
  log().info("listening on {} port {}", where, port_);
  retries_.clear();
  for (std::size_t i = 0; i < acceptors_.size(); ++i) {
    retries_.push_back(std::make_unique<asio::steady_timer>(io_));
    accept_next(i);
  }
  return {};
}

Result<void> Listener::bind_all(const std::vector<asio::ip::address>& addresses, std::uint16_t port) {
  acceptors_.clear();
  for (const auto& address : addresses) {
    asio::ip::tcp::endpoint endpoint(address, port);
    auto& acceptor = acceptors_.emplace_back(io_);
    boost::system::error_code ec;
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) move_high(acceptor, endpoint.protocol());
    if (ec) {
      acceptors_.clear();
      return Error{"cannot listen on " + address.to_string() + ":" + std::to_string(port) + ": " + ec.message()};
    }
    if (port == 0) port = acceptor.local_endpoint().port();
  }
  port_ = port;
  return {};
}

// Processes of one host starting together try the ports of the range from random
// places, so that most find a free one at their first try.
Result<void> Listener::bind_in(const std::vector<asio::ip::address>& addresses, PortRange ports) {
  const std::size_t n = ports.size();
  std::size_t at = std::random_device{}() % n;
  std::string last;
  for (std::size_t tried = 0; tried < n; ++tried, at = (at + 1) % n) {
    auto bound = bind_all(addresses, static_cast<std::uint16_t>(ports.first + at));
    if (bound) return bound;
    last = bound.error();
  }
  std::string where;
  for (const auto& a : addresses) where += (where.empty() ? "" : ", ") + a.to_string();
  return Error{"no free port in " + to_string(ports) + " (the tree's port range) on " + where + ": all " +
               std::to_string(n) + " are taken (the last: " + last + "); widen the range (canopy run --ports, "
               "topology 'ports:')"};
}

void Listener::accept_next(std::size_t index) {
  acceptors_[index].async_accept([this, index](const boost::system::error_code& ec, asio::ip::tcp::socket socket) {
    if (ec == asio::error::operation_aborted || closed_) return;
    if (!ec) {
      striped_->take(std::move(socket));
      return accept_next(index);
    }
    // Out of descriptors (EMFILE, ENFILE) or memory, the connection stays in the
    // backlog and accepting again at once fails again: a busy loop filling the log.
    // Wait a little instead, and say so once in a while.
    const auto now = std::chrono::steady_clock::now();
    if (now - accept_failure_logged_ >= std::chrono::seconds(10)) {
      log().warn("accept failed: {}; trying again every {} ms meanwhile", ec.message(), kAcceptRetry.count());
      accept_failure_logged_ = now;
    }
    auto& retry = *retries_[index];
    retry.expires_after(kAcceptRetry);
    retry.async_wait([this, index](const boost::system::error_code& e) {
      if (!e && !closed_) accept_next(index);
    });
  });
}

Result<void> Listener::open(transport::Fabric& fabric, std::uint16_t port, OnLink on_link) {
  auto opened = fabric.listen(io_, port, std::move(on_link));
  if (!opened) return Error{opened.error()};
  fabric_ = &fabric;
  port_ = *opened;
  return {};
}

void Listener::close() {
  if (fabric_ && !closed_) fabric_->stop_listening(port_);
  closed_ = true;
  for (auto& retry : retries_) retry->cancel();
  for (auto& acceptor : acceptors_) {
    boost::system::error_code ignored;
    acceptor.close(ignored);
  }
}

}  // namespace canopy::core
