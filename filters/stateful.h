// The built-in stateful filters. Both are idempotent as well as associative and
// commutative, and both have extract_state, so they are state recoverable: after a
// failure an orphan sends its state to its new parent, which filters it as ordinary
// input (paper 004, section IV-C), and no information is lost or counted twice.
//
// Both emit exactly one packet per wave, even when it carries nothing new: a parent
// in wait-for-all mode waits for one packet per child per wave.
//
// incremental_union: integer set union that emits only what is new.
//   Input: packets of one or more values, each an integer or an integer array
//   (%d %ld %ud %uld or %ad %ald %aud %auld); scalars and arrays of the same element
//   type may be mixed at a position. The number of values and each position's
//   element type are fixed by the first packet the instance sees; a packet with no
//   values at all is an empty contribution (what extract_state gives before any
//   input) and is accepted anywhere.
//   Output: per position, the sorted array of the integers this instance had not
//   seen before (possibly empty); tag of the wave's first packet, contributors the
//   sum of the inputs'.
//   State: every integer seen, per position; extract_state gives it as a packet
//   of the output's format (sorted arrays, contributors 0, the last tag seen).
//
// prefix_tree: call-path prefix trees merged as STAT does (include/canopy/call_tree.h
//   documents the encoding "%aud %as %aud %aud").
//   Input: call trees. Output: the complete merged tree every wave (complete
//   updates: simplest for state composition, and a front-end that misses a packet
//   loses nothing); tag of the wave's first packet, contributors the sum.
//   State: the merged tree; extract_state gives it in the same encoding.
#pragma once

#include "canopy/filter.h"

namespace canopy::filters {

const canopy_filter_descriptor* incremental_union_descriptor();
const canopy_filter_descriptor* prefix_tree_descriptor();

}  // namespace canopy::filters
