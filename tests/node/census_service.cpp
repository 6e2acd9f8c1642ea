#include "census_service.h"

#include <capnp/message.h>

#include "census.capnp.h"
#include "core/service.h"

namespace canopy::testing {

namespace wire = canopy::testing::census;

CensusService::CensusService(core::ServiceContext& node, std::optional<CensusOptions> options)
    : node_(node), given_(std::move(options)) {}

core::ServiceId CensusService::id() const { return wire::SERVICE_ID; }

std::string CensusService::plan_options() const {
  if (!given_) return {};
  capnp::MallocMessageBuilder message;
  auto o = message.initRoot<wire::Options>();
  o.setLabel(given_->label);
  o.setCountCommnodes(given_->count_commnodes);
  return core::options_bytes(message);
}

CensusOptions CensusService::options() const {
  if (given_) return *given_;
  const auto& all = node_.plan().service_options;
  auto it = all.find(id());
  CensusOptions options;
  if (it == all.end()) return options;
  core::read_options_bytes(it->second, [&](capnp::MessageReader& message) {
    auto o = message.getRoot<wire::Options>();
    options = {o.getLabel(), o.getCountCommnodes()};
  });
  return options;
}

void CensusService::ask() { on_ask(round_ + 1); }

void CensusService::on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) {
  switch (static_cast<wire::Kind>(kind)) {
    case wire::Kind::ASK:
      if (from.kind == core::Peer::Kind::parent) on_ask(body.getAs<wire::Ask>().getRound());
      return;
    case wire::Kind::COUNT:
      if (from.kind == core::Peer::Kind::child) {
        auto c = body.getAs<wire::Count>();
        on_count(from.child, c.getRound(), c.getProcesses());
      }
      return;
  }
}

void CensusService::on_ask(std::uint32_t round) {
  round_ = round;
  counts_.clear();
  answered_ = false;
  core::Outgoing message(node_.identity(), id(), wire::Kind::ASK);
  message.init<wire::Ask>().setRound(round);
  for (std::size_t i = 0; i < node_.children().size(); ++i) {
    if (node_.children()[i].link) node_.send_to_child(i, message);
  }
  answer_if_complete();
}

void CensusService::on_count(std::size_t child, std::uint32_t round, std::uint32_t processes) {
  if (round != round_ || answered_) return;
  counts_[child] = processes;
  answer_if_complete();
}

void CensusService::answer_if_complete() {
  std::size_t connected = 0;
  for (const auto& child : node_.children()) connected += child.link ? 1 : 0;
  if (counts_.size() < connected) return;
  answered_ = true;
  const Role role = node_.identity().role;
  std::uint32_t total = (role != Role::commnode || options().count_commnodes) ? 1 : 0;
  for (const auto& [child, count] : counts_) total += count;
  if (node_.is_root()) {
    Event event;
    event.kind = Event::Kind::service;
    event.service = std::string(name());
    event.detail = options().label + ": round " + std::to_string(round_) + ": " + std::to_string(total) + " processes";
    node_.publish(std::move(event));
    return;
  }
  core::Outgoing message(node_.identity(), id(), wire::Kind::COUNT);
  auto c = message.init<wire::Count>();
  c.setRound(round_);
  c.setProcesses(total);
  node_.send_up(message);
}

}  // namespace canopy::testing
