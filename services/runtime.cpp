#include "services/runtime.h"

namespace canopy::services {

Runtime::Runtime(boost::asio::io_context& io, core::NodeIdentity identity, filters::FilterRegistry& filters,
                 const Observers& observers, Launcher* launcher)
    : node(io, identity, observers.node),
      launch(node, launcher ? *launcher : processes, observers.launch),
      detection(node, observers.detection),
      streams(node, filters, observers.streams),
      requests(node, filters, streams, observers.requests),
      recovery(node, streams, observers.recovery) {
  for (core::Service* service : std::initializer_list<core::Service*>{&launch, &detection, &streams, &requests,
                                                                      &recovery}) {
    (void)node.add_service(*service);  // distinct ids: cannot fail
  }
}

}  // namespace canopy::services
