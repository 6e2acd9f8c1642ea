// Listener: the listening sockets of one node, one per NIC address of its host, all
// on one port, and the acceptor that tells striped connections from plain ones.
// Every accepted connection, plain or striped, is handed over as a Link.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "canopy/result.h"
#include "canopy/topology.h"
#include "transport/fabric.h"
#include "transport/link.h"
#include "transport/striped_link.h"

namespace canopy::core {

namespace asio = boost::asio;

// Grows this process's table of descriptors now to where a listener moves (above
// every link: listener.cpp, move_high), so that the move costs nothing later. The
// kernel grows the table of a process that has several threads only after an RCU
// grace period (about 10 ms on this project's machine: a front-end's first launch
// waited that long between its topology and its listening socket), of a
// single-threaded one at once. Call it before the process starts threads: the
// front-end does, before its loop's thread. Best effort; cheap when done already.
void reserve_listener_descriptor();

// Raises this process's soft limit on open descriptors to its hard limit (a
// commnode holds one per child link, and an open attach's back-ends come as they
// like; processes it starts afterwards inherit it). Returns the new limit, or
// nothing if it was at its hard limit already (or cannot be raised).
std::optional<std::size_t> raise_descriptor_limit();
// How many more descriptors this process may open (its soft limit less those open,
// counted in /proc/self/fd), or nothing if that cannot be told.
std::optional<std::size_t> descriptors_left();

class Listener {
 public:
  using OnLink = std::function<void(std::shared_ptr<transport::Link>)>;

  explicit Listener(asio::io_context& io) : io_(io) {}
  ~Listener() { close(); }

  // Listens on every address in `addresses` (numeric, or names to resolve) on
  // `port`, or, with port 0, on one the kernel picks for the first address and the
  // others then share (tried again a few times if another process holds it on some
  // address). With port 0 and a range (`ports`), the first free port of the range
  // from a random place in it, wrapping round: an error when none is free. `striped`
  // configures striped connections (their hello time-out included). The error names
  // the address and the reason.
  Result<void> open(const std::vector<std::string>& addresses, std::uint16_t port, PortRange ports,
                    const transport::StripedOptions& striped, OnLink on_link);
  // The same over a fabric (canopy-sim): the fabric's links, on `port` (0: one it
  // picks).
  Result<void> open(transport::Fabric& fabric, std::uint16_t port, OnLink on_link);
  std::uint16_t port() const { return port_; }
  // Stops accepting. Idempotent.
  void close();

 private:
  Result<void> bind_all(const std::vector<asio::ip::address>& addresses, std::uint16_t port);
  Result<void> bind_in(const std::vector<asio::ip::address>& addresses, PortRange ports);
  void accept_next(std::size_t index);

  asio::io_context& io_;
  std::vector<asio::ip::tcp::acceptor> acceptors_;
  std::unique_ptr<transport::StripedAcceptor> striped_;
  std::uint16_t port_ = 0;
  bool closed_ = false;
  transport::Fabric* fabric_ = nullptr;  // listening on it, not on sockets
  // After a failed accept (out of descriptors): the next try waits this long, on
  // the acceptor's own timer.
  static constexpr std::chrono::milliseconds kAcceptRetry{50};
  std::vector<std::unique_ptr<asio::steady_timer>> retries_;
  std::chrono::steady_clock::time_point accept_failure_logged_{};
};

}  // namespace canopy::core
