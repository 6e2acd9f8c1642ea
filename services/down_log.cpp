#include "services/down_log.h"

#include <capnp/serialize.h>

#include <algorithm>

#include "core/codec.h"

namespace canopy::services {

namespace {
// What a kept broadcast costs beside its words: the entry and the order's slot.
constexpr std::size_t kEntryOverhead = sizeof(DownSeq) + sizeof(kj::Array<capnp::word>) + sizeof(StreamId);
}  // namespace

void DownLog::add(StreamId stream, DownSeq seq, wire::DataPacket::Reader packet, std::size_t bound_bytes) {
  Entry entry{seq, core::flat_copy(packet)};
  bytes_ += entry.words.asBytes().size() + kEntryOverhead;
  streams_[stream].push_back(std::move(entry));
  order_.push_back(stream);
  while (bytes_ > bound_bytes && !order_.empty()) drop_oldest();
}

void DownLog::drop_oldest() {
  auto it = streams_.find(order_.front());
  order_.pop_front();
  if (it == streams_.end() || it->second.empty()) return;
  bytes_ -= it->second.front().words.asBytes().size() + kEntryOverhead;
  it->second.pop_front();
  if (it->second.empty()) streams_.erase(it);
}

DownSeq DownLog::lost(StreamId stream, DownSeq after, DownSeq last) const {
  if (last <= after) return 0;
  // An orphan of an earlier generation missed nothing this root can name: what it
  // missed was lost with the root before it.
  after = std::max(after, down_start(down_generation(last)));
  DownSeq first_kept = last + 1;
  if (auto it = streams_.find(stream); it != streams_.end()) {
    for (const Entry& e : it->second) {
      if (e.seq > after) {
        first_kept = e.seq;
        break;
      }
    }
  }
  return first_kept > after + 1 ? first_kept - 1 : 0;
}

void DownLog::replay(StreamId stream, DownSeq after,
                     const std::function<void(DownSeq, wire::DataPacket::Reader)>& each) const {
  auto it = streams_.find(stream);
  if (it == streams_.end()) return;
  for (const Entry& e : it->second) {
    if (e.seq <= after) continue;
    capnp::FlatArrayMessageReader reader(e.words.asPtr());
    each(e.seq, reader.getRoot<wire::DataPacket>());
  }
}

}  // namespace canopy::services
