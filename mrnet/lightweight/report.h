// The lightweight layer's own messages: MRNet prints its errors on stderr at output
// level 1 and above (its default), and so does the layer.
#pragma once

#include <string>

namespace MRN::lightweight {

// Network_set_OutputLevel(): clamped to 0..5.
void set_output_level(int level);

// Prints "mrnet_lightweight: WHAT" on stderr at output level 1 and above.
void report(const std::string& what);

}  // namespace MRN::lightweight
