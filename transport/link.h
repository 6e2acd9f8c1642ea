// Link: one connection to one peer process, carrying framed Cap'n Proto messages.
//
// A Link is driven by the io_context of its owner's thread and must only be used
// from that thread. The plain implementation is TcpLink; a striped implementation
// over several network paths can stand behind the same interface.
#pragma once

#include <capnp/message.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "transport/clock.h"

namespace canopy::transport {

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

  virtual ~Link() = default;

  virtual void start(MessageHandler on_message, CloseHandler on_close) = 0;

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

  // When a message was last queued, and last received, on this link: the event
  // detection service sends heartbeats only on idle links and declares a silent
  // peer suspect, then lost.
  NodeClock::time_point last_sent() const { return last_sent_; }
  NodeClock::time_point last_received() const { return last_received_; }

 protected:
  void note_sent() { last_sent_ = NodeClock::now(); }
  void note_received() { last_received_ = NodeClock::now(); }

 private:
  NodeClock::time_point last_sent_ = NodeClock::now();
  NodeClock::time_point last_received_ = NodeClock::now();
};

}  // namespace canopy::transport
