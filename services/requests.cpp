#include "services/requests.h"

#include <algorithm>

#include "core/codec.h"
#include "core/log.h"
#include "transport/traffic.h"
#include "streams.capnp.h"

namespace canopy::services {

std::vector<core::ServiceId> RequestService::runs_after() const { return {wire::streams::SERVICE_ID}; }

using core::log;
using Kind = wire::requests::Kind;

namespace {

// A subtree's traffic, as a traffic request's acknowledgement carries it.
TreeTraffic read_traffic(wire::requests::Traffic::Reader t) {
  return {.processes = t.getProcesses(),
          .total = {t.getBytesSent(), t.getMessagesSent(), t.getBytesReceived(), t.getMessagesReceived()},
          .most_bytes_sent = t.getMostBytesSent(),
          .most_bytes_received = t.getMostBytesReceived()};
}

void write_traffic(const TreeTraffic& traffic, wire::requests::Traffic::Builder t) {
  t.setProcesses(traffic.processes);
  t.setBytesSent(traffic.total.bytes_sent);
  t.setMessagesSent(traffic.total.messages_sent);
  t.setBytesReceived(traffic.total.bytes_received);
  t.setMessagesReceived(traffic.total.messages_received);
  t.setMostBytesSent(traffic.most_bytes_sent);
  t.setMostBytesReceived(traffic.most_bytes_received);
}

void add_traffic(TreeTraffic& sums, const TreeTraffic& more) {
  sums.processes += more.processes;
  sums.total.bytes_sent += more.total.bytes_sent;
  sums.total.messages_sent += more.total.messages_sent;
  sums.total.bytes_received += more.total.bytes_received;
  sums.total.messages_received += more.total.messages_received;
  sums.most_bytes_sent = std::max(sums.most_bytes_sent, more.most_bytes_sent);
  sums.most_bytes_received = std::max(sums.most_bytes_received, more.most_bytes_received);
}

}  // namespace

RequestService::RequestService(core::ServiceContext& node, filters::FilterRegistry& filters, StreamService& streams,
                               Observer* observer)
    : node_(node), filters_(filters), streams_(streams), observer_(observer) {}

void RequestService::on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) {
  const bool from_child = from.kind == core::Peer::Kind::child;
  switch (static_cast<Kind>(kind)) {
    case Kind::LOAD_FILTER: {
      auto l = body.getAs<wire::requests::LoadFilter>();
      if (!from_child) load_filter(l.getRequestId(), l.getPath(), l.getName());
      return;
    }
    case Kind::SET_PARAMS: {
      if (from_child) return;
      auto p = body.getAs<wire::requests::SetParams>();
      FilterSlot slot = FilterSlot::upstream;
      switch (p.getSlot()) {
        case wire::requests::FilterSlot::UPSTREAM: slot = FilterSlot::upstream; break;
        case wire::requests::FilterSlot::SYNC: slot = FilterSlot::sync; break;
        case wire::requests::FilterSlot::DOWNSTREAM: slot = FilterSlot::downstream; break;
      }
      return set_params(p.getRequestId(), p.getStreamId(), slot, core::decode_values(p.getParams()));
    }
    case Kind::SET_HEALING: {
      auto h = body.getAs<wire::requests::SetHealing>();
      if (!from_child) set_healing(h.getRequestId(), h.getOn());
      return;
    }
    case Kind::TRAFFIC: {
      if (!from_child) traffic(body.getAs<wire::requests::TrafficRequest>().getRequestId());
      return;
    }
    case Kind::ACK: {
      auto a = body.getAs<wire::requests::RequestAck>();
      core::Failures failures;
      failures.merge(a.getFailures());
      std::optional<TreeTraffic> sums;
      if (a.hasTraffic()) sums = read_traffic(a.getTraffic());
      if (from_child) acked(a.getRequestId(), from.child, failures, sums);
      return;
    }
  }
  log().warn("ignoring request message of unknown kind {}", kind);
}

void RequestService::on_event(const core::NodeEvent& event) {
  auto* lost = std::get_if<core::events::ChildLost>(&event);
  if (!lost) return;
  if (!requests_) return;
  std::vector<std::uint64_t> pending;
  for (const auto& [id, request] : *requests_) pending.push_back(id);
  core::Failures lost_child;
  lost_child.add(lost->rank, "lost");
  for (auto id : pending) acked(id, lost->child, lost_child);
}

core::Failures RequestService::own_failure(const std::string& message) const {
  core::Failures failures;
  if (!message.empty()) failures.add(node_.identity().rank, message);
  return failures;
}

void RequestService::load_filter(std::uint64_t request, const std::string& path, const std::string& name) {
  std::string error;
  if (auto r = filters_.load(path, name); !r) {
    error = r.error();
    log().error("load filter {} from {}: {}", name, path, r.error());
  } else {
    log().info("loaded filter {} from {}", name, path);
  }
  // Commnodes only: back-ends run no filter but a state-recoverable upstream one,
  // whose plugin a stream that needs it names (StreamService::create_stream).
  std::vector<std::size_t> targets;
  const auto& children = node_.children();
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (children[i].link && children[i].role == Role::commnode) targets.push_back(i);
  }
  core::Outgoing message(node_.identity(), id(), Kind::LOAD_FILTER);
  auto l = message.init<wire::requests::LoadFilter>();
  l.setRequestId(request);
  l.setPath(path);
  l.setName(name);
  start(request, std::move(targets), own_failure(error), message);
}

void RequestService::set_params(std::uint64_t request, StreamId stream, FilterSlot slot, const Packet& params) {
  if (!streams_.has_stream(stream)) {
    report_ack(request, own_failure("no stream " + std::to_string(stream)));
    return;
  }
  auto applied = streams_.set_params(stream, slot, params);
  std::string error = applied ? "" : applied.error();
  core::Outgoing message(node_.identity(), id(), Kind::SET_PARAMS);
  auto p = message.init<wire::requests::SetParams>();
  p.setRequestId(request);
  p.setStreamId(stream);
  p.setSlot(slot == FilterSlot::upstream ? wire::requests::FilterSlot::UPSTREAM
            : slot == FilterSlot::sync   ? wire::requests::FilterSlot::SYNC
                                         : wire::requests::FilterSlot::DOWNSTREAM);
  core::encode_values(params.values(), p.initParams(params.size()));
  start(request, streams_.children_with_filters(stream), own_failure(error), message);
}

void RequestService::set_healing(std::uint64_t request, bool on) {
  node_.set_healing(on);
  // Every child, back-ends too: an orphaned back-end stops at once rather than be
  // refused by each adopter in turn.
  std::vector<std::size_t> targets;
  const auto& children = node_.children();
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (children[i].link) targets.push_back(i);
  }
  core::Outgoing message(node_.identity(), id(), Kind::SET_HEALING);
  auto h = message.init<wire::requests::SetHealing>();
  h.setRequestId(request);
  h.setOn(on);
  start(request, std::move(targets), {}, message);
}

void RequestService::traffic(std::uint64_t request) {
  std::vector<std::size_t> targets;
  const auto& children = node_.children();
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (children[i].link) targets.push_back(i);
  }
  core::Outgoing message(node_.identity(), id(), Kind::TRAFFIC);
  message.init<wire::requests::TrafficRequest>().setRequestId(request);
  for (std::size_t i : targets) node_.send_to_child(i, message);
  // Counted after the request went down (each child counts it received) and before
  // the answer goes up (the parent counts it before it comes): in a quiet tree what
  // was sent and what was received agree.
  const Traffic own = transport::process_traffic().now();
  TreeTraffic sums{.processes = 1, .total = own, .most_bytes_sent = own.bytes_sent,
                   .most_bytes_received = own.bytes_received};
  if (targets.empty()) return report_ack(request, {}, sums);
  requests()[request] = Request{std::move(targets), {}, sums};
}

void RequestService::start(std::uint64_t request, std::vector<std::size_t> children, core::Failures failures,
                           core::Outgoing& message, std::optional<TreeTraffic> traffic) {
  if (children.empty()) {
    report_ack(request, failures, traffic);
    return;
  }
  for (std::size_t i : children) node_.send_to_child(i, message);
  requests()[request] = Request{std::move(children), std::move(failures), traffic};
}

std::map<std::uint64_t, RequestService::Request>& RequestService::requests() {
  if (!requests_) requests_ = std::make_unique<std::map<std::uint64_t, Request>>();
  return *requests_;
}

void RequestService::acked(std::uint64_t request, std::size_t child, const core::Failures& failures,
                           const std::optional<TreeTraffic>& traffic) {
  if (!requests_) return;
  auto it = requests_->find(request);
  if (it == requests_->end()) return;
  auto& awaiting = it->second.awaiting;
  auto pos = std::find(awaiting.begin(), awaiting.end(), child);
  if (pos == awaiting.end()) return;
  awaiting.erase(pos);
  // Alike failures merge (bounded however many nodes fail: core/failures.h).
  it->second.failures.merge(failures);
  if (auto& sums = it->second.traffic; sums && traffic) add_traffic(*sums, *traffic);
  if (!awaiting.empty()) return;
  core::Failures all = std::move(it->second.failures);
  auto sums = it->second.traffic;
  requests_->erase(it);
  report_ack(request, all, sums);
}

void RequestService::report_ack(std::uint64_t request, const core::Failures& failures,
                                const std::optional<TreeTraffic>& traffic) {
  if (node_.is_root()) {
    if (observer_ && traffic) observer_->on_traffic(request, *traffic);
    if (observer_) observer_->on_request_ack(request, failures.describe(node_.topology() ? &*node_.topology() : nullptr));
    return;
  }
  core::Outgoing message(node_.identity(), id(), Kind::ACK);
  auto a = message.init<wire::requests::RequestAck>();
  a.setRequestId(request);
  failures.write(a.initFailures(static_cast<unsigned>(failures.size())));
  if (traffic) write_traffic(*traffic, a.initTraffic());
  node_.send_up(message);
}

}  // namespace canopy::services
