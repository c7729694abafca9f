//===- FusionModule.cpp - the `fusion._fusion` Python extension -----------===//
//
// nanobind bindings of the C++ runtime (runtime/): no second implementation
// of manifest parsing, variant choice, the num_splits policy, checkpoint
// loading or the KV-cache bookkeeping in Python. What is bound:
//  * the runtime's exceptions, as Python exceptions under fusion.Error
//    (itself a RuntimeError);
//  * Model: one function of a manifest (fusion-compile's .manifest.json),
//    inspected on any machine;
//  * device_name: the GPU the driver reports (DeviceUnavailableError
//    without one);
//  * Engine: a whole model compiled from `fusion-import --whole-model`, its
//    weights and paged KV caches on a GPU (Engine.h), with step, prefill and
//    score. The GIL is released while the GPU works.
//  * Function: one compiled function loaded on a GPU and launched on the
//    caller's tensors and stream (DecodeStep::runOnTensors); the PyTorch op
//    of python/fusion/ops.py is built on it.
// python/fusion/__init__.py re-exports these and adds `generate`.
//
//===----------------------------------------------------------------------===//

#include "fusion/contract/Contract.h"
#include "fusion/runtime/Checkpoint.h"
#include "fusion/runtime/Cuda.h"
#include "fusion/runtime/DType.h"
#include "fusion/runtime/DecodeStep.h"
#include "fusion/runtime/Engine.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/File.h"
#include "fusion/runtime/Model.h"
#include "fusion/runtime/ModelArguments.h"
#include "fusion/tooling/Weights.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <optional>

namespace nb = nanobind;
using namespace nb::literals;
using namespace fusion::runtime;

namespace {

/// Ownership of a std::vector handed to numpy without a copy.
template <typename T>
nb::ndarray<nb::numpy, T> toNumpy(std::vector<T> values,
                                  std::initializer_list<size_t> shape) {
  auto *owned = new std::vector<T>(std::move(values));
  nb::capsule owner(
      owned, [](void *p) noexcept { delete static_cast<std::vector<T> *>(p); });
  return nb::ndarray<nb::numpy, T>(owned->data(), shape, owner);
}

nb::list shapeList(const std::vector<Dim> &shape) {
  nb::list dims;
  for (const Dim &d : shape)
    if (d.isSymbol())
      dims.append(d.symbol);
    else
      dims.append(d.value);
  return dims;
}

/// {role, dtype, shape} of one argument or result.
nb::dict tensorDict(const std::string &role, ElemType dtype,
                    const std::vector<Dim> &shape) {
  nb::dict d;
  d["role"] = role;
  d["dtype"] = std::string(elemTypeName(dtype));
  d["shape"] = shapeList(shape);
  return d;
}

nb::list argumentsOf(const Model &model) {
  nb::list out;
  for (const ManifestArgument &a : model.arguments()) {
    nb::dict d = tensorDict(model.argumentRole(a.index), a.dtype, a.shape);
    d["name"] = a.name;
    d["kind"] = a.kind;
    out.append(d);
  }
  return out;
}

nb::list resultsOf(const Model &model) {
  nb::list out;
  for (size_t r = 0; r < model.results().size(); ++r)
    out.append(tensorDict(model.resultRole(static_cast<int>(r)),
                          model.results()[r].dtype, model.results()[r].shape));
  return out;
}

nb::list kernelsOf(const Model &model) {
  nb::list out;
  for (const ManifestKernel *k : model.kernels()) {
    nb::list variants;
    for (const ManifestVariant &v : k->variants) {
      nb::dict variant;
      variant["min_batch"] = v.minBatch;
      variant["entry"] = v.entry;
      variants.append(variant);
    }
    nb::dict d;
    d["name"] = k->name;
    d["entry"] = k->entry;
    d["variants"] = variants;
    out.append(d);
  }
  return out;
}

/// What the runtime launches for the kernel with entry `entry` at a step of
/// these sizes (ManifestKernel::launchFor: the batch variant; its grid
/// evaluated), as a dict: entry, variant (-1: the primary launch), grid,
/// block, dynamic_shared_bytes, static_shared_bytes and cluster_x
/// (ManifestKernel::clusterXFor; 1: no cluster).
nb::dict launchOf(const Model &model, const std::string &entry, int64_t batch,
                  int64_t maxPages, int64_t numSplits) {
  if (batch < 1 || maxPages < 1 || numSplits < 1)
    throwInvalidArgument("Model.launch: batch, max_pages and num_splits must "
                         "be >= 1, got ",
                         batch, ", ", maxPages, ", ", numSplits);
  for (const ManifestKernel *k : model.kernels()) {
    if (k->entry != entry)
      continue;
    const LaunchGeometry &g = k->launchFor(batch);
    const std::array<int64_t, 3> grid =
        g.gridFor(Symbols{batch, numSplits, maxPages, 1});
    nb::dict d;
    d["entry"] = g.entry;
    d["variant"] = k->variantFor(batch);
    d["grid"] = nb::make_tuple(grid[0], grid[1], grid[2]);
    d["block"] = nb::make_tuple(g.block[0], g.block[1], g.block[2]);
    d["dynamic_shared_bytes"] = g.dynamicSharedBytes;
    d["static_shared_bytes"] = g.staticSharedBytes;
    d["cluster_x"] = k->clusterXFor(batch, numSplits);
    return d;
  }
  throwInvalidArgument("function \"", model.function().name,
                       "\" launches no kernel with entry \"", entry, "\"");
}

/// The decode-layer front half `model` computes (FrontHalfSignature::
/// fromModel, which throws InvalidArgumentError naming what is missing when
/// it is not one): hidden, num_heads, num_kv_heads, head_dim, page_size,
/// and, when the manifest lists the ops, norm ("rmsnorm" or "layernorm"),
/// eps and rope_theta.
nb::dict frontHalfOf(const Model &model) {
  const FrontHalfSignature sig = FrontHalfSignature::fromModel(model);
  nb::dict d;
  d["hidden"] = sig.hidden;
  d["num_heads"] = sig.dims.numQHeads;
  d["num_kv_heads"] = sig.dims.numKVHeads;
  d["head_dim"] = sig.dims.headDim;
  d["page_size"] = sig.pageSize;
  if (sig.reference) {
    d["norm"] =
        sig.reference->norm == ref::NormKind::RMSNorm ? "rmsnorm" : "layernorm";
    d["eps"] = sig.reference->normOptions.eps;
    d["rope_theta"] = sig.reference->rope.theta;
  }
  return d;
}

/// An Engine with the CUDA context it runs in (declared first: destroyed
/// after the engine; on the heap, so that it never moves under it).
struct PyEngine {
  std::unique_ptr<cuda::Context> context;
  std::unique_ptr<Engine> engine;

  /// `model`: the compiled model's path prefix (<model>.manifest.json and
  /// <model>.ptx); `checkpoint`: the Hugging Face directory (config.json and
  /// safetensors), or with `randomWeights` only its config.json;
  /// `maxStepRows` as EngineCapacity::maxStepRows (0: the default);
  /// `graph` and `clusters` as EngineOptions::graph and launchClusters.
  PyEngine(const std::string &model, const std::string &checkpoint,
           int64_t maxBatch, int64_t maxTokensPerSeq,
           const std::string &function, int device, bool graph,
           std::optional<uint64_t> randomWeights, int64_t maxStepRows,
           bool clusters) {
    Model m = Model::load(model + ".manifest.json", function);
    const std::string ptxName = model + ".ptx";
    std::string ptx = readPtx(ptxName);
    const DType dtype = getModelDType(m.manifest(), m.function());
    const ModelConfig config =
        randomWeights ? ModelConfig::load(checkpoint + "/config.json")
                      : Checkpoint::open(checkpoint).config;
    context = std::make_unique<cuda::Context>(cuda::Context::open(device));
    EngineCapacity capacity;
    capacity.maxBatch = maxBatch;
    capacity.maxTokensPerSeq = maxTokensPerSeq;
    capacity.maxStepRows = maxStepRows;
    engine = std::make_unique<Engine>(
        *context, std::move(m), ptx, ptxName, config,
        randomWeights
            ? fusion::tooling::randomModelWeights(config, dtype, *randomWeights)
            : loadModelWeights(TensorStore::open(checkpoint), config, dtype),
        capacity, EngineOptions{graph, false, clusters});
  }

  /// The logits of a step (dtype bit patterns) as float32 [batch, vocab].
  nb::ndarray<nb::numpy, float> logitsArray(const std::vector<uint16_t> &bits,
                                            size_t batch) const {
    std::vector<float> values(bits.size());
    for (size_t i = 0; i < bits.size(); ++i)
      values[i] = toFloat(engine->dtype(), bits[i]);
    return toNumpy(std::move(values),
                   {batch, static_cast<size_t>(engine->vocabSize())});
  }

  /// Runs `call` (a step or a prefill of `batch` rows, which fills the
  /// logits it is given unless null) without the GIL; returns the next
  /// tokens, with the logits when asked.
  template <typename Call>
  nb::object runStep(size_t batch, bool withLogits, Call call) {
    std::vector<uint16_t> logits;
    std::vector<int32_t> next;
    {
      nb::gil_scoped_release release;
      next = call(withLogits ? &logits : nullptr);
    }
    if (!withLogits)
      return nb::cast(next);
    return nb::make_tuple(next, logitsArray(logits, batch));
  }

  nb::object step(const std::vector<SeqId> &seqs,
                  const std::vector<int32_t> &tokens, bool withLogits) {
    return runStep(seqs.size(), withLogits, [&](std::vector<uint16_t> *l) {
      return engine->step(seqs, tokens, l);
    });
  }

  nb::object prefill(const std::vector<SeqId> &seqs,
                     const std::vector<std::vector<int32_t>> &prompts,
                     bool withLogits) {
    return runStep(seqs.size(), withLogits, [&](std::vector<uint16_t> *l) {
      return engine->prefill(seqs, prompts, l);
    });
  }

  std::vector<std::vector<int32_t>> generate(const std::vector<SeqId> &seqs,
                                             const std::vector<int32_t> &tokens,
                                             int64_t steps) {
    nb::gil_scoped_release release;
    return engine->generate(seqs, tokens, steps);
  }

  nb::ndarray<nb::numpy, double> score(const std::vector<int32_t> &tokens) {
    std::vector<double> logProbs;
    {
      nb::gil_scoped_release release;
      logProbs = engine->score(tokens);
    }
    const size_t n = logProbs.size();
    return toNumpy(std::move(logProbs), {n});
  }
};

/// A tensor as python/fusion/ops.py describes it: (address, dtype name,
/// shape, strides in elements, CUDA device ordinal).
using TensorTuple = std::tuple<uint64_t, std::string, std::vector<int64_t>,
                               std::vector<int64_t>, int>;

std::vector<DeviceTensor> toDeviceTensors(const std::vector<TensorTuple> &in,
                                          const char *what) {
  std::vector<DeviceTensor> out;
  for (size_t i = 0; i < in.size(); ++i) {
    const auto &[address, dtype, shape, strides, device] = in[i];
    std::optional<ElemType> type = parseElemType(dtype);
    if (!type)
      throwInvalidArgument(what, " ", i, ": dtype \"", dtype,
                           "\" is not f16, bf16, f32 or i32");
    out.push_back(DeviceTensor{address, *type, shape, strides, device});
  }
  return out;
}

/// One compiled function with the CUDA context, the Model and the
/// DecodeStep it runs in (declared in destruction order; on the heap, so
/// that nothing moves under the DecodeStep).
struct PyFunction {
  std::unique_ptr<cuda::Context> context;
  std::unique_ptr<Model> model;
  std::unique_ptr<DecodeStep> step;

  /// `prefix`: fusion-compile's output (<prefix>.manifest.json and
  /// <prefix>.ptx); internal buffers for batches up to `maxBatch`.
  PyFunction(const std::string &prefix, const std::string &function,
             int64_t maxBatch, int device) {
    model = std::make_unique<Model>(
        Model::load(prefix + ".manifest.json", function));
    const std::string ptxName = prefix + ".ptx";
    std::string ptx = readPtx(ptxName);
    context = std::make_unique<cuda::Context>(cuda::Context::open(device));
    step = std::make_unique<DecodeStep>(*context, *model, ptx, ptxName,
                                        Capacity{maxBatch, 1, 1});
  }

  void call(const std::vector<TensorTuple> &arguments,
            const std::vector<TensorTuple> &results, int64_t numSplits,
            uintptr_t stream) {
    step->runOnTensors(toDeviceTensors(arguments, "argument"),
                       toDeviceTensors(results, "result"), numSplits,
                       reinterpret_cast<CUstream>(stream));
  }
};

void bindErrors(nb::module_ &m) {
  // Translators are tried most recent first: the base class goes first.
  static nb::exception<Error> error(m, "Error", PyExc_RuntimeError);
  static nb::exception<InvalidArgumentError> invalid(m, "InvalidArgumentError",
                                                     error);
  static nb::exception<CapacityError> capacity(m, "CapacityError", error);
  static nb::exception<FormatError> format(m, "FormatError", error);
  static nb::exception<UnsupportedError> unsupported(m, "UnsupportedError",
                                                     error);
  static nb::exception<DeviceUnavailableError> device(
      m, "DeviceUnavailableError", error);
  static nb::exception<CudaError> cuda(m, "CudaError", error);
}

void bindModel(nb::module_ &m) {
  nb::class_<Model>(m, "Model",
                    "One function of a compiled manifest (fusion-compile's "
                    "<prefix>.manifest.json), resolved: its arguments, "
                    "results and kernels in launch order.")
      .def_static(
          "load",
          [](const std::string &manifest, const std::string &function) {
            return Model::load(manifest, function);
          },
          "manifest"_a, "function"_a = "",
          "Reads and validates `manifest`; `function` empty: its only "
          "function. Raises Error (unreadable file), FormatError (bad "
          "manifest) or InvalidArgumentError (no such function).")
      .def_prop_ro("function",
                   [](const Model &model) { return model.function().name; })
      .def_prop_ro("arguments", &argumentsOf,
                   "[{name, kind, role, dtype, shape}] in argument order")
      .def_prop_ro("results", &resultsOf,
                   "[{role, dtype, shape}] in result order")
      .def_prop_ro("kernels", &kernelsOf,
                   "[{name, entry, variants: [{min_batch, entry}]}] in launch "
                   "order")
      .def("launch", &launchOf, "entry"_a, "batch"_a, "max_pages"_a = 1,
           "num_splits"_a = 1,
           "What the runtime launches for kernel `entry` at these sizes: "
           "{entry, variant, grid, block, dynamic_shared_bytes, "
           "static_shared_bytes, cluster_x} (the batch variant, docs/abi.md "
           "3.2; cluster_x > 1: thread-block clusters of (cluster_x, 1, 1) "
           "CTAs, section 3.4).")
      .def("front_half", &frontHalfOf,
           "{hidden, num_heads, num_kv_heads, head_dim, page_size[, norm, "
           "eps, rope_theta]} of a decode-layer front half; "
           "InvalidArgumentError naming what is missing if it is not one.")
      .def_prop_ro("max_splits", &Model::maxSplits)
      .def("default_num_splits", &Model::defaultNumSplits, "batch"_a,
           "max_seq_len"_a,
           "The split-KV attention's num_splits for a step (the "
           "manifest's policy).");
}

void bindEngine(nb::module_ &m) {
  nb::class_<PyEngine>(m, "Engine",
                       "A whole model (fusion-import --whole-model, "
                       "fusion-compile) with its weights and paged KV caches "
                       "on one GPU; sequences are named by integer ids.")
      .def(nb::init<const std::string &, const std::string &, int64_t, int64_t,
                    const std::string &, int, bool, std::optional<uint64_t>,
                    int64_t, bool>(),
           "model"_a, "checkpoint"_a, "max_batch"_a = 1,
           "max_tokens_per_seq"_a = 2048, "function"_a = "decode_step",
           "device"_a = 0, "graph"_a = true, "random_weights"_a = nb::none(),
           "max_step_rows"_a = 0, "clusters"_a = true,
           nb::call_guard<nb::gil_scoped_release>(),
           "max_batch: sequences of a request and of a decode step; "
           "max_step_rows: tokens (rows) of one prefill or score step, >= "
           "max_batch (0: the larger of max_batch and the engine's default, "
           "one GEMM token tile); every batch-sized buffer is sized for it. "
           "clusters=False launches every kernel without thread-block "
           "clusters (the same results; for compute-sanitizer racecheck).")
      .def_prop_ro("max_step_rows",
                   [](const PyEngine &e) {
                     return e.engine->sequences().capacity().maxStepRows;
                   })
      .def_prop_ro("device_name",
                   [](const PyEngine &e) { return e.context->name(); })
      .def_prop_ro("dtype",
                   [](const PyEngine &e) {
                     return std::string(dtypeName(e.engine->dtype()));
                   })
      .def_prop_ro("vocab_size",
                   [](const PyEngine &e) { return e.engine->vocabSize(); })
      .def_prop_ro("weight_bytes",
                   [](const PyEngine &e) { return e.engine->weightBytes(); })
      .def_prop_ro("cache_bytes",
                   [](const PyEngine &e) { return e.engine->cacheBytes(); })
      .def(
          "add_sequence",
          [](PyEngine &e, SeqId id) { e.engine->addSequence(id); }, "id"_a)
      .def(
          "remove_sequence",
          [](PyEngine &e, SeqId id) { e.engine->removeSequence(id); }, "id"_a)
      .def(
          "length",
          [](const PyEngine &e, SeqId id) { return e.engine->length(id); },
          "id"_a)
      .def("step", &PyEngine::step, "seqs"_a, "tokens"_a, "logits"_a = false,
           "Appends tokens[b] to sequence seqs[b]; returns the greedy next "
           "tokens (and, with logits=True, float32 logits [batch, vocab]).")
      .def("prefill", &PyEngine::prefill, "seqs"_a, "prompts"_a,
           "logits"_a = false,
           "Runs prompts[b] through sequence seqs[b] (chunked: steps of up "
           "to max_step_rows prompt tokens, several of one sequence a step); "
           "returns the greedy next tokens (and logits).")
      .def("generate", &PyEngine::generate, "seqs"_a, "tokens"_a, "steps"_a,
           "Greedy decoding: `steps` steps, tokens[b] the first input of "
           "sequence seqs[b], each next input the previous step's argmax on "
           "the GPU, enqueued back to back; returns [batch][steps] ids.")
      .def("score", &PyEngine::score, "tokens"_a,
           "log p(tokens[i] | tokens[:i]) for i >= 1 (float64, n - 1 "
           "values), teacher-forced in a fresh sequence.");
}

void bindFunction(nb::module_ &m) {
  nb::class_<PyFunction>(m, "Function",
                         "One compiled function (fusion-compile's output) "
                         "loaded on a GPU, launched on the caller's tensors "
                         "and stream.")
      .def(nb::init<const std::string &, const std::string &, int64_t, int>(),
           "prefix"_a, "function"_a = "", "max_batch"_a = 256, "device"_a = 0)
      .def_prop_ro(
          "model",
          [](const PyFunction &f) -> const Model & { return *f.model; },
          nb::rv_policy::reference_internal)
      .def_prop_ro("device",
                   [](const PyFunction &f) { return f.context->ordinal(); })
      .def("call", &PyFunction::call, "arguments"_a, "results"_a,
           "num_splits"_a, "stream"_a,
           "Launches the function's kernels on `stream` (a CUstream as an "
           "int): arguments[i] and results[r] are (address, dtype, shape, "
           "strides, device) tuples in manifest order. Checks them all "
           "first (InvalidArgumentError naming the tensor); never "
           "synchronizes.")
      .def(
          "num_splits",
          [](PyFunction &f, int64_t batch, int64_t maxSeqLen) {
            return f.step->numSplitsFor(batch, maxSeqLen);
          },
          "batch"_a, "max_seq_len"_a,
          "The split-KV attention's num_splits for a call: the manifest's "
          "policy (Model.default_num_splits), lowered until the "
          "attention's thread-block clusters fit the device in one wave.");
}

} // namespace

NB_MODULE(_fusion, m) {
  m.doc() = "fusion's C++ runtime (runtime/), bound with nanobind";
  // torch.library keeps the PyTorch op's Python implementation (and through
  // it this module's functions and types) alive past interpreter shutdown,
  // by design; nanobind would report those as leaks at exit.
  nb::set_leak_warnings(false);
  bindErrors(m);
  bindModel(m);
  bindEngine(m);
  bindFunction(m);
  m.def("cluster_x", &fusion::contract::chooseClusterX, "cluster_splits"_a,
        "num_splits"_a,
        "The cluster dimension x the runtime launches `num_splits` splits of "
        "a split-KV attention launch whose schedule has `cluster_splits` in "
        "(1: no cluster; the rule of docs/abi.md 3.4).");
  m.def(
      "device_name",
      [](int device) { return cuda::Context::open(device).name(); },
      "device"_a = 0,
      "The name of CUDA device `device`; DeviceUnavailableError without a "
      "driver or device.");
}
