// The back-end API, for tool daemons started by a Canopy parent.
//
//   auto be = canopy::Backend::connect();          // reads what the parent set
//   if (!be) { std::cerr << be.error() << "\n"; return 1; }
//   while (true) {
//     auto in = (*be)->receive(std::chrono::seconds(60));
//     if (!in) break;                               // network shut down
//     if (!*in) continue;                           // timed out
//     (*be)->send((*in)->stream, canopy::Packet{0, {std::int32_t((*be)->rank())}});
//   }
//
// Every method is thread-safe. The back-end's event loop has a thread of its own,
// and runs on the caller's thread while it waits in receive() (and a send() made
// while nothing else is being written goes out on the caller's thread): a round
// trip wakes no second thread (docs/architecture.md, "Threads").
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "canopy/event.h"
#include "canopy/fault_tolerance.h"
#include "canopy/packet.h"
#include "canopy/result.h"
#include "canopy/topology.h"
#include "canopy/view.h"

namespace canopy {

class Backend {
 public:
  // Optional low-latency path: called for every packet that arrives, on the thread
  // that runs the event loop (its own, or one waiting in receive()), before the
  // packet is queued for receive(); returns true if it has dealt with the packet
  // (which is then not queued). It must not block; it may call backend.send(),
  // which then goes out at once without a thread switch.
  using Handler = std::function<bool(Backend& backend, const Received& packet)>;

  // Connects to the parent named in the environment a Canopy parent sets
  // (CANOPY_PARENT, CANOPY_RANK, CANOPY_NETWORK_ID). Fails with an explanation when
  // they are missing or the parent cannot be reached. `handler`, if given, is in
  // place before the first packet can arrive.
  static Result<std::unique_ptr<Backend>> connect(Handler handler = {});

  // Attach mode: connects back-end `rank` to the parent that the attach file written
  // by the front-end (LaunchOptions::attach_file) assigns to it. The whole file is
  // checked first (docs/attach.md). Fails with an explanation if the file is
  // unreadable or malformed anywhere (file:line: no header, a bad line, a duplicate
  // rank), the rank is not a back-end of the tree, or the parent cannot be reached.
  // A process started again under the rank of a back-end that died rejoins the view
  // and its streams (docs/membership.md); attached before the view without the dead
  // one is out, it is refused, and receive() fails saying so: attach again.
  // Open attach (LaunchOptions::open_attach; docs/attach.md): a rank the file does
  // not name joins the tree under commnode `under`, which must be one of the file's
  // `commnode` lines (as an MRNet back-end attaches to the parent it is given), or,
  // without one, under the (rank mod their number)-th of them. The front-end refuses
  // a rank the tree has already, and receive() then fails saying so. `under` is
  // ignored for a rank the file names.
  static Result<std::unique_ptr<Backend>> attach(const std::string& attach_file, Rank rank,
                                                 Handler handler = {}, std::optional<Rank> under = std::nullopt);
  ~Backend();

  Rank rank() const;

  // The next packet sent down to this back-end, waiting at most `timeout`: nothing
  // if the time ran out; an error once the network has shut down or the parent is
  // gone (then the program should exit).
  Result<std::optional<Received>> receive(std::chrono::milliseconds timeout);
  // What has already arrived, if anything, without running the network (no system
  // call): to take the rest of a batch after a receive() without polling for more.
  Result<std::optional<Received>> try_receive();

  // Sends a packet up a stream. Waits while the way up is full: more than 16 MiB
  // queued towards the parent, or 1 MiB of packets handed over and not yet queued
  // (the tree is slower than this sender; docs/protocol.md, "Resource bounds").
  // From a handler on the network's thread it never waits. An error if the network
  // stopped meanwhile.
  Result<void> send(StreamId stream, const Packet& packet);
  // The same, taking the packet: when it must wait for the network's thread it is
  // queued without a copy.
  Result<void> send(StreamId stream, Packet&& packet);

  // Sends a packet to another back-end, through the tree: up to the nearest common
  // ancestor, then down. It arrives at `backend`'s receive() with stream `stream`
  // (any number; 0 if it belongs to no stream) and source() = this back-end's rank.
  // Delivery is asynchronous; an unknown rank is reported to the front-end. Waits
  // as send() does while the way up is full.
  Result<void> send_to(Rank backend, StreamId stream, const Packet& packet);

  // Readable while receive() would return at once.
  int event_fd() const;

  // The next event of the tree as this back-end heard of it, waiting at most
  // `timeout`: every failure (a process of the tree declared lost) and every
  // adoption (an orphan, this back-end included, taken in by a new parent) that
  // reached it, after its own parent failed its own recovery (whom it asked, how
  // long it took, which streams may lack data), and every membership view it
  // applied (Event::Kind::view: who left, who joined; docs/membership.md). The
  // front-end hears of the same changes (Network::next_event); here a tool or MPI
  // runtime can react on the spot. Events arrive in the order this back-end applied
  // them.
  std::optional<Event> next_event(std::chrono::milliseconds timeout);
  // Readable while next_event() would return at once.
  int events_fd() const;

  // The membership view this back-end holds: the live back-ends, as of which view.
  // A back-end declared failed while it was alive (it hung) is told so by the next
  // view and stops: receive() then fails.
  View view() const;

  // The live tree as this back-end knows it, in the front-end's form
  // (Network::status()): the processes of its part of the tree (its ancestors and
  // their children, docs/scale.md; the whole tree with
  // LaunchOptions::whole_tree_at_backends) with their current parent and children,
  // kept current by the failure and adoption reports about them, but for the failures
  // of other back-ends, which go to the front-end only (view() says who left); empty
  // until the back-end has the tree.
  std::vector<NodeStatus> status() const;

  // The gossip failure detector's settings this back-end runs with (docs/gossip.md;
  // the front-end's, from the launch plan; schedule off: no gossip). Its
  // confirmations arrive as Event::Kind::gossip events.
  GossipOptions gossip() const;

 private:
  struct Impl;
  explicit Backend(std::unique_ptr<Impl> impl);
  // `secret` is the network's (its 32 bytes); `parent` is "address:port";
  // `parent_link` the striped link's description (CANOPY_PARENT_LINK), null for a
  // plain link.
  static Result<std::unique_ptr<Backend>> start(Rank rank, std::uint64_t network_id, const std::string& secret,
                                                const std::string& parent, const char* parent_link,
                                                Handler handler);
  std::unique_ptr<Impl> impl_;
};

}  // namespace canopy
