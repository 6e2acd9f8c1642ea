// StreamSpec: a stream as every node holds it, and as StreamCreate carries it
// (services/streams.h runs the streams).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "canopy/packet.h"
#include "canopy/stream.h"
#include "core/rank_set.h"
#include "canopy/result.h"
#include "services/down_log.h"
#include "streams.capnp.h"

namespace canopy::services {

// A stream as the nodes know it: its id and its options, the communicator as
// ranges of ranks. What every node reads is held in place; the rest, which most
// streams leave at its default (filter parameters, per-node and downstream filters,
// plugins), is made by the first of it that is set (`set_extra`): about 280 bytes
// less for each stream at every process (docs/scale.md).
struct StreamSpec {
  StreamId id = 0;
  SyncMode sync = SyncMode::wait_for_all;
  bool joiners = false;     // StreamOptions::joiners
  bool fold_state = false;  // StreamOptions::fold_state
  // time_out mode: how long a node waits for the rest of a wave after its first packet.
  std::chrono::milliseconds sync_timeout{100};
  // The communicator, in place of StreamOptions::backends: a stream over every
  // back-end is one range at every process, whatever their number (docs/scale.md,
  // "Streams").
  core::RankSet backends;
  std::string upstream_filter = "sum";

  struct Extra {
    Packet upstream_params;                         // StreamOptions::upstream_params
    std::map<Rank, NodeFilter> upstream_filter_at;  // StreamOptions::upstream_filter_at
    std::string downstream_filter;                  // "" = packets go down unchanged
    Packet downstream_params;
    // The plugin back-ends load the upstream filter from: set by the root for a
    // state-recoverable filter from a plugin, "" otherwise.
    std::string upstream_plugin;
    // The same for each back-end named in upstream_filter_at whose filter is a plugin's.
    std::map<Rank, std::string> upstream_plugin_at;
  };

  StreamSpec() = default;
  // The options of a stream the front-end makes, its back-ends aside (the caller
  // sets `backends`).
  explicit StreamSpec(const StreamOptions& options);

  // The rest: its defaults if none was set.
  const Extra& extra() const;
  // The rest, to set some of it: made if it was not.
  Extra& set_extra();

  // The upstream filter node `rank` runs, and the parameters it is made with.
  const std::string& upstream_filter_of(Rank rank) const {
    if (!extra_.held) return upstream_filter;
    auto it = extra_.held->upstream_filter_at.find(rank);
    return it == extra_.held->upstream_filter_at.end() ? upstream_filter : it->second.filter;
  }
  const Packet& upstream_params_of(Rank rank) const {
    const Extra& e = extra();
    auto it = e.upstream_filter_at.find(rank);
    return it == e.upstream_filter_at.end() ? e.upstream_params : it->second.params;
  }

 private:
  // The rest, copied with the spec: a spec copies as a value.
  struct CopiedExtra {
    std::unique_ptr<Extra> held;
    CopiedExtra() = default;
    CopiedExtra(const CopiedExtra& other) : held(other.held ? std::make_unique<Extra>(*other.held) : nullptr) {}
    CopiedExtra& operator=(const CopiedExtra& other) {
      if (this != &other) held = other.held ? std::make_unique<Extra>(*other.held) : nullptr;
      return *this;
    }
    CopiedExtra(CopiedExtra&&) noexcept = default;
    CopiedExtra& operator=(CopiedExtra&&) noexcept = default;
  };
  CopiedExtra extra_;
};

// Reads the sync "filter" parameter: one positive integer, the time-out in ms.
Result<std::chrono::milliseconds> sync_timeout_param(const Packet& params);

// The stream as StreamCreate carries it, with the last broadcast before it reached
// the receiver and the wave it starts at.
void write_spec(wire::streams::StreamCreate::Builder c, const StreamSpec& spec, DownSeq down_seq,
                std::uint64_t next_wave);
// None if its communicator is not ascending, disjoint ranges of at most 2^24 ranks.
std::optional<StreamSpec> read_spec(wire::streams::StreamCreate::Reader c);

}  // namespace canopy::services
