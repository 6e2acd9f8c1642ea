// How fast a striped link sends, without I/O: each path's share of the window of
// unacknowledged bytes, and the round-trip estimate behind the retransmission
// time-out (docs/striping.md, "Striping" and "Resending").
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "transport/backoff.h"
#include "transport/stripe_send.h"

namespace canopy::transport {

// The bytes a path may have unacknowledged:
//   max(2 · max_fragment_bytes, W · max(r_p / Σr, 1 / (4n)))
// with W = `window` (max_unacked_bytes), n = `live_paths`, r_p = `rate` (the path's
// smoothed throughput) and Σr = `total_rate` (over the live paths). Shares are equal
// (1/n) while the path or the total has no measurement yet (0); a single live path
// (or none) gets all of W.
std::uint64_t path_budget(double rate, double total_rate, std::size_t live_paths, std::uint64_t window,
                          std::uint64_t max_fragment_bytes);

// The smoothed round trip (SRTT) and its variation (RTTVAR), as RFC 6298 measures
// them, from acknowledged fragments.
class RoundTripEstimator {
 public:
  using Clock = SendWindow::Clock;

  // Fragment `f` was acknowledged at `now` (SendWindow::acknowledge's callback).
  // Karn's rule: only a fragment acknowledged after its one and only transmission,
  // whose write had completed, gives a sample — for a resent one, which copy the
  // acknowledgement answers is unknown. Returns whether it took a sample.
  bool on_acknowledged(const SendWindow::Fragment& f, Clock::time_point now);

  // One round-trip measurement: the first sets SRTT = R and RTTVAR = R/2; later ones
  // RTTVAR = ¾ RTTVAR + ¼ |SRTT − R|, then SRTT = ⅞ SRTT + ⅛ R.
  void sample(Clock::duration round_trip);

  std::optional<double> srtt_seconds() const { return srtt_; }
  double rttvar_seconds() const { return rttvar_; }

  // `configured` with its initial delay raised to SRTT + 4·RTTVAR (rounded up to the
  // millisecond) when that is longer, never beyond `configured.max`: the configured
  // initial time-out is a floor.
  Backoff retransmit(Backoff configured) const;

 private:
  std::optional<double> srtt_;  // seconds
  double rttvar_ = 0;
};

}  // namespace canopy::transport
