/* MRNet's filter identifiers (lightweight C API). A lightweight back-end runs no
 * filter itself: the upstream filters of its streams run in Canopy's commnodes. */
#ifndef CANOPY_MRNET_LIGHTWEIGHT_FILTERIDS_H
#define CANOPY_MRNET_LIGHTWEIGHT_FILTERIDS_H

typedef unsigned short FilterId;

#endif
