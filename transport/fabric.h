// Fabric: how a node's links come to be, when not over the operating system's
// sockets. A real process has none (the node listens and connects over TCP, or
// striped paths); canopy-sim gives every simulated process one whose links are
// memory (sim/memory_fabric.h), so that the node core and its services run as they
// ship, every process of a large tree in one OS process (docs/simulation.md).
//
// Only the three places where a node makes a connection ask it: listening
// (core::Listener), dialling a rank (core::dial) and connecting to the parent
// (Node::start_as_child). Addresses play no part: a fabric knows ports.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "canopy/result.h"
#include "transport/link.h"

namespace canopy::transport {

class Fabric {
 public:
  using OnLink = std::function<void(std::shared_ptr<Link>)>;
  virtual ~Fabric() = default;

  // Listens on `port` (0: one the fabric picks) and returns it; every connection
  // made to it comes to `on_link`, on `io`'s thread, not started.
  virtual Result<std::uint16_t> listen(boost::asio::io_context& io, std::uint16_t port, OnLink on_link) = 0;
  virtual void stop_listening(std::uint16_t port) = 0;

  // A connection to whoever listens on `port`, not started; an error when nobody
  // does (`refused`, as a host that answers but has nothing on the port).
  struct Connected {
    std::shared_ptr<Link> link;  // null: failed
    std::string error;
    bool refused = false;
  };
  virtual Connected connect(boost::asio::io_context& io, std::uint16_t port) = 0;
};

}  // namespace canopy::transport
