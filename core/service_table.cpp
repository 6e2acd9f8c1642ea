#include "core/service_table.h"

#include <algorithm>
#include <string>

namespace canopy::core {

namespace {

// `given` in a stable order in which each service comes after every service of
// `given` it names: each round places the first service of `given`, in its order,
// whose predecessors are all placed. A service named but not in `given` is no
// predecessor. Empty if the names close a circle.
std::vector<Service*> sorted(const std::vector<Service*>& given) {
  std::vector<Service*> order;
  order.reserve(given.size());
  std::vector<bool> placed(given.size(), false);
  auto ready = [&](const Service* s) {
    for (ServiceId before : s->runs_after()) {
      auto b = std::find_if(given.begin(), given.end(), [&](const Service* g) { return g->id() == before; });
      if (b != given.end() && *b != s && !placed[static_cast<std::size_t>(b - given.begin())]) return false;
    }
    return true;
  };
  while (order.size() < given.size()) {
    std::size_t i = 0;
    while (i < given.size() && (placed[i] || !ready(given[i]))) ++i;
    if (i == given.size()) return {};
    placed[i] = true;
    order.push_back(given[i]);
  }
  return order;
}

}  // namespace

Result<void> ServiceTable::add(Service& service) {
  const ServiceId id = service.id();
  if (Service* taken = find(id)) {
    return Error{"service id " + std::to_string(id) + " of '" + std::string(service.name()) +
                 "' is already taken by '" + std::string(taken->name()) + "'"};
  }
  // The table as it is, in order, then the new service: the table's order is kept
  // where the new service changes nothing.
  std::vector<Service*> given;
  given.reserve(order_.size() + 1);
  given = order_;
  given.push_back(&service);
  std::vector<Service*> order = sorted(given);
  if (order.empty()) {
    return Error{"service '" + std::string(service.name()) +
                 "' runs after services that run after it (Service::runs_after() closes a circle)"};
  }
  // A runtime adds its few services once: sized to fit, no room kept for more.
  order_ = std::move(order);
  return {};
}

}  // namespace canopy::core
