#include "core/held_output.h"

#include <capnp/serialize.h>

namespace canopy::core {

bool HeldOutput::hold(capnp::MessageBuilder& message) {
  auto words = capnp::messageToFlatArray(message);
  const std::size_t size = words.size() * sizeof(capnp::word);
  if (bytes_ + size > max_bytes_) return false;
  bytes_ += size;
  messages_.push_back(std::move(words));
  return true;
}

void HeldOutput::send_all(transport::Link& link) {
  for (auto& words : messages_) {
    capnp::FlatArrayMessageReader reader(words.asPtr());
    capnp::MallocMessageBuilder copy;
    copy.setRoot(reader.getRoot<capnp::AnyPointer>());
    link.send(copy);
  }
  messages_.clear();
  bytes_ = 0;
}

}  // namespace canopy::core
