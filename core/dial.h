// Dialling another process of the tree by its rank: the one way the core and its
// services open a connection once the tree is known (to a potential adopter, the
// standby link to the first one, the probe of an orphan's parent). The address is
// the rank's host's (its first, resolved if it is a name), the port the one it
// published; the connection is striped where the topology links the two hosts so
// (one path per NIC pair), else one TCP connection. The link comes back not started:
// the caller starts it and says hello. (A front-end re-attaching dials the address in
// the attach file, before it knows any tree: frontend/network.cpp.)
#pragma once

#include <boost/asio.hpp>

#include <functional>
#include <memory>
#include <string>

#include "canopy/result.h"
#include "canopy/topology.h"
#include "core/auth.h"
#include "transport/fabric.h"
#include "transport/link.h"

namespace canopy::core {

// How a dial ended: the link, or why not.
struct Dialled {
  std::shared_ptr<transport::Link> link;  // null: failed
  std::string error;
  // Nothing listens at the address: the process is gone, though its host answers.
  bool refused = false;
};
using DialDone = std::function<void(Dialled)>;

// A dial under way. cancel(), or destroying it, abandons it: its `done` is not
// called, and a link that comes after all is aborted.
class Dial {
 public:
  Dial() = default;
  ~Dial() { cancel(); }
  Dial(Dial&&) = default;
  Dial& operator=(Dial&& other) noexcept {
    cancel();
    state_ = std::move(other.state_);
    return *this;
  }
  void cancel();
  // Neither ended nor abandoned.
  bool under_way() const;

  struct State;  // dial.cpp's

 private:
  friend Result<Dial> dial(boost::asio::io_context&, const Topology&, Rank, Rank, const Secret&, bool, DialDone,
                           transport::Fabric*);
  std::shared_ptr<State> state_;
};

// Dials `to` from `from` (ranks of `topology`), proving `secret` on striped paths;
// `plain`: one TCP connection even where the topology stripes the link (a probe).
// An error at once when `to` cannot be reached at all (not in the topology, no port
// published yet, a host name that does not resolve); else `done` runs once, on `io`'s
// thread, unless the dial is abandoned first. With a `fabric` (canopy-sim), its link
// to the rank's port, whatever the hosts.
Result<Dial> dial(boost::asio::io_context& io, const Topology& topology, Rank from, Rank to, const Secret& secret,
                  bool plain, DialDone done, transport::Fabric* fabric = nullptr);

}  // namespace canopy::core
