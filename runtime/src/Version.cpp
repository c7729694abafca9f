//===- Version.cpp - the runtime library's version ------------------------===//

#include "fusion/runtime/Version.h"

namespace fusion::runtime {

const char *version() { return FUSION_RUNTIME_VERSION; }

} // namespace fusion::runtime
