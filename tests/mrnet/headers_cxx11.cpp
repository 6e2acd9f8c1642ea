// MRNet tools are often built as C++11: every header of the MRNet layer must compile
// so (tests/mrnet/CMakeLists.txt builds this file with CXX_STANDARD 11; a header
// that needs more breaks the build).
#include "mrnet/MRNet.h"
#include "xplat/Monitor.h"
#include "xplat/Mutex.h"
#include "xplat/NetUtils.h"
#include "xplat/Thread.h"

#if __cplusplus != 201103L
#error "this file must be compiled as C++11"
#endif

int mrnet_headers_compile_as_cxx11() {
  MRN::PacketPtr packet(new MRN::Packet(0, FirstApplicationTag, "%d", 1));
  int value = 0;
  return packet->unpack("%d", &value);
}
