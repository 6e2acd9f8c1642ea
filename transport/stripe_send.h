// The sending half of a striped link, without I/O.
//
// SendStream (send_stream.h) holds the outgoing byte stream. SendWindow tracks the fragments cut from it that are not yet acknowledged: on which path each
// went last, when it must be sent again, and which wait for a path to resend them.
// Not thread-safe; the link's io_context thread owns both.
#pragma once

#include <capnp/message.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "transport/backoff.h"
#include "transport/send_stream.h"
#include "transport/seq_tracking.h"

namespace canopy::transport {

class SendWindow {
 public:
  using Clock = std::chrono::steady_clock;
  enum class State : std::uint8_t {
    writing,  // handed to a path's socket, the write not yet complete
    sent,     // written; retransmitted if not acknowledged by `deadline`
    queued,   // waiting for a path to send it again
    held,     // the receiver has it (received, above its in-order point): never resent
  };
  struct Fragment {
    std::uint64_t seq = 0;
    std::uint32_t length = 0;
    std::uint32_t checksum = 0;       // of the payload, computed once when cut
    std::uint32_t path = 0;           // of the latest transmission
    std::uint32_t transmissions = 0;
    State state = State::writing;
    bool rejected = false;            // a negative acknowledgement came while it was being written
    Clock::time_point sent_at{};                // when its latest write completed
    std::optional<Clock::time_point> deadline;  // sent: when it counts as lost
    std::uint64_t end() const { return seq + length; }
  };

  explicit SendWindow(std::size_t path_count);

  // A new fragment, right after the previous one, being written on `path`.
  void add(std::uint64_t seq, std::uint32_t length, std::uint32_t checksum, std::uint32_t path);
  // One past the last byte cut into a fragment.
  std::uint64_t cut_end() const { return cut_end_; }

  // The write of fragment `seq` on `path` completed at `now`. It counts as lost
  // `retransmit->delay(transmissions)` later (never if `retransmit` is null:
  // reliability off). Ignored unless the fragment is still being written on `path`.
  // The caller adapts retransmit->initial to the measured round trip.
  void written(std::uint64_t seq, std::uint32_t path, Clock::time_point now, const Backoff* retransmit);

  bool has_resend() const { return !resend_.empty(); }
  // The lowest-numbered fragment waiting to be resent, now being written on `path`;
  // null if there is none. Valid until the next call that frees fragments.
  const Fragment* take_resend(std::uint32_t path);

  // An acknowledgement: fragments below `lids` are freed; those below `lirs` or
  // inside a `received` range are held. `acked` is called once per fragment, the
  // first time an acknowledgement covers it (before its state changes).
  void acknowledge(std::uint64_t lirs, std::uint64_t lids, std::span<const SeqRange> received,
                   const std::function<void(const Fragment&)>& acked);
  // A negative acknowledgement: the fragments overlapping `range` go back to the
  // resend queue — those being written as soon as their write completes (a large
  // write is still going out when the receiver finds the first corrupt fragment in
  // it). Returns how many.
  std::size_t reject(SeqRange range);
  // `path` failed: its fragments being written or sent go back to the resend queue.
  // Returns how many.
  std::size_t path_failed(std::uint32_t path);
  // `path` turned suspect (a fragment timed out on it): its fragments still being
  // written go back to the resend queue. Their write may never complete — the socket
  // of a dead NIC stops taking bytes — and until it does they have no deadline. If it
  // completes after all, that is ignored for them, as after a failure. Returns how many.
  std::size_t path_suspect(std::uint32_t path);
  // Sent fragments whose deadline has passed go back to the resend queue;
  // `expired` is called for each before. Returns how many.
  std::size_t expire(Clock::time_point now, const std::function<void(const Fragment&)>& expired);
  std::optional<Clock::time_point> next_deadline() const;

  std::uint64_t acked() const { return acked_; }
  std::uint64_t unacked_bytes() const { return cut_end_ - acked_; }
  std::uint64_t in_flight(std::uint32_t path) const { return in_flight_[path]; }
  std::size_t fragments() const { return fragments_.size(); }
  const Fragment* find(std::uint64_t seq) const;

 private:
  Fragment* lookup(std::uint64_t seq);
  void leave(Fragment& f, State next);  // state change with in-flight accounting

  std::deque<Fragment> fragments_;  // unacknowledged, in sequence order, contiguous
  std::set<std::uint64_t> resend_;  // seq of the queued ones
  std::vector<std::uint64_t> in_flight_;  // bytes writing or sent, per path
  std::uint64_t acked_ = 0;
  std::uint64_t cut_end_ = 0;
};

}  // namespace canopy::transport
