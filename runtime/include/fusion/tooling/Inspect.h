//===- Inspect.h - the launch plan of a compiled function -------*- C++ -*-===//
//
// fusion-run --inspect: the kernels (grids, blocks, batch variants), the
// arguments and the runtime's buffers of a model at a capacity, with no GPU.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_TOOLING_INSPECT_H
#define FUSION_TOOLING_INSPECT_H

#include "fusion/runtime/Model.h"
#include "fusion/tooling/Options.h"

#include <cstdint>
#include <ostream>

namespace fusion::tooling {

/// Prints the launch plan of `model` at `cap` (grids at `numSplits` and the
/// capacity's batch; bytes at capacity) to `os`, then "inspect: the PTX
/// matches the manifest".
void printPlan(std::ostream &os, const runtime::Model &model,
               const runtime::Capacity &cap, int64_t numSplits);

/// --inspect of a function that is not a layer front half (`why`): a line
/// saying so, then its plan at the shape `o` asks for (pages of the key
/// cache's page size, or 16 when it is symbolic).
void inspectFunction(std::ostream &os, const Options &o,
                     const runtime::Model &model, const std::string &why);

} // namespace fusion::tooling

#endif // FUSION_TOOLING_INSPECT_H
