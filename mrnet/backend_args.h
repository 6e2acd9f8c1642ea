// (placeholder until the lightweight branch lands; see helper brief)
#pragma once
#include <memory>
#include "canopy/backend.h"
namespace MRN::layer {
canopy::Result<std::unique_ptr<canopy::Backend>> connect_backend(int argc, char** argv,
                                                                 canopy::Backend::Handler handler = {});
}
