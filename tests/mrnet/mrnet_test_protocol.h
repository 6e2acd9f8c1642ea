// The protocol of the MRNet-style test programs (tests/mrnet): a front-end and
// back-ends written the way MRNet tools are, against MRNet's API only.
#pragma once

#include "mrnet/Types.h"

enum TestTag {
  TAG_SUM = FirstApplicationTag,  // "%d": each back-end answers "%d" value + its rank
  TAG_ECHO,                       // any format: each back-end sends the same values back
  TAG_WHO,                        // "": each back-end answers "%ud %s" its rank and argv[1]
  TAG_EXIT,                       // "": each back-end answers "%d" 0 and waits for the shut-down
  TAG_WAVES,                      // "%d %d": each back-end sends N waves of "%d" value*i
  TAG_TOPOLOGY,                   // "%ud" a rank: each back-end answers "%ud %ud %ud %ud %ud" from its
                                  // get_NetworkTopology(): its rank, the nodes, the back-ends, its
                                  // parent's rank and whether the rank asked about has failed
  TAG_SPIN,                       // "": each back-end answers "%d" 0, then sits in
                                  // while (!stream->is_Closed()) sleep(1), as MRNet's
                                  // IntegerAddition_BE_async does, and ends "ok" when it sees
                                  // the network closed
};

// Every directive MRNet has, in one format, as the echo tests send it.
#define EVERY_DIRECTIVE "%c %uc %hd %uhd %d %ud %ld %uld %f %lf %s %ac %auc %ahd %auhd %ad %aud %ald %auld %af %alf %as"
