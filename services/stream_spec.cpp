#include "services/stream_spec.h"

#include <algorithm>
#include <type_traits>

#include "core/codec.h"
#include "core/rank_set.h"

namespace canopy::services {

namespace {

wire::streams::SyncMode to_wire(SyncMode mode) {
  switch (mode) {
    case SyncMode::wait_for_all: return wire::streams::SyncMode::WAIT_FOR_ALL;
    case SyncMode::dont_wait: return wire::streams::SyncMode::DONT_WAIT;
    case SyncMode::time_out: return wire::streams::SyncMode::TIME_OUT;
  }
  return wire::streams::SyncMode::WAIT_FOR_ALL;
}

SyncMode from_wire(wire::streams::SyncMode mode) {
  switch (mode) {
    case wire::streams::SyncMode::WAIT_FOR_ALL: return SyncMode::wait_for_all;
    case wire::streams::SyncMode::DONT_WAIT: return SyncMode::dont_wait;
    case wire::streams::SyncMode::TIME_OUT: return SyncMode::time_out;
  }
  return SyncMode::wait_for_all;
}

}  // namespace

void write_spec(wire::streams::StreamCreate::Builder c, const StreamSpec& spec, DownSeq down_seq,
                std::uint64_t next_wave) {
  const StreamSpec::Extra& extra = spec.extra();
  c.setStreamId(spec.id);
  c.setDownSeq(down_seq);
  c.setNextWave(next_wave);
  const auto& ranges = spec.backends.ranges();
  core::write_ranges(ranges, c.initBackends(static_cast<unsigned>(2 * ranges.size())));
  c.setUpstreamFilter(spec.upstream_filter);
  c.setSyncMode(to_wire(spec.sync));
  c.setSyncTimeoutMs(static_cast<std::uint32_t>(spec.sync_timeout.count()));
  c.setDownstreamFilter(extra.downstream_filter);
  core::encode_values(extra.upstream_params.values(), c.initUpstreamParams(extra.upstream_params.size()));
  core::encode_values(extra.downstream_params.values(), c.initDownstreamParams(extra.downstream_params.size()));
  c.setUpstreamPlugin(extra.upstream_plugin);
  c.setJoiners(spec.joiners);
  c.setFoldState(spec.fold_state);
  auto at = c.initUpstreamFilterAt(static_cast<unsigned>(extra.upstream_filter_at.size()));
  unsigned i = 0;
  for (const auto& [rank, own] : extra.upstream_filter_at) {
    at[i].setRank(rank);
    at[i].setFilter(own.filter);
    core::encode_values(own.params.values(), at[i].initParams(own.params.size()));
    if (auto p = extra.upstream_plugin_at.find(rank); p != extra.upstream_plugin_at.end()) at[i].setPlugin(p->second);
    ++i;
  }
}

std::optional<StreamSpec> read_spec(wire::streams::StreamCreate::Reader c) {
  StreamSpec spec;
  spec.id = c.getStreamId();
  if (!core::read_ranges(c.getBackends(), spec.backends) || spec.backends.size() > core::kMaxViewZero) return std::nullopt;
  spec.upstream_filter = c.getUpstreamFilter();
  spec.sync = from_wire(c.getSyncMode());
  spec.sync_timeout = std::chrono::milliseconds(std::max<std::uint32_t>(1, c.getSyncTimeoutMs()));
  spec.joiners = c.getJoiners();
  spec.fold_state = c.getFoldState();
  // The rest only if the stream has any of it.
  if (c.getUpstreamParams().size() == 0 && c.getDownstreamFilter().size() == 0 && c.getDownstreamParams().size() == 0 &&
      c.getUpstreamPlugin().size() == 0 && c.getUpstreamFilterAt().size() == 0) {
    return spec;
  }
  StreamSpec::Extra& extra = spec.set_extra();
  extra.upstream_params = core::decode_values(c.getUpstreamParams());
  extra.downstream_filter = c.getDownstreamFilter();
  extra.downstream_params = core::decode_values(c.getDownstreamParams());
  extra.upstream_plugin = c.getUpstreamPlugin();
  for (auto at : c.getUpstreamFilterAt()) {
    extra.upstream_filter_at[at.getRank()] = NodeFilter{at.getFilter(), core::decode_values(at.getParams())};
    if (at.hasPlugin() && at.getPlugin().size() > 0) extra.upstream_plugin_at[at.getRank()] = at.getPlugin();
  }
  return spec;
}

StreamSpec::StreamSpec(const StreamOptions& options)
    : sync(options.sync),
      joiners(options.joiners),
      fold_state(options.fold_state),
      sync_timeout(options.sync_timeout),
      upstream_filter(options.upstream_filter) {
  if (options.upstream_params.size() == 0 && options.upstream_filter_at.empty() && options.downstream_filter.empty() &&
      options.downstream_params.size() == 0) {
    return;
  }
  Extra& extra = set_extra();
  extra.upstream_params = options.upstream_params;
  extra.upstream_filter_at = options.upstream_filter_at;
  extra.downstream_filter = options.downstream_filter;
  extra.downstream_params = options.downstream_params;
}

const StreamSpec::Extra& StreamSpec::extra() const {
  static const Extra none;
  return extra_.held ? *extra_.held : none;
}

StreamSpec::Extra& StreamSpec::set_extra() {
  if (!extra_.held) extra_.held = std::make_unique<Extra>();
  return *extra_.held;
}

Result<std::chrono::milliseconds> sync_timeout_param(const Packet& params) {
  constexpr std::int64_t kMax = 3600 * 1000;
  std::optional<std::int64_t> ms;
  if (params.size() == 1) {
    std::visit(
        [&](const auto& v) {
          using T = std::remove_cvref_t<decltype(v)>;
          if constexpr (std::is_integral_v<T>) {
            if (v > 0 && static_cast<std::uint64_t>(v) <= static_cast<std::uint64_t>(kMax)) ms = v;
          }
        },
        params[0]);
  }
  if (!ms) {
    return Error{"the sync parameter is one integer, the time-out in milliseconds (1 to " + std::to_string(kMax) +
                 "); got \"" + params.format() + "\""};
  }
  return std::chrono::milliseconds(*ms);
}

}  // namespace canopy::services
