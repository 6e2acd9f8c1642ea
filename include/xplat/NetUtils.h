// XPlat::NetUtils: the part of MRNet 5.0.1's network helpers its tools call
// (docs/mrnet.md): the local host's name.
#pragma once

#include <string>

namespace XPlat {

class NetUtils {
 public:
  // 0 and the name (gethostname), or -1.
  static int GetLocalHostName(std::string& name);
};

}  // namespace XPlat
