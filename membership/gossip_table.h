// The heartbeat table's compact encoding (proto/gossip.capnp, Table.entries).
//
// A table is the list of (rank, heartbeat) a member knows, ranks ascending. Plain, it
// costs 12 bytes a member (a UInt32 and a UInt64 list), which at n = 1024 makes a
// 12 KB message every T_gossip per member and tens of MB/s through the front-end
// (docs/benchmarks.md). Encoded here, each entry is two LEB128 varints:
//   - the rank's difference from the previous entry's (the first from 0): 1 byte
//     while ranks are dense;
//   - the heartbeat's difference from the previous entry's, zigzag-coded (the first
//     from 0): members' counters advance together, one per T_gossip from start-ups a
//     few seconds apart, so neighbours differ by tens: 1 byte, the first 2-3.
// About 2-3 bytes a member. Each table stands alone (no reference to an earlier one),
// so a lost or reordered table costs nothing but its round. A heartbeat of another
// epoch (epoch << 40 | counter) costs 6-7 bytes for its entry and the next.
//
// Tables come from the network: decode_table never trusts a length and refuses
// truncated or over-long varints, ranks past UInt32 and ranks not ascending.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "canopy/result.h"
#include "canopy/topology.h"

namespace canopy::membership {

struct TableEntry {
  Rank rank;
  std::uint64_t beat;
  bool operator==(const TableEntry&) const = default;
};

// `entries` must have ranks strictly ascending.
std::vector<std::uint8_t> encode_table(std::span<const TableEntry> entries);

Result<std::vector<TableEntry>> decode_table(std::span<const std::uint8_t> bytes);

}  // namespace canopy::membership
