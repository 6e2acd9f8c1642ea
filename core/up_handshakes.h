// UpHandshakes: the connecting side of the handshake, on every link this node dials
// (to its parent at start, to a potential adopter, the standby link to its first
// potential adopter, to a promoted node when a front-end re-attaches). The hello
// goes out at once; its proof only once the acceptor's challenge has proved that
// the acceptor knows the network's secret (core/auth.h), over whose nonce the proof
// is computed. The accepting side is the node's (core/connections.h,
// core/node_accept.cpp). All on the node's io_context thread.
#pragma once

#include <capnp/message.h>

#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/service.h"
#include "transport/link.h"

namespace canopy::core {

class UpHandshakes {
 public:
  // `self` is the node's identity, borrowed.
  explicit UpHandshakes(const NodeIdentity& self) : self_(self) {}

  // Says hello on `link`, asking for `incarnation` (to be adopted if `adopt`; a
  // standby link if `standby`), with what `services` vouch for. `acceptor`: the rank
  // that must answer, when known; `fill` adds what else the hello says (an orphan's
  // subtree: Node::fill_adoption).
  void begin(const std::shared_ptr<transport::Link>& link, std::uint32_t incarnation, bool adopt, bool standby,
             std::optional<Rank> acceptor, const std::vector<Service*>& services,
             const std::function<void(wire::Hello::Builder)>& fill = {});
  // Whether `link`'s handshake is under way (its proof not sent yet).
  bool under_way(const transport::Link* link) const { return by_link_.count(link) > 0; }
  bool empty() const { return by_link_.empty(); }
  void forget(const transport::Link* link) {
    if (auto it = by_link_.find(link); it != by_link_.end()) finish(it);
  }
  // A message on `link` while its handshake is under way. False: it was the
  // handshake's (the proof went out), or the link is closed for a wrong answer,
  // logged. True: the caller reads it: a Shutdown telling why the hello was refused.
  bool on_message(const transport::Link* link, wire::Message::Reader message);

 private:
  struct Handshake {
    std::weak_ptr<transport::Link> link;
    std::optional<Rank> acceptor;
    std::unique_ptr<capnp::MallocMessageBuilder> hello;  // as sent; root: wire::Hello
  };
  using ByLink = std::unordered_map<const transport::Link*, Handshake>;
  // Ends a handshake; the table gives its room back once empty.
  void finish(ByLink::iterator handshake);

  const NodeIdentity& self_;
  ByLink by_link_;
};

}  // namespace canopy::core
