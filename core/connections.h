// Connections: every link of a node but its parent's, each in one state.
//
// A connection another process opened here goes through the handshake (awaiting
// its hello, then challenged: the hello waits for its proof, core/auth.h), then is
// what its proved hello asked for: a child (launched, attached, adopted or back
// again), an orphan whose adoption request is held (core/held_adoptions.h), a
// back-end joining the running tree (waiting for the root's answer: open attach),
// or a standby link kept idle for an orphan-to-be. A link this node dialled that
// became a child (a re-attached front-end's to its acceptor) is here too, as a
// child. The state says what a message on the link is, and what its closing means;
// the node (core/node_accept.cpp) moves a connection from state to state.
//
// Until it is admitted (a child, joining, standby) an accepted connection has a
// deadline for its hello. All on the node's io_context thread.
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
#include "canopy/topology.h"
#include "transport/clock.h"
#include "transport/link.h"

namespace canopy::core {

class Connections {
 public:
  struct AwaitingHello {};
  struct Challenged {
    Nonce challenge{};
    std::unique_ptr<capnp::MallocMessageBuilder> hello;  // root: wire::Hello
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
  struct Child {
    std::size_t index = 0;  // in the node's child table
  };
  using State = std::variant<AwaitingHello, Challenged, HeldOrphan, Joining, Standby, Child>;

  struct Connection {
    std::shared_ptr<transport::Link> link;
    State state;
    std::unique_ptr<Timer> hello_deadline;  // until admitted
  };

  // A new accepted connection, awaiting its hello.
  Connection& add(std::shared_ptr<transport::Link> link);
  Connection* find(const transport::Link* link);
  // Moves `link`'s connection to `next`, adding it if it is not here (a dialled link
  // that becomes a child). Admitted (a child, joining, standby), it has no hello
  // deadline any more.
  Connection& set(const std::shared_ptr<transport::Link>& link, State next);
  // Forgets `link`; returns what it was.
  std::optional<Connection> remove(const transport::Link* link);
  // The child whose link `link` is, if it is one.
  std::optional<std::size_t> child_of(const transport::Link* link) const;
  // The connection of the back-end joining under `rank`, if any.
  Connection* joining(Rank rank);
  // Connections in the handshake, held or joining: not admitted yet.
  std::size_t unadmitted() const;
  template <typename S>
  std::size_t count() const {
    return counts_[index_of<S>()];
  }
  // Every link in one of the states `in` says (a copy: closing one may change the table).
  std::vector<std::shared_ptr<transport::Link>> links(const std::function<bool(const State&)>& in) const;
  // Detaches every link but the children's (the node leaves or is destroyed) and
  // forgets them all.
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
  std::unordered_map<const transport::Link*, Connection> by_link_;
  std::array<std::size_t, std::variant_size_v<State>> counts_{};
};

}  // namespace canopy::core
