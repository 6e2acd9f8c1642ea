// CensusService: a service of a tool's own, to show (and test) that one with options,
// messages and a public event needs nothing of the core but its seam
// (core/service.h, core/service_context.h). The root asks every process, down the
// tree; each answers up with how many processes its subtree counts once all its
// children have answered (a reduction, as a TBON does); the root publishes the total
// as an event of kind `service`. Its options (a label; whether commnodes count
// themselves) are given to the root's instance and reach every other process in
// the launch plan, encoded by the service (census.capnp, Options).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/service_context.h"

namespace canopy::testing {

struct CensusOptions {
  std::string label = "census";
  bool count_commnodes = true;
};

class CensusService final : public core::Service {
 public:
  // `options`: the root's (the others read theirs from the launch plan).
  explicit CensusService(core::ServiceContext& node, std::optional<CensusOptions> options = std::nullopt);

  core::ServiceId id() const override;
  std::string_view name() const override { return "census"; }
  std::string plan_options() const override;
  void on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) override;

  // At the root: starts a round.
  void ask();
  // The options this process counts with: the root's own, or the plan's.
  CensusOptions options() const;

 private:
  void on_ask(std::uint32_t round);
  void on_count(std::size_t child, std::uint32_t round, std::uint32_t processes);
  void answer_if_complete();

  core::ServiceContext& node_;
  std::optional<CensusOptions> given_;
  // The round under way here: its number, and each child's count so far.
  std::uint32_t round_ = 0;
  std::map<std::size_t, std::uint32_t> counts_;
  bool answered_ = true;
};

}  // namespace canopy::testing
