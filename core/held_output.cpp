#include "core/held_output.h"

#include <capnp/serialize.h>

#include "core/service.h"

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
  // Each copy's first segment is this one (a builder leaves it zeroed), not 8 KiB
  // calloc'd per message: an adopted orphan sends all of this before its loop runs
  // again, and a flood held back for a second is tens of thousands of messages.
  ScratchSegment scratch;
  for (auto& words : messages_) {
    capnp::FlatArrayMessageReader reader(words.asPtr());
    capnp::MallocMessageBuilder copy(scratch.words());
    copy.setRoot(reader.getRoot<capnp::AnyPointer>());
    link.send(copy);
  }
  messages_.clear();
  bytes_ = 0;
}

}  // namespace canopy::core
