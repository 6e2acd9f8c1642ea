// RequestService: requests from the front-end that every node of a subtree carries
// out and acknowledges: loading a filter plugin, new filter parameters for a
// stream, and healing switched on or off. A node acknowledges up once its own part is done and every child it sent
// the request to has acknowledged (or was lost), with every failure and its node.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "canopy/traffic.h"
#include "core/failures.h"
#include "core/service_context.h"
#include "filters/filter.h"
#include "requests.capnp.h"
#include "services/streams.h"

namespace canopy::services {

class RequestService final : public core::Service {
 public:
  class Observer {
   public:
    virtual ~Observer() = default;
    // Root only: request `request` is done everywhere; `error` is "" or every failure,
    // failures alike grouped (core/failures.h).
    virtual void on_request_ack(std::uint64_t request, const std::string& error) {}
    // Root only, before on_request_ack of a traffic request: what the processes that
    // answered sent and received.
    virtual void on_traffic(std::uint64_t request, const TreeTraffic& traffic) {}
  };

  // Everything is borrowed; `observer` may be null.
  RequestService(core::ServiceContext& node, filters::FilterRegistry& filters, StreamService& streams, Observer* observer);

  core::ServiceId id() const override { return wire::requests::SERVICE_ID; }
  std::string_view name() const override { return "requests"; }
  // Requests apply to the streams as the stream service left them after the event.
  std::vector<core::ServiceId> runs_after() const override;
  void on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) override;
  void on_event(const core::NodeEvent& event) override;

  // Root: loads a filter plugin in every node, this one included.
  void load_filter(std::uint64_t request, const std::string& path, const std::string& name);
  // Root: new parameters for one filter of a stream at every node of the stream.
  void set_params(std::uint64_t request, StreamId stream, FilterSlot slot, const Packet& params);
  // Root: healing on or off at every process, this one included (acknowledged once
  // every process has switched).
  void set_healing(std::uint64_t request, bool on);
  // Root: every process's traffic (transport/traffic.h), this one's included,
  // summed up the tree (Observer::on_traffic).
  void traffic(std::uint64_t request);

 private:
  struct Request {
    std::vector<std::size_t> awaiting;  // children yet to ack
    core::Failures failures;            // this node's and its acknowledged subtrees'
    std::optional<TreeTraffic> traffic;  // a traffic request: this node's and its subtrees'
  };
  // Sends `message` (the request) to `children` and waits for their acks; with none,
  // acknowledges at once with this node's `failures`.
  void start(std::uint64_t request, std::vector<std::size_t> children, core::Failures failures,
             core::Outgoing& message, std::optional<TreeTraffic> traffic = std::nullopt);
  void acked(std::uint64_t request, std::size_t child, const core::Failures& failures,
             const std::optional<TreeTraffic>& traffic = std::nullopt);
  void report_ack(std::uint64_t request, const core::Failures& failures,
                  const std::optional<TreeTraffic>& traffic = std::nullopt);
  // This node's own failure: `message` at its rank.
  core::Failures own_failure(const std::string& message) const;

  core::ServiceContext& node_;
  filters::FilterRegistry& filters_;
  StreamService& streams_;
  Observer* observer_;
  // Requests passed down and awaiting their children's acks: made by the first, so
  // never at a back-end (56 bytes there before).
  std::unique_ptr<std::map<std::uint64_t, Request>> requests_;
  std::map<std::uint64_t, Request>& requests();
};

}  // namespace canopy::services
