// Connections: every link of a node but its parent's, each in one state.
//
// A connection another process opened here goes through the handshake (awaiting
// its hello, then challenged: the hello waits for its proof, core/auth.h), then is
// what its proved hello asked for: a child (launched, attached, adopted or back
// again), an orphan whose adoption request is held (core/held_adoptions.h), a
// back-end joining the running tree (waiting for the root's answer: open attach),
// or a standby link kept idle for an orphan-to-be. The state says what a message on
// the link is, and what its closing means; the node (core/node_accept.cpp) moves a
// connection from state to state.
//
// A connection that becomes a child leaves the table: the node tags its link with
// the child's place in the child table (Link::owner_tag, Node::take_link) and reads
// its messages by that, as it does a link it dialled that became a child (a
// re-attached front-end's to its acceptor). An entry a child, kept until stop 80,
// was 64 bytes and a bucket a child, and a hash lookup on every message
// (docs/scale.md, "A commnode's state per child").
//
// Until it is admitted (a child, joining, standby) an accepted connection has a
// deadline for its hello. The table also holds what every connection comes through
// or is refused by: the listener, one refusal for every kind (logged, the peer told
// why when it must stop), and open attach's reserve of file descriptors. All on the
// node's io_context thread.
#pragma once

#include <capnp/message.h>

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <variant>

#include "core/auth.h"
#include "core/listener.h"
#include "canopy/topology.h"
#include "transport/clock.h"
#include "transport/link.h"
#include "transport/refusal_log.h"

namespace canopy::core {

class ServiceContext;

class Connections {
 public:
  // `self` is the node whose connections these are (borrowed): its identity signs a
  // refusal, its name says who refuses.
  Connections(asio::io_context& io, const ServiceContext& self) : self_(self), io_(io) {}

  // ---- where connections come from ----
  // Listens (core/listener.h); every accepted link goes to `on_link`.
  Result<void> listen(const std::vector<std::string>& addresses, std::uint16_t port, PortRange ports,
                      const transport::StripedOptions& striped, Listener::OnLink on_link) {
    return listener().open(addresses, port, ports, striped, std::move(on_link));
  }
  Result<void> listen(transport::Fabric& fabric, std::uint16_t port, Listener::OnLink on_link) {
    return listener().open(fabric, port, std::move(on_link));
  }
  std::uint16_t port() const { return listener_ ? listener_->port() : 0; }
  void stop_listening() {
    if (listener_) listener_->close();
  }

  // ---- refusing one ----
  struct Refusal {
    std::string whom;  // in the log: "connection from ADDRESS", "to adopt back-end 3", ...
    std::string why;
    // The peer is told first, in a Shutdown, so that its process stops rather than ask
    // again or elsewhere (a back-end's receive() fails with it): `told`, by default
    // "refused by THIS NODE: WHY".
    bool for_good = false;
    std::string told;
    // Not empty: a peer that proved nothing yet (whoever reaches the port can cause
    // this), logged once per address and `stranger` kind in a while
    // (transport/refusal_log.h), as "refusing connection from ADDRESS: WHY".
    std::string_view stranger;
  };
  // Logs the refusal, tells the peer if it must stop, and closes `link` (which stays
  // in the table until its close handler removes it).
  void refuse(const std::shared_ptr<transport::Link>& link, const Refusal& refusal);
  // What a stranger did that ends its connection otherwise (silence, a bad frame,
  // too many at once), logged as a refusal is.
  void note_stranger(const std::string& peer, std::string_view kind, const std::string& why);
  // Open attach: takes a descriptor for a back-end that joins, or says why there is
  // none to take (kept for the tree's own links: adoptions, striped paths, probes).
  std::optional<std::string> take_descriptor();

  struct AwaitingHello {};
  struct Challenged {
    struct Held {
      Nonce challenge{};
      capnp::MallocMessageBuilder hello;  // root: wire::Hello
    };
    // On the heap: a connection in any other state, a child's, holds none of it.
    std::unique_ptr<Held> held;
  };
  struct HeldOrphan {};
  struct Joining {
    Rank rank = 0;
    std::unique_ptr<Timer> deadline;  // startup_timeout: no answer, refused
  };
  struct Standby {
    Rank rank = 0;  // as its handshake proved
    Role role = Role::backend;
  };
  using State = std::variant<AwaitingHello, Challenged, HeldOrphan, Joining, Standby>;

  struct Connection {
    std::shared_ptr<transport::Link> link;
    State state;
    std::unique_ptr<Timer> hello_deadline;  // until admitted
  };

  // A new accepted connection, awaiting its hello.
  Connection& add(std::shared_ptr<transport::Link> link);
  Connection* find(const transport::Link* link);
  // Moves `link`'s connection to `next`, adding it if it is not here. Admitted
  // (joining, standby), it has no hello deadline any more.
  Connection& set(const std::shared_ptr<transport::Link>& link, State next);
  // Forgets `link`; returns what it was.
  std::optional<Connection> remove(const transport::Link* link);
  // The connection of the back-end joining under `rank`, if any.
  Connection* joining(Rank rank);
  // Connections in the handshake, held or joining: not admitted yet.
  std::size_t unadmitted() const;
  template <typename S>
  std::size_t count() const {
    return table_ ? table_->counts[index_of<S>()] : 0;
  }
  // Every link in one of the states `in` says (a copy: closing one may change the table).
  std::vector<std::shared_ptr<transport::Link>> links(const std::function<bool(const State&)>& in) const;
  // Detaches every link here (the node leaves or is destroyed: the children's, not
  // here, stay) and forgets them all.
  void detach_all();

 private:
  template <typename S, std::size_t I = 0>
  static constexpr std::size_t index_of() {
    if constexpr (std::is_same_v<S, std::variant_alternative_t<I, State>>) {
      return I;
    } else {
      return index_of<S, I + 1>();
    }
  }
  const ServiceContext& self_;
  // Made when the node first listens, as the log of strangers refused is when the
  // first comes: a back-end does neither (docs/scale.md, "A back-end's own state").
  Listener& listener() {
    if (!listener_) listener_ = std::make_unique<Listener>(io_);
    return *listener_;
  }
  asio::io_context& io_;
  std::unique_ptr<Listener> listener_;
  // Made by the first connection: a back-end, which accepts none, holds none
  // (docs/scale.md, "A back-end's own state").
  struct Table {
    std::unordered_map<const transport::Link*, Connection> by_link;
    std::array<std::uint32_t, std::variant_size_v<State>> counts{};
  };
  Table& table() {
    if (!table_) table_ = std::make_unique<Table>();
    return *table_;
  }
  std::unique_ptr<Table> table_;
  std::unique_ptr<transport::RefusalLog> refusals_;  // what strangers cause, logged once per address and kind in a while
  static constexpr std::size_t kJoinReserve = 32;
  std::size_t spare_descriptors_ = 0;  // at the last count, less one per back-end since
};

}  // namespace canopy::core
