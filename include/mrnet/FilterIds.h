// MRNet 5.0.1's filter ids (docs/mrnet.md, decisions 3 and 4): part of Canopy's MRNet
// API layer, written for Canopy. Transformation filters (TFILTER_*) aggregate; the
// synchronisation filters (SFILTER_*) say how a node groups its children's packets.
// Network::load_FilterFunc returns ids from 100 for a tool's own filters.
#pragma once

namespace MRN {

typedef unsigned short FilterId;

const FilterId TFILTER_NULL = 0;          // no aggregation: every packet goes on
const FilterId TFILTER_SUM = 1;           // sum of the first value of each packet
const FilterId TFILTER_AVG = 2;           // average of the first value
const FilterId TFILTER_MAX = 3;
const FilterId TFILTER_MIN = 4;
const FilterId TFILTER_ARRAY_CONCAT = 5;  // one array of the waves' arrays, in order
const FilterId TFILTER_INT_EQ_CLASS = 8;  // equivalence classes: "%aud %aud %aud"
const FilterId TFILTER_PERFDATA = 9;      // not provided (docs/mrnet.md)

const FilterId SFILTER_DONTWAIT = 50;     // each packet on its own, at once
const FilterId SFILTER_WAITFORALL = 51;   // one packet from every child per wave
const FilterId SFILTER_TIMEOUT = 52;      // a wave closes a time-out after its first packet

}  // namespace MRN
