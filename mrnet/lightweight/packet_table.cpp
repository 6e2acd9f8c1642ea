#include "mrnet/lightweight/packet_table.h"

#include <utility>
#include <vector>

namespace MRN::lightweight {

PacketTable& PacketTable::instance() {
  static PacketTable table;
  return table;
}

void PacketTable::fill(Packet_t* target, MRN::PacketPtr packet, const Network_t* filled_by) {
  auto values = std::make_unique<PacketValues>(PacketValues{std::move(packet), filled_by});
  const MRN::Packet& p = *values->packet;
  target->stream_id = p.get_StreamId();
  target->tag = p.get_Tag();
  target->src_rank = p.get_SourceRank();
  target->fmt_str = const_cast<char*>(p.get_FormatString());
  target->data = values.get();
  {
    std::lock_guard lock(mutex_);
    values_[target].swap(values);
  }
  // `values` holds what `target` held before, freed here, outside the lock.
}

void PacketTable::release(const Packet_t* target) {
  std::unique_ptr<PacketValues> values;
  {
    std::lock_guard lock(mutex_);
    auto it = values_.find(target);
    if (it == values_.end()) return;
    values = std::move(it->second);
    values_.erase(it);
  }
}

void PacketTable::release_all(const Network_t* network) {
  std::vector<std::unique_ptr<PacketValues>> released;
  {
    std::lock_guard lock(mutex_);
    for (auto it = values_.begin(); it != values_.end();) {
      if (it->second->filled_by == network) {
        released.push_back(std::move(it->second));
        it = values_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

}  // namespace MRN::lightweight
