//===- Inspect.cpp - the launch plan of a compiled function ---------------===//

#include "fusion/tooling/Inspect.h"

#include "fusion/contract/Contract.h"

#include "fusion/tooling/StepInputs.h"

namespace fusion::tooling {

using namespace fusion::runtime;

void printPlan(std::ostream &os, const Model &model, const Capacity &cap,
               int64_t numSplits) {
  LaunchPlan plan(model, cap);
  Symbols s = cap.symbols(numSplits);
  auto printLaunch = [&](const LaunchGeometry &l) {
    auto g = l.gridFor(s);
    os << "grid [" << g[0] << ", " << g[1] << ", " << g[2] << "] = ["
       << l.grid[0].str() << ", " << l.grid[1].str() << ", " << l.grid[2].str()
       << "], block [" << l.block[0] << ", " << l.block[1] << ", " << l.block[2]
       << "]";
    if (l.dynamicSharedBytes > 0)
      os << ", " << l.dynamicSharedBytes << " bytes dynamic shared memory";
  };
  os << "  kernels (launch order; grids at batch " << s.batch << "):\n";
  for (const ManifestKernel *k : model.kernels()) {
    os << "    " << k->label() << ": ";
    printLaunch(*k);
    os << ", " << k->params.size() << " params";
    if (!k->ops.empty()) {
      os << ", ops";
      for (const ManifestOp &op : k->ops)
        os << " " << op.name;
    }
    os << "\n";
    // Batch variants; a step of batch >= min_batch launches one instead.
    for (size_t v = 0; v < k->variants.size(); ++v) {
      os << "      variant for batch >= " << k->variants[v].minBatch << ": "
         << k->variants[v].entry << ", ";
      printLaunch(k->variants[v]);
      if (k->variantFor(s.batch) == static_cast<int>(v))
        os << " (launched at batch " << s.batch << ")";
      os << "\n";
    }
  }
  os << "  arguments (bytes at capacity):\n";
  for (const ManifestArgument &a : model.arguments())
    os << "    " << a.name << " " << elemTypeName(a.dtype)
       << shapeString(a.shape) << " role " << model.argumentRole(a.index)
       << ": " << plan.argumentBytes(a.index) << "\n";
  os << "  runtime buffers (bytes at capacity):\n";
  for (size_t i = 0; i < model.internalBuffers().size(); ++i) {
    const InternalBuffer &b = model.internalBuffers()[i];
    const int bi = static_cast<int>(i);
    os << "    " << b.label << " " << elemTypeName(b.dtype)
       << shapeString(b.shape) << (b.zeroInit ? " zero-init" : "") << ": "
       << plan.internalBytes(bi);
    if (b.kind == ParamKind::Workspace)
      os << " at +" << plan.workspaceOffset(bi) << " of the "
         << (b.zeroInit ? "zero-init" : "scratch") << " arena";
    os << "\n";
  }
  if (!model.tensorMaps().empty())
    os << "  tensor maps (" << contract::kTensorMapBytes
       << " bytes each, one table):\n";
  for (size_t i = 0; i < model.tensorMaps().size(); ++i) {
    const TensorMapSlot &t = model.tensorMaps()[i];
    os << "    " << t.label << ": " << elemTypeName(t.dtype)
       << shapeString(t.shape);
    if (t.shape[0].isSymbol())
      os << " = [" << plan.tensorMapRows(static_cast<int>(i)) << ", "
         << t.cols() << "]";
    os << " in boxes [" << t.spec.boxRows << ", " << t.spec.boxCols << "], "
       << t.spec.swizzleBytes << "-byte swizzle, at +"
       << i * contract::kTensorMapBytes << "\n";
  }
  os << "  workspace arenas (shared by the kernels): scratch "
     << plan.arenaBytes(WorkspaceArena::Scratch) << ", zero-init "
     << plan.arenaBytes(WorkspaceArena::ZeroInit)
     << " bytes; runtime buffers in all: " << plan.runtimeBufferBytes()
     << " bytes\n";
  os << "inspect: the PTX matches the manifest\n";
}

void inspectFunction(std::ostream &os, const Options &o, const Model &model,
                     const std::string &why) {
  os << "fusion-run: " << o.ptx << " + " << o.manifest << ", function "
     << model.function().name << " (" << model.kernels().size()
     << " kernels): not a single decode "
     << "layer front half (" << why << ")\n";
  int64_t P = 16;
  int kc = model.argumentWithRole(contract::role::kKeyCache);
  if (kc >= 0 && model.arguments()[kc].shape.size() > 1 &&
      !model.arguments()[kc].shape[1].isSymbol())
    P = model.arguments()[kc].shape[1].value;
  CachePool pool = poolPages(o.kvLens, o.steps, o.numPages, P);
  int64_t numSplits =
      o.numSplits ? o.numSplits : model.defaultNumSplits(o.batch, pool.maxLen);
  printPlan(os, model, Capacity{o.batch, pool.maxPages, pool.numPages},
            numSplits);
}

} // namespace fusion::tooling
