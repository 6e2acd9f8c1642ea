// Healing: what a node keeps to heal the tree (paper 004, docs/fault-tolerance.md),
// beside its phase and its child table:
//   - the links it dials up (to its parent, to a potential adopter, its standby link,
//     a re-attaching front-end's to the heir) while their handshake is under way
//     (core/up_handshakes.h);
//   - the standby link to its first potential adopter, kept idle until it is orphaned
//     and asks for adoption on it;
//   - a front-end's re-attach under way (Node::reattach);
//   - the adopter's side: orphans' requests held until their parent's failure is
//     known, and the probes of that parent (core/held_adoptions.h);
//   - the live-tree news (failure and adoption reports) on its way down, in batches
//     (core/tree_news.h), and how much of it arrived.
// The steps that change the node's phase or parent (orphaned, adopted, promoted,
// re-attached) are the node's (core/node_orphan.cpp, core/node_reattach.cpp); they
// keep their state here. All on the node's io_context thread.
#pragma once

#include <boost/asio.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "core/children.h"
#include "core/held_adoptions.h"
#include "core/tree_news.h"
#include "core/up_handshakes.h"
#include "transport/link.h"

namespace canopy::core {

class Healing {
 public:
  // `self`, `children` and `node` are the node's, borrowed; `adopt` adopts an orphan
  // whose held request may now be answered.
  Healing(boost::asio::io_context& io, const NodeIdentity& self, ChildTable& children, ServiceContext& node,
          std::function<void(const OrphanRequest&)> adopt)
      : up(self), io_(io), self_(self), children_(children), node_(node), adopt_(std::move(adopt)) {}
  // Detaches the standby link and a re-attach's link (their handlers must not run).
  ~Healing() { detach(); }
  Healing(const Healing&) = delete;
  Healing& operator=(const Healing&) = delete;

  UpHandshakes up;    // the handshake of each link this node dials
  // Live-tree news on its way down, and orphans' requests held here with the probes
  // of their parents: made when first needed. A back-end, which has no children and
  // adopts no one, never makes them (docs/scale.md, "A back-end's own state").
  TreeNews& news();
  TreeNews* news_if_made() { return news_.get(); }
  // The news goes if nothing of it waits (made again when next needed).
  void shed_news() {
    if (news_ && news_->idle()) news_.reset();
  }
  HeldAdoptions& held();
  const HeldAdoptions* held_if_made() const { return held_.get(); }
  // Nothing under way or kept: no handshake, standby link, re-attach, news or held
  // request. The node may then give this back (Node::shed_healer).
  bool idle() const {
    return up.empty() && !standby_.link && !reattaching.link && !reattaching.done && !news_ && !held_;
  }

  // ---- the standby link ----
  // Opens the standby link to `acceptor` on `link` (its hello goes out with `services`'
  // part), replacing any other.
  void open_standby(const std::shared_ptr<transport::Link>& link, Rank acceptor, std::uint32_t incarnation,
                    const std::vector<Service*>& services, const std::function<void(wire::Hello::Builder)>& fill = {});
  // The acceptor of the standby link, while it is open.
  std::optional<Rank> standby() const;
  bool is_standby(const transport::Link* link) const { return link && standby_.link.get() == link; }
  // Closes the standby link, if any, saying `why`.
  void close_standby(std::string_view why);
  // The standby link closed at the other end (or failed): forgotten. Returns its acceptor.
  Rank forget_standby();
  // The standby link, taken for an adoption request to `candidate`: null unless it is
  // open, to `candidate`, and its handshake done.
  std::shared_ptr<transport::Link> take_standby(Rank candidate);

  // ---- a front-end's re-attach ----
  // The link to the acceptor until the topology has arrived, and the continuation.
  struct Reattaching {
    std::shared_ptr<transport::Link> link;
    Rank acceptor = 0;
    std::function<void(Result<void>)> done;
  };
  Reattaching reattaching;

  // The node leaves the tree or is destroyed: the standby link and a re-attach's link
  // are detached (closed without their handlers).
  void detach();

 private:
  struct Standby {
    std::shared_ptr<transport::Link> link;
    Rank acceptor = 0;
  };
  Standby standby_;
  // What news() and held() are made with.
  boost::asio::io_context& io_;
  const NodeIdentity& self_;
  ChildTable& children_;
  ServiceContext& node_;
  std::function<void(const OrphanRequest&)> adopt_;
  std::unique_ptr<TreeNews> news_;
  std::unique_ptr<HeldAdoptions> held_;
};

}  // namespace canopy::core
