// Link: one connection to one peer process, carrying framed Cap'n Proto messages.
//
// A Link is driven by the io_context of its owner's thread and must only be used
// from that thread. The plain implementation is TcpLink; a striped implementation
// over several network paths can stand behind the same interface.
#pragma once

#include <capnp/message.h>
#include <time.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "transport/clock.h"

namespace canopy::transport {

// The longest a link hands its peer's messages to the handler at a stretch before
// the loop does its other work (TcpLink::take_messages).
inline constexpr std::chrono::milliseconds kReadTurn{10};

// The clock a turn is measured by: the kernel's coarse clock, read without the
// hardware counter (a few nanoseconds a message), exact to a tick (1-4 ms).
inline std::chrono::nanoseconds turn_clock() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

class Link;

// What a link hands its peer's messages, and then its close, to (Link::start). The
// node core is one: it tells its links apart by Link::purpose(), and so a link holds
// one pointer where it held two std::function handlers (64 bytes: issue 47, every
// commnode holds a link a child).
class LinkHandler {
 public:
  virtual ~LinkHandler() = default;
  // Once per received message, as Link::MessageHandler.
  virtual void on_link_message(Link& link, capnp::MessageReader& message) = 0;
  // Once when the link is gone, as Link::CloseHandler.
  virtual void on_link_closed(Link& link, std::string_view reason) = 0;
};

class Link {
 public:
  // Called once per received message, on the owner's thread. The link knows framing,
  // not the schema: the owner reads the message with `message.getRoot<T>()` for its
  // own root type T. `message` is valid only during the call. If the handler throws
  // kj::Exception (a malformed message discovered while reading it), the link is
  // closed with "bad frame: <description>". Once the link is no longer open
  // (abort(), detach(), a failure — in the handler too), no further message is
  // handed out; after close(), messages go on arriving until the close completes.
  using MessageHandler = std::function<void(capnp::MessageReader& message)>;
  // Called once when the link is gone: peer closed, I/O error, bad frame, or
  // close() — `reason` says which. No handler is called after it.
  using CloseHandler = std::function<void(std::string_view reason)>;

  virtual ~Link();

  // Starts reading: the peer's messages and then the close go to `handler`, which
  // must outlive the link or detach() it first. `purpose` is the owner's to tell its
  // links apart (purpose()).
  void start(LinkHandler& handler, std::uint8_t purpose = 0);
  // The same with two functions, which the link keeps (for owners with one link or few).
  void start(MessageHandler on_message, CloseHandler on_close);
  std::uint8_t purpose() const { return purpose_; }

  // Queues a message. Messages queued while a write is in flight go out together
  // in one system call. Sending on a closed link is a no-op.
  virtual void send(capnp::MessageBuilder& message) = 0;

  // Closes the connection after flushing what is queued (bounded by the OS), and
  // calls the close handler with `reason`.
  virtual void close(std::string_view reason) = 0;

  // Closes at once and forgets both handlers without calling them; for owners
  // that are going away.
  virtual void detach() = 0;

  // Closes at once, dropping what is queued, and calls the close handler with
  // `reason`; for a peer that is declared lost (it may never read again, so waiting
  // to flush could wait forever).
  virtual void abort(std::string_view reason) { close(reason); }

  // abort(), after handing `last` to the operating system if that can be done at once
  // (nothing is queued or in flight, and the socket takes the whole frame without
  // waiting); otherwise `last` is dropped with the rest. For a last word to a peer
  // that may never read again. The default drops it.
  virtual void abort_with(capnp::MessageBuilder& last, std::string_view reason) {
    (void)last;
    abort(reason);
  }

  virtual bool is_open() const = 0;

  // "127.0.0.1:4242" — for log lines and error messages.
  virtual const std::string& peer() const = 0;

  // ---- back-pressure (docs/protocol.md, "Resource bounds") ----
  // Bytes queued to send, or being written. A link that does not count them (the
  // striped link, whose paths have windows of their own) says 0.
  virtual std::size_t queued_bytes() const { return 0; }
  // `on_change(true)` once the queued bytes pass `high`, `on_change(false)` once they
  // are back at `low` or below; on the owner's thread, from inside send() or when a
  // write completes. Replaces any earlier watermarks.
  void set_watermarks(std::size_t high, std::size_t low, std::function<void(bool above)> on_change) {
    marks_ = std::make_unique<Watermarks>(Watermarks{high, low, std::move(on_change), false});
    check_watermarks();
  }
  bool above_high() const { return marks_ && marks_->above; }
  // Stops reading from the peer (its bytes wait in the kernel, then in its own queue,
  // which holds its sender back), or reads again. While reading is paused the peer
  // counts as heard from: its silence is ours. A link that cannot pause ignores it.
  virtual void pause_reading(bool paused) { (void)paused; }
  bool reading_paused() const { return reading_paused_; }
  // While corked, what is sent is queued and written together when uncorked: one
  // write, and one wake-up of the peer, for a burst that answers one event (an
  // adoption's answer and the live tree; an orphan's state and reports). A send
  // that starts no burst needs none. A link that cannot cork writes at once.
  virtual void cork(bool corked) { (void)corked; }

  // When a message was last queued, and last received, on this link: the event
  // detection service sends heartbeats only on idle links and declares a silent
  // peer suspect, then lost.
  NodeClock::time_point last_sent() const { return last_sent_; }
  NodeClock::time_point last_received() const { return reading_paused_ ? NodeClock::now() : last_received_; }
  // Whether bytes from the peer wait in the kernel, not read yet: it is not silent,
  // this process has not caught up (its loop runs a timer before the read). A link
  // that cannot tell says no.
  virtual bool input_waiting() const { return false; }

  // A number its owner gives it, 0 until then: the node tags a child's link with
  // the child's place in its child table, and finds the child by it on every message
  // (core/connections.h). In the word after reading_paused_: no byte more a link.
  std::uint32_t owner_tag() const { return owner_tag_; }
  void set_owner_tag(std::uint32_t tag) { owner_tag_ = tag; }

 protected:
  void note_sent() { last_sent_ = NodeClock::now(); }
  void note_received() { last_received_ = NodeClock::now(); }
  // Implementations call this whenever their queue has changed.
  void check_watermarks() {
    if (!marks_ || !marks_->on_change) return;
    Watermarks& m = *marks_;
    const std::size_t queued = queued_bytes();
    if (!m.above && queued > m.high) {
      m.above = true;
      m.on_change(true);
    } else if (m.above && queued <= m.low) {
      m.above = false;
      m.on_change(false);
    }
  }
  // Starts reading, once start() has given the handler.
  virtual void begin() = 0;
  bool started() const { return handler_ != nullptr; }
  // Hands a message to the handler (which must have been given).
  void deliver(capnp::MessageReader& message) { handler_->on_link_message(*this, message); }
  // Hands the close to the handler, once; the link may be gone when it returns.
  void deliver_close(std::string_view reason) {
    if (!handler_ || !close_owed_) return;
    close_owed_ = false;
    handler_->on_link_closed(*this, reason);
  }
  // The close is not handed out (detach()), and a close function given to start()
  // goes at once. Messages still are while the link is open, as they were; an owner
  // going away detaches, which closes it.
  void forget_close();
  bool reading_paused_ = false;

 private:
  void take_handler(LinkHandler* handler, bool owned, std::uint8_t purpose);
  // These three and reading_paused_ share the word of owner_tag_.
  bool owns_handler_ = false;  // made by start(functions), deleted with the link
  bool close_owed_ = false;
  std::uint8_t purpose_ = 0;
  std::uint32_t owner_tag_ = 0;
  LinkHandler* handler_ = nullptr;
  // Made by set_watermarks: only a link up, whose queue holds its sender back, has
  // any; a commnode's link to each child holds none (docs/scale.md).
  struct Watermarks {
    std::size_t high = 0;
    std::size_t low = 0;
    std::function<void(bool)> on_change;
    bool above = false;
  };
  std::unique_ptr<Watermarks> marks_;
  NodeClock::time_point last_sent_ = NodeClock::now();
  NodeClock::time_point last_received_ = NodeClock::now();
};

// Corks a link (Link::cork) for as long as it lives.
class Cork {
 public:
  explicit Cork(std::shared_ptr<Link> link) : link_(std::move(link)) {
    if (link_) link_->cork(true);
  }
  ~Cork() {
    if (link_) link_->cork(false);
  }
  Cork(const Cork&) = delete;
  Cork& operator=(const Cork&) = delete;

 private:
  std::shared_ptr<Link> link_;
};

}  // namespace canopy::transport
