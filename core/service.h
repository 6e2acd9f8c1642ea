// Service: the seam between the node core and the protocols that ride on it.
//
// The core (core/node.h) owns links, the hello handshake, the child table, routing,
// the node's phase and the live tree. Everything else is a service: launch, event
// detection, streams, requests, recovery, and whatever a tool adds. A service is
// registered on the node before it starts and then
//   - receives the messages other processes' instances of it sent (its own only:
//     they travel in Message's `service` envelope with its id and a kind,
//     proto/canopy.capnp);
//   - receives the node's events (NodeEvent below) on every process, root and
//     leaves included;
//   - sends up, to a child, down towards a back-end or to all children through the
//     node, reads the live tree, and sets timers on the node's io_context;
//   - may add to the node's hellos and refuse the hellos of others.
// Adding a service touches neither the core nor any message switch
// (docs/architecture.md, "Adding a service").
//
// Everything runs on the node's io_context thread; nothing here is thread-safe.
#pragma once

#include <capnp/any.h>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstring>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "canopy.capnp.h"
#include "canopy/topology.h"
#include "core/auth.h"

namespace canopy::transport {
class Link;
}

namespace canopy::core {

// A service's id on the wire. Ids in use are listed in proto/canopy.capnp
// (Message.service.id); 100 and up are free for tools and tests.
using ServiceId = std::uint16_t;

struct NodeIdentity {
  Rank rank = 0;
  Role role = Role::backend;
  std::uint64_t network_id = 0;
  std::uint32_t incarnation = 0;
  std::uint32_t epoch = 0;  // a back-end's member epoch (membership service)
  Secret secret{};          // the network's secret: every handshake proves it (core/auth.h)
};

// Where an incoming message came from.
struct Peer {
  enum class Kind : std::uint8_t { parent, child };
  Kind kind = Kind::parent;
  std::size_t child = 0;          // kind child: its index in the child table
  Rank sender = 0;                // Message.senderRank
  std::uint32_t incarnation = 0;  // Message.senderIncarnation
  const transport::Link* link = nullptr;
  std::uint32_t epoch = 0;        // Message.senderEpoch
};

// The node's events, delivered to every service in the order they were added.
namespace events {
// The topology has arrived (or, at the root, the node has started listening): the
// child table is built and the launch plan known. A non-empty `error` means the
// node could not start (it cannot listen); it stops next.
struct Started {
  std::string error;
};
// A child said hello and is now connected. `rejoined`: a back-end whose process was
// lost connected again under its rank (a restarted process, paper 000's NODE_ALIVE);
// the live tree took it back as this node's child under a new incarnation.
struct ChildConnected {
  std::size_t child;
  Rank rank;
  bool rejoined = false;  // a restarted process under a rank the tree had
  bool joined = false;    // through an open attach (docs/attach.md)
};
// A child process or its connection is gone (not during a stop). `during_launch`:
// before this node's subtree was up. `reason` says what happened ("back-end 3 on
// h1 exited with status 1").
struct ChildLost {
  std::size_t child;
  Rank rank;
  std::string reason;
  bool during_launch;
};
// An orphan has been adopted as a child of this node.
struct ChildAdopted {
  std::size_t child;
  Rank rank;
};
// This node's parent is lost and healing is on: it is looking for an adopter.
struct Orphaned {
  Rank failed_parent;
  std::string reason;
};
// The front-end (or the process promoted in its place) is lost, the tree is kept
// for FaultToleranceOptions::keep_tree_for, and this node is the heir: it now
// stands in the root's place (paper 004 §IV-C). It holds its output back, as an
// orphan does, adopts the other processes left without the root, and is adopted in
// turn by a front-end that re-attaches (Adopted, with the root as adopter), or stops
// the tree when the grace period ends.
struct Promoted {
  Rank failed_root;
  std::string reason;
};
// This node has been adopted by `adopter` under `incarnation`; its new parent link
// is in place and nothing has been sent on it yet. Services send their channel
// state (state composition) now: it goes out before the output held back while
// orphaned.
struct Adopted {
  Rank adopter;
  std::uint32_t incarnation;
  Rank failed_parent;
};
// The live tree changed: a failure (rank is gone), an adoption (rank, the orphan,
// is now a child of adopter) or a join (rank, a back-end the tree did not have, is
// now a child of adopter: open attach), applied at this process for the first time.
struct TreeChanged {
  enum class Kind : std::uint8_t { failure, adoption, join };
  Kind kind;
  Rank rank;
  Rank adopter;
  std::uint32_t incarnation;
  std::string reason;
};
// The node is stopping (shutdown, lost parent, no adopter): cancel timers.
struct Stopping {
  std::string reason;
};
}  // namespace events

using NodeEvent = std::variant<events::Started, events::ChildConnected, events::ChildLost, events::ChildAdopted,
                               events::Orphaned, events::Promoted, events::Adopted, events::TreeChanged,
                               events::Stopping>;

class Service {
 public:
  virtual ~Service() = default;
  virtual ServiceId id() const = 0;
  // For log lines: "streams", "recovery".
  virtual std::string_view name() const = 0;
  // A message of this service from a peer: `kind` is a value of the enum Kind in the
  // service's schema, `body` the struct the schema gives for it (read it with
  // body.getAs<T>(); null for a kind without one). The reader is valid during the
  // call only. A kj::Exception thrown while reading a malformed body closes that
  // link; an unknown kind is the service's to log and drop.
  virtual void on_message(const Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) {}
  virtual void on_event(const NodeEvent& event) {}
  // The services whose handling of an event this one relies on: where they run
  // too, each event reaches them first (core/service_table.h). Registration order
  // decides the rest.
  virtual std::vector<ServiceId> runs_after() const { return {}; }
  // The handshake: a service may add what it vouches for to this node's hellos
  // (launch and adoption), and refuse a hello another process sent to join or be
  // adopted here, saying why (the core closes that connection and logs the reason).
  virtual void fill_hello(wire::Hello::Builder hello) {}
  virtual std::optional<std::string> refuse_hello(wire::Hello::Reader hello) { return std::nullopt; }
  // At the root, as it starts (the plan it was given is ServiceContext::plan()): this
  // service's options for the whole tree, encoded by the service as it likes; empty:
  // none. The core sends them down in the launch plan without looking inside, and
  // every process's instance reads them back from plan().service_options[id()].
  virtual std::string plan_options() const { return {}; }
};

// A service's options as plan_options() gives them: `message` (a struct of the
// service's schema) serialised flat, as bytes.
inline std::string options_bytes(capnp::MessageBuilder& message) {
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}
// Reads options_bytes() back: calls `read` with the message, or returns false if
// `bytes` are not one (empty, cut short, malformed).
template <typename Read>
bool read_options_bytes(std::string_view bytes, Read&& read) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) return false;
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    capnp::FlatArrayMessageReader message(words);
    read(static_cast<capnp::MessageReader&>(message));
    return true;
  } catch (const kj::Exception&) {
    return false;
  }
}

// The first segment of an outgoing message's builder, from a small pool
// (ScratchPool). A builder of its own callocs 8 KB for each message, and glibc gives
// the pages back and faults them in again: with small packets streamed, page faults,
// memset and malloc were a fifth of a back-end's time. The builder zeroes the words it
// used when it is destroyed, as capnp requires of a first segment given to it, so a
// segment goes back to the pool ready for the next message.
//
// A pool's segments are 256 bytes at first: most of a back-end's messages fit (a
// heartbeat, an acknowledgement, a wave of a few values). A message that did not (the
// rest went on in segments its builder allocated) makes the pool's next segments as
// large as it was, up to 8 KiB (capnp's default first segment), and kShrinkAfter
// messages in a row that would fit half of one halve them again: a process that
// streams 1 KiB packets keeps 2 KiB segments, a quiet back-end 256 bytes, and a
// commnode that sent its children their parts of the tree at launch goes back down.
// Until stop 71 every segment was 8 KiB, and every process kept one at least once it
// had sent anything: 8 KiB of a back-end's 14; 1 KiB until stop 73
// (docs/scale.md, "The message segments a process keeps").
class ScratchSegment {
 public:
  static constexpr std::size_t kMinWords = 32;    // 256 bytes
  static constexpr std::size_t kMaxWords = 1024;  // 8 KiB
  ScratchSegment();
  ~ScratchSegment();
  ScratchSegment(const ScratchSegment&) = delete;
  ScratchSegment& operator=(const ScratchSegment&) = delete;
  kj::ArrayPtr<capnp::word> words() { return {words_, size_}; }
  // The message built in it took `total` words in all (MessageBuilder::sizeInWords()):
  // the pool sizes its next segments by it.
  void used(std::size_t total);

 private:
  capnp::word* words_;
  std::size_t size_;  // words
};

// The free first segments kept for the next messages (all zero, all of segment_words()).
// Messages alive at once are few (one being built, perhaps one being forwarded);
// beyond kKept, a segment given back is freed, as is one of another size than the
// pool's now. Each thread has its own pool, which a process's messages use;
// canopy-sim, which runs every simulated process on one thread, gives each its own
// (Use), so that each holds what a real process would (docs/simulation.md, "State
// bytes").
class ScratchPool {
 public:
  static constexpr std::size_t kKept = 8;
  ScratchPool() = default;
  ~ScratchPool();
  ScratchPool(const ScratchPool&) = delete;
  ScratchPool& operator=(const ScratchPool&) = delete;
  // Segments kept, free.
  std::size_t kept() const { return count_; }
  // The size of the segments it gives, in words: from ScratchSegment::kMinWords to
  // kMaxWords, as its messages need (ScratchSegment).
  std::size_t segment_words() const { return words_; }
  static constexpr std::size_t kShrinkAfter = 64;
  // The process is quiet (its part folds: core/folded_part.h): this thread's pool
  // goes back to the smallest segments, as kShrinkAfter small messages would have
  // made it. A commnode that sent its children their parts at launch sends few
  // messages after, and kept 1 KiB segments for ever until stop 84.
  static void shrink_current();

  // Makes `pool` this thread's pool for as long as it lives, then the one before.
  class Use {
   public:
    explicit Use(ScratchPool& pool);
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    ScratchPool* before_;
  };

 private:
  friend class ScratchSegment;
  // This thread's pool: the one a Use made it, or its own; null once its own is
  // destroyed (at the thread's exit), when segments come from and go to the heap.
  static ScratchPool* current();
  // A message built in one of its segments took `total` words.
  void took(std::size_t total);
  // Its segments from now on hold `words`; those kept go.
  void resize(std::size_t words);
  capnp::word* free_[kKept];
  std::size_t count_ = 0;
  std::size_t words_ = ScratchSegment::kMinWords;
  std::size_t small_in_a_row_ = 0;  // messages that would have fit half a segment
};

// One outgoing protocol message, stamped with the sender's identity.
class Message {
 public:
  explicit Message(const NodeIdentity& sender) : builder_(scratch_.words()), root_(builder_.initRoot<wire::Message>()) {
    root_.setSenderRank(sender.rank);
    root_.setSenderIncarnation(sender.incarnation);
    if (sender.epoch != 0) {
      root_.setSenderEpoch(static_cast<std::uint16_t>(std::min<std::uint32_t>(sender.epoch, 0xffff)));
    }
  }
  // Tells its segment how much the message took: its pool's next ones hold as much.
  ~Message() { scratch_.used(builder_.sizeInWords()); }
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;
  wire::Message::Body::Builder body() { return root_.getBody(); }
  capnp::MessageBuilder& builder() { return builder_; }

 private:
  ScratchSegment scratch_;  // before builder_: outlives it, which zeroes it
  capnp::MallocMessageBuilder builder_;
  wire::Message::Builder root_;
};

// One outgoing message of a service, of one of its kinds: init<T>() gives the body
// to fill in (none for a kind that carries nothing).
class Outgoing : public Message {
 public:
  template <typename Kind>
  Outgoing(const NodeIdentity& sender, ServiceId service, Kind kind) : Message(sender) {
    auto envelope = body().initService();
    envelope.setId(service);
    envelope.setKind(static_cast<std::uint16_t>(kind));
    payload_ = envelope.getBody();
  }
  template <typename T>
  typename T::Builder init() {
    return payload_.initAs<T>();
  }
  // Copies a body (forwarding what was received, or a value such as Text).
  template <typename T>
  void set(typename T::Reader body) {
    payload_.setAs<T>(body);
  }

 private:
  capnp::AnyPointer::Builder payload_{nullptr};
};

}  // namespace canopy::core
