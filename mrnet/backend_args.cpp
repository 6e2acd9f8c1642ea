// (temporary, until the lightweight branch lands)
#include "mrnet/backend_args.h"
#include <cstdlib>
#include <string>
namespace MRN::layer {
canopy::Result<std::unique_ptr<canopy::Backend>> connect_backend(int argc, char** argv, canopy::Backend::Handler handler) {
  if (argc < 6 || !argv) return canopy::Error{"expected MRNet's five trailing arguments"};
  if (std::getenv("CANOPY_PARENT")) return canopy::Backend::connect(std::move(handler));
  const char* file = std::getenv("CANOPY_ATTACH");
  if (!file) return canopy::Error{"no CANOPY_ATTACH"};
  return canopy::Backend::attach(file, std::strtoul(argv[argc - 1], nullptr, 10), std::move(handler));
}
}
