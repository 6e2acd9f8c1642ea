#include "core/service_table.h"

#include <algorithm>
#include <string>

namespace canopy::core {

Result<void> ServiceTable::add(Service& service) {
  const ServiceId id = service.id();
  if (Service* taken = find(id)) {
    return Error{"service id " + std::to_string(id) + " of '" + std::string(service.name()) +
                 "' is already taken by '" + std::string(taken->name()) + "'"};
  }
  added_.push_back(&service);
  if (sort()) {
    // A runtime adds its few services once: no room kept for more (16 bytes a process).
    added_.shrink_to_fit();
    order_.shrink_to_fit();
    return {};
  }
  added_.pop_back();
  sort();
  return Error{"service '" + std::string(service.name()) +
               "' runs after services that run after it (Service::runs_after() closes a circle)"};
}

// Stable: each round places the first service, in registration order, whose
// predecessors are all placed. A service named but not registered is no
// predecessor.
bool ServiceTable::sort() {
  std::vector<Service*> order;
  std::vector<bool> placed(added_.size(), false);
  auto ready = [&](const Service* s) {
    for (ServiceId before : s->runs_after()) {
      const Service* b = find(before);
      if (b && b != s && std::find(order.begin(), order.end(), b) == order.end()) return false;
    }
    return true;
  };
  while (order.size() < added_.size()) {
    std::size_t i = 0;
    while (i < added_.size() && (placed[i] || !ready(added_[i]))) ++i;
    if (i == added_.size()) return false;
    placed[i] = true;
    order.push_back(added_[i]);
  }
  order_ = std::move(order);
  return true;
}

}  // namespace canopy::core
