// Who owns the values of the lightweight API's packets (include/mrnet_lightweight/
// Packet.h). A tool receives into a Packet_t it allocated itself, often with
// malloc and without initialising it, and may free() it without telling the
// layer; the Packet_t's own fields therefore cannot say whether they hold values
// to free. The layer keeps them by the Packet_t's address instead: receiving into
// the same address again frees the previous values, and so do delete_Packet_t() and
// delete_Network_t() (for what that network filled).
//
// The table is one per process, not per Network_t: a Packet_t may be deleted
// after the network that filled it, and only a table that outlives networks can
// then tell that its values are already gone.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>

#include "mrnet/Packet.h"
#include "mrnet_lightweight/Network.h"
#include "mrnet_lightweight/Packet.h"

namespace MRN::lightweight {

// What Packet_t::data points to.
struct PacketValues {
  MRN::PacketPtr packet;
  const Network_t* filled_by = nullptr;  // null for a packet of new_Packet_t_2()
};

class PacketTable {
 public:
  static PacketTable& instance();

  // Gives `target` the values of `packet` and fills its fields (stream id, tag,
  // source, format), freeing the values it held before, if any.
  void fill(Packet_t* target, MRN::PacketPtr packet, const Network_t* filled_by);
  // Frees the values `target` holds, if it holds any.
  void release(const Packet_t* target);
  // Frees every value `network` filled (delete_Network_t()).
  void release_all(const Network_t* network);

 private:
  std::mutex mutex_;
  std::unordered_map<const Packet_t*, std::unique_ptr<PacketValues>> values_;
};

// The values of `packet`, or null if it has none.
inline const MRN::PacketPtr* values_of(const Packet_t* packet) {
  if (!packet || !packet->data) return nullptr;
  return &static_cast<const PacketValues*>(packet->data)->packet;
}

}  // namespace MRN::lightweight
