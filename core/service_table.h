// ServiceTable: the services registered on one node, found by id, in the order
// their events run.
//
// Events reach the services in registration order, except that a service runs
// after every registered service it names in Service::runs_after(): an order one
// service relies on is declared by it, not implied by who registered first
// (the streams close a wave without a lost child only after detection and
// membership reported the loss up, whatever order a runtime adds them in).
// A circle of such declarations is refused when its last service is added.
// All on the node's io_context thread.
#pragma once

#include <vector>

#include "canopy/result.h"
#include "core/service.h"

namespace canopy::core {

class ServiceTable {
 public:
  // Registers `service` (borrowed). Refused, with the reason, if its id is taken or
  // its runs_after() closes a circle.
  Result<void> add(Service& service);
  // A walk over the few registered services: a table indexed by id held one
  // pointer per id up to the largest, 112 bytes at every back-end (docs/scale.md).
  Service* find(ServiceId id) const {
    for (Service* service : order_) {
      if (service->id() == id) return service;
    }
    return nullptr;
  }
  // In the order events run.
  const std::vector<Service*>& in_order() const { return order_; }
  void emit(const NodeEvent& event) const {
    for (Service* service : order_) service->on_event(event);
  }

 private:
  // One list, in the order events run: a table that also kept the registration
  // order held a second one, 80 bytes at every process (docs/scale.md). Each service
  // added is sorted in from the end, so that where nothing is declared the order is
  // still that of registration.
  std::vector<Service*> order_;
};

}  // namespace canopy::core
