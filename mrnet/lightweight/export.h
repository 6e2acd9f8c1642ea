// The lightweight library exports its C API and nothing else: it is built with
// hidden visibility, and each API function's definition is marked with this.
#pragma once

#define CANOPY_MRNET_LW_EXPORT __attribute__((visibility("default")))
