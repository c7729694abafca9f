//===- Model.cpp - a compiled model and its launch plan (CPU side) --------===//

#include "fusion/runtime/Model.h"

#include "fusion/contract/Contract.h"
#include "fusion/runtime/Error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace fusion::runtime {

//===----------------------------------------------------------------------===//
// Model
//===----------------------------------------------------------------------===//

Model::Model(Manifest manifest, std::string_view function)
    : manifest_(std::move(manifest)) {
  function_ = &manifest_.function(function);
  const ManifestFunction &f = *function_;
  argRoles_.assign(f.arguments.size(), std::string(contract::role::kUnused));
  std::vector<bool> roleSet(f.arguments.size(), false);
  maxSplits_ = std::numeric_limits<int64_t>::max();
  for (int k : f.kernels) {
    const ManifestKernel &kernel = manifest_.kernels[k];
    kernels_.push_back(&kernel);
    usesNumSplits_ |= kernel.usesNumSplits();
    usesMaxPages_ |= kernel.usesMaxPages();
    if (kernel.usesNumSplits())
      maxSplits_ = std::min(maxSplits_, kernel.maxSplits());
    std::vector<ParamSource> sources;
    for (const ManifestParam &p : kernel.params) {
      ParamSource s;
      switch (p.kind) {
      case ParamKind::Input:
        if (p.binding.kind == Binding::Kind::Argument) {
          s.kind = ParamSource::Kind::Argument;
          s.index = p.binding.index;
          // The manifest's argument role, when given, is the same (checked
          // by the parser).
          if (!roleSet[s.index]) {
            roleSet[s.index] = true;
            argRoles_[s.index] = p.role;
          }
        } else {
          s.kind = ParamSource::Kind::Internal;
          s.index = internalForResult(p.binding.index, p.binding.result);
        }
        break;
      case ParamKind::Output:
      case ParamKind::Workspace: {
        InternalBuffer b;
        b.kernel = kernel.index;
        b.param = p.index;
        b.kind = p.kind;
        b.role = p.role;
        b.dtype = p.dtype;
        b.shape = p.shape;
        b.zeroInit = p.zeroInit;
        b.label = kernel.label() + " " +
                  (p.kind == ParamKind::Output
                       ? "output " + std::to_string(p.binding.result)
                       : std::string("workspace")) +
                  " \"" + p.role + "\"";
        s.kind = ParamSource::Kind::Internal;
        s.index = static_cast<int>(internal_.size());
        internal_.push_back(std::move(b));
        break;
      }
      case ParamKind::TensorMap:
        s.kind = ParamSource::Kind::TensorMap;
        s.index = tensorMapSlot(kernel, p, sources[p.tensorMap->of]);
        break;
      case ParamKind::Scalar:
        s.kind = ParamSource::Kind::Scalar;
        s.scalar = p.role;
        break;
      }
      sources.push_back(std::move(s));
    }
    sources_.push_back(std::move(sources));
  }
  if (!usesNumSplits_)
    maxSplits_ = 1;
  for (const ManifestResult &r : f.results) {
    if (r.source.kind == Binding::Kind::Argument) {
      resultRoles_.push_back(argRoles_[r.source.index]);
    } else {
      const ManifestParam *out =
          manifest_.kernels[r.source.index].output(r.source.result);
      resultRoles_.push_back(out ? out->role : "result");
    }
  }
}

Model Model::load(const std::string &manifestPath, std::string_view function) {
  return Model(Manifest::load(manifestPath), function);
}

int Model::tensorMapSlot(const ManifestKernel &kernel, const ManifestParam &p,
                         const ParamSource &target) {
  const contract::TensorMapSpec &spec = *p.tensorMap;
  for (size_t i = 0; i < tensorMaps_.size(); ++i) {
    const TensorMapSlot &t = tensorMaps_[i];
    if (t.target.kind == target.kind && t.target.index == target.index &&
        t.dtype == p.dtype && t.shape == p.shape &&
        t.spec.boxRows == spec.boxRows && t.spec.boxCols == spec.boxCols &&
        t.spec.swizzleBytes == spec.swizzleBytes)
      return static_cast<int>(i);
  }
  const ManifestParam &of = kernel.params[spec.of];
  TensorMapSlot t;
  t.label = kernel.label() + " param " + std::to_string(p.index) + " \"" +
            p.role + "\" of param " + std::to_string(of.index) + " \"" +
            of.role + "\"";
  t.target = target;
  t.dtype = p.dtype;
  t.shape = p.shape;
  t.spec = spec;
  tensorMaps_.push_back(std::move(t));
  return static_cast<int>(tensorMaps_.size() - 1);
}

int Model::internalForResult(int kernel, int r) const {
  const ManifestParam *out = manifest_.kernels[kernel].output(r);
  if (!out)
    return -1;
  for (size_t i = 0; i < internal_.size(); ++i)
    if (internal_[i].kernel == kernel && internal_[i].param == out->index)
      return static_cast<int>(i);
  return -1;
}

int Model::argumentIndex(std::string_view name) const {
  for (const ManifestArgument &a : function_->arguments)
    if (a.name == name)
      return a.index;
  std::string list;
  for (const ManifestArgument &a : function_->arguments)
    list += (a.index ? ", " : "") + a.name;
  throwInvalidArgument("function \"", function_->name, "\" of ",
                       manifest_.source, " has no argument \"", name,
                       "\" (arguments: ", list, ")");
}

int Model::argumentWithRole(std::string_view role) const {
  for (size_t i = 0; i < argRoles_.size(); ++i)
    if (argRoles_[i] == role)
      return static_cast<int>(i);
  return -1;
}

int Model::resultWithRole(std::string_view role) const {
  for (size_t i = 0; i < resultRoles_.size(); ++i)
    if (resultRoles_[i] == role)
      return static_cast<int>(i);
  return -1;
}

int64_t Model::defaultNumSplits(int64_t batch, int64_t maxSeqLen) const {
  if (!usesNumSplits_)
    return 1;
  for (const ManifestKernel *k : kernels_) {
    if (!k->usesNumSplits())
      continue;
    // The launch this batch runs: a variant may have its own grid and
    // policy members (the kernel's schedule fills in the rest).
    const LaunchGeometry &g = k->launchFor(std::max<int64_t>(batch, 1));
    auto get = [&](std::string_view key, int64_t fallback) {
      for (const LaunchGeometry *l :
           {&g, static_cast<const LaunchGeometry *>(k)}) {
        auto it = l->scheduleInts.find(std::string(key));
        if (it != l->scheduleInts.end() && it->second >= 1)
          return it->second;
      }
      return fallback;
    };
    const contract::SplitPolicy defaults;
    contract::SplitPolicy policy;
    policy.maxSplits = maxSplits_;
    policy.targetCtas =
        get(contract::schedule::kTargetCtas, defaults.targetCtas);
    policy.minChunkTokens =
        get(contract::schedule::kMinChunkTokens, defaults.minChunkTokens);
    Symbols s{std::max<int64_t>(batch, 1), 1, 1, 1};
    int64_t gridY = 1;
    try {
      gridY = g.grid[1].evaluate(s);
    } catch (const Error &) {
    }
    return contract::chooseNumSplits(policy, s.batch, gridY, maxSeqLen);
  }
  return 1;
}

//===----------------------------------------------------------------------===//
// LaunchPlan
//===----------------------------------------------------------------------===//

namespace {

int64_t checkedBytes(const std::vector<Dim> &shape, ElemType dtype,
                     const Symbols &s, const std::string &what) {
  int64_t n = 1;
  for (const Dim &d : shape) {
    int64_t v = d.evaluate(s);
    if (v != 0 && n > std::numeric_limits<int64_t>::max() / 8 / v)
      throwCapacity(what, ": shape ", shapeString(shape),
                    " at capacity overflows 64-bit sizes");
    n *= v;
  }
  return n * elemTypeSize(dtype);
}

std::string capacityString(const Capacity &c) {
  return "batch " + std::to_string(c.maxBatch) + ", max_pages " +
         std::to_string(c.maxPages) + ", num_pages " +
         std::to_string(c.numPages);
}

} // namespace

LaunchPlan::LaunchPlan(const Model &model, const Capacity &capacity)
    : model_(&model), capacity_(capacity) {
  if (capacity.maxBatch < 1 || capacity.maxPages < 1 || capacity.numPages < 1)
    throwInvalidArgument("LaunchPlan: capacities must be >= 1, got ",
                         capacityString(capacity));
  if (capacity.maxBatch > std::numeric_limits<int32_t>::max() ||
      capacity.maxPages > std::numeric_limits<int32_t>::max() ||
      capacity.numPages > std::numeric_limits<int32_t>::max())
    throwInvalidArgument("LaunchPlan: capacities must fit in int32, got ",
                         capacityString(capacity));
  argAddress_.assign(model.arguments().size(), 0);
  argBytes_.assign(model.arguments().size(), 0);
  internalAddress_.assign(model.internalBuffers().size(), 0);
  // Size everything once so that overflow shows up here.
  for (size_t i = 0; i < argAddress_.size(); ++i)
    argumentBytes(static_cast<int>(i));
  for (size_t i = 0; i < internalAddress_.size(); ++i)
    internalBytes(static_cast<int>(i));
  layOutWorkspaces();
}

void LaunchPlan::layOutWorkspaces() {
  const std::vector<InternalBuffer> &buffers = model_->internalBuffers();
  workspaceOffset_.assign(buffers.size(), -1);
  // Per kernel, the next free offset in each arena.
  std::unordered_map<int, std::array<int64_t, 2>> next;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const InternalBuffer &b = buffers[i];
    if (b.kind != ParamKind::Workspace)
      continue;
    const int a = static_cast<int>(workspaceArena(static_cast<int>(i)));
    int64_t &cursor = next[b.kernel][a];
    const int64_t bytes = internalBytes(static_cast<int>(i));
    if (cursor >
        std::numeric_limits<int64_t>::max() - kWorkspaceAlignment - bytes)
      throwCapacity(b.label, ": the workspaces of its kernel at capacity (",
                    capacityString(capacity_), ") overflow 64-bit sizes");
    workspaceOffset_[i] = cursor;
    arenaBytes_[a] = std::max(arenaBytes_[a], cursor + bytes);
    cursor = (cursor + bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment *
             kWorkspaceAlignment;
  }
}

WorkspaceArena LaunchPlan::workspaceArena(int i) const {
  return model_->internalBuffers().at(i).zeroInit ? WorkspaceArena::ZeroInit
                                                  : WorkspaceArena::Scratch;
}

int64_t LaunchPlan::workspaceOffset(int i) const {
  if (i < 0 || i >= static_cast<int>(workspaceOffset_.size()) ||
      workspaceOffset_[i] < 0)
    throwInvalidArgument("LaunchPlan::workspaceOffset: internal buffer ", i,
                         " is not a workspace");
  return workspaceOffset_[i];
}

int64_t LaunchPlan::runtimeBufferBytes() const {
  int64_t bytes = arenaBytes(WorkspaceArena::Scratch) +
                  arenaBytes(WorkspaceArena::ZeroInit) + tensorMapTableBytes();
  for (size_t i = 0; i < workspaceOffset_.size(); ++i)
    if (workspaceOffset_[i] < 0)
      bytes += internalBytes(static_cast<int>(i));
  return bytes;
}

int64_t LaunchPlan::tensorMapTableBytes() const {
  return static_cast<int64_t>(model_->tensorMaps().size()) *
         contract::kTensorMapBytes;
}

void LaunchPlan::setTensorMapTable(uint64_t address) {
  if (address == 0 || address % contract::kTensorMapAlignment != 0)
    throwInvalidArgument("LaunchPlan::setTensorMapTable: device address 0x",
                         std::hex, address, std::dec, " is null or not ",
                         contract::kTensorMapAlignment, "-byte aligned");
  tensorMapTable_ = address;
}

std::vector<uint64_t> LaunchPlan::bindingKey() const {
  std::vector<uint64_t> key(argAddress_);
  key.insert(key.end(), internalAddress_.begin(), internalAddress_.end());
  key.push_back(tensorMapTable_);
  return key;
}

uint64_t LaunchPlan::tensorMapAddress(int i) const {
  if (i < 0 || i >= static_cast<int>(model_->tensorMaps().size()))
    throwInvalidArgument("LaunchPlan::tensorMapAddress: no tensor map ", i);
  if (tensorMapTable_ == 0)
    return 0;
  return tensorMapTable_ + static_cast<uint64_t>(i) *
                               static_cast<uint64_t>(contract::kTensorMapBytes);
}

uint64_t LaunchPlan::tensorMapTarget(int i) const {
  const ParamSource &target = model_->tensorMaps().at(i).target;
  return target.kind == ParamSource::Kind::Argument
             ? argAddress_[target.index]
             : internalAddress_[target.index];
}

int64_t TensorMapSlot::cols() const { return tensorMapColumns(shape); }

int64_t LaunchPlan::tensorMapRows(int i) const {
  const TensorMapSlot &t = model_->tensorMaps().at(i);
  int64_t rows = 1;
  for (size_t d = 0; d < contract::tensorMapRowDims(t.shape.size()); ++d)
    rows *= t.shape[d].evaluate(capacity_.symbols(model_->maxSplits()));
  const int64_t cols = t.cols();
  if (rows > std::numeric_limits<int32_t>::max())
    throwInvalidArgument("LaunchPlan::tensorMapRows: ", t.label, " covers ",
                         rows, " rows (", shapeString(t.shape), " at capacity ",
                         capacityString(capacity_),
                         "); TMA row coordinates are i32, so at most ",
                         std::numeric_limits<int32_t>::max());
  const ParamSource &target = t.target;
  const bool argument = target.kind == ParamSource::Kind::Argument;
  if (tensorMapTarget(i) == 0)
    return rows;
  // bindArgument and the internal buffers' owner provide the bytes at
  // capacity, and an input holds as many elements as its source (the
  // manifest parser's check), so this holds unless those checks change.
  const uint64_t bytes =
      argument ? argBytes_[target.index]
               : static_cast<uint64_t>(internalBytes(target.index));
  const uint64_t need = static_cast<uint64_t>(rows) *
                        static_cast<uint64_t>(cols) *
                        static_cast<uint64_t>(elemTypeSize(t.dtype));
  if (bytes < need)
    throwInvalidArgument(
        "LaunchPlan::tensorMapRows: ", t.label, " covers ", rows, " rows of ",
        cols, " ", elemTypeName(t.dtype), " (", shapeString(t.shape),
        " at capacity ", capacityString(capacity_), ": ", need,
        " bytes), but its ",
        argument ? "argument \"" + model_->arguments()[target.index].name +
                       "\" is bound to "
                 : model_->internalBuffers()[target.index].label + " has ",
        bytes, " bytes: the map would read past the buffer");
  return rows;
}

int64_t LaunchPlan::argumentBytes(int i) const {
  const ManifestArgument &a = model_->arguments().at(i);
  return checkedBytes(a.shape, a.dtype, capacity_.symbols(model_->maxSplits()),
                      "argument \"" + a.name + "\"");
}

int64_t LaunchPlan::internalBytes(int i) const {
  const InternalBuffer &b = model_->internalBuffers().at(i);
  return checkedBytes(b.shape, b.dtype, capacity_.symbols(model_->maxSplits()),
                      b.label);
}

int64_t LaunchPlan::resultBytes(int r, const StepShape &shape) const {
  const ManifestResult &res = model_->results().at(r);
  Symbols s{shape.batch, shape.numSplits, shape.maxPages, capacity_.numPages};
  return numElements(res.shape, s) * elemTypeSize(res.dtype);
}

void LaunchPlan::bindArgument(int i, uint64_t address, uint64_t bytes) {
  if (i < 0 || i >= static_cast<int>(argAddress_.size()))
    throwInvalidArgument("LaunchPlan::bindArgument: no argument ", i,
                         " (function \"", model_->function().name, "\" has ",
                         argAddress_.size(), ")");
  const ManifestArgument &a = model_->arguments()[i];
  if (address == 0)
    throwInvalidArgument("LaunchPlan::bindArgument: argument \"", a.name,
                         "\": null device address");
  if (address % contract::kBufferAlignment != 0)
    throwInvalidArgument("LaunchPlan::bindArgument: argument \"", a.name,
                         "\": device address 0x", std::hex, address, std::dec,
                         " is not ", contract::kBufferAlignment,
                         "-byte aligned (the kernels use 16-byte vector "
                         "loads)");
  uint64_t need = static_cast<uint64_t>(argumentBytes(i));
  if (bytes < need)
    throwInvalidArgument("LaunchPlan::bindArgument: argument \"", a.name,
                         "\" (", elemTypeName(a.dtype), shapeString(a.shape),
                         ") needs ", need, " bytes at capacity (",
                         capacityString(capacity_), "), got a buffer of ",
                         bytes, " bytes");
  checkNoOverlap(i, address, bytes);
  argAddress_[i] = address;
  argBytes_[i] = bytes;
}

void LaunchPlan::checkNoOverlap(int i, uint64_t address, uint64_t bytes) const {
  const ManifestArgument &a = model_->arguments()[i];
  for (size_t j = 0; j < argAddress_.size(); ++j) {
    const ManifestArgument &b = model_->arguments()[j];
    if (static_cast<int>(j) == i || argAddress_[j] == 0 ||
        (a.kind != "buffer" && b.kind != "buffer"))
      continue;
    if (address < argAddress_[j] + argBytes_[j] &&
        argAddress_[j] < address + bytes)
      throwInvalidArgument(
          "LaunchPlan::bindArgument: argument \"", a.name, "\" (", bytes,
          " bytes at 0x", std::hex, address, ") overlaps argument \"", b.name,
          "\" (", std::dec, argBytes_[j], " bytes at 0x", std::hex,
          argAddress_[j], std::dec,
          "), and the kernels write one of them: they need separate memory");
  }
}

void LaunchPlan::bindArgument(std::string_view name, uint64_t address,
                              uint64_t bytes) {
  bindArgument(model_->argumentIndex(name), address, bytes);
}

void LaunchPlan::bindRole(std::string_view role, uint64_t address,
                          uint64_t bytes) {
  int i = model_->argumentWithRole(role);
  if (i < 0) {
    std::string roles;
    for (size_t a = 0; a < model_->arguments().size(); ++a)
      roles += (a ? ", " : "") + model_->argumentRole(static_cast<int>(a));
    throwInvalidArgument("LaunchPlan::bindRole: function \"",
                         model_->function().name, "\" has no argument with ",
                         "role \"", role, "\" (roles: ", roles, ")");
  }
  bindArgument(i, address, bytes);
}

void LaunchPlan::setInternal(int i, uint64_t address) {
  if (i < 0 || i >= static_cast<int>(internalAddress_.size()))
    throwInvalidArgument("LaunchPlan::setInternal: no internal buffer ", i);
  if (address == 0)
    throwInvalidArgument(
        "LaunchPlan::setInternal: ", model_->internalBuffers()[i].label,
        ": null device address");
  internalAddress_[i] = address;
}

uint64_t LaunchPlan::resultAddress(int r) const {
  const ManifestResult &res = model_->results().at(r);
  if (res.source.kind == Binding::Kind::Argument)
    return argAddress_[res.source.index];
  int i = model_->internalForResult(res.source.index, res.source.result);
  return i < 0 ? 0 : internalAddress_[i];
}

void LaunchPlan::validate(const StepShape &shape) const {
  const Model &m = *model_;
  const std::string fn = "decode step of \"" + m.function().name + "\"";
  if (shape.batch < 1)
    throwInvalidArgument(fn, ": batch must be >= 1, got ", shape.batch);
  if (shape.batch > capacity_.maxBatch)
    throwCapacity(fn, ": batch ", shape.batch,
                  " exceeds the batch the buffers were allocated for (",
                  capacity_.maxBatch, ")");
  if (m.usesMaxPages()) {
    if (shape.maxPages < 1)
      throwInvalidArgument(fn, ": the block table needs max_pages >= 1, got ",
                           shape.maxPages);
    if (shape.maxPages > capacity_.maxPages)
      throwCapacity(fn, ": block-table width max_pages ", shape.maxPages,
                    " exceeds the width the buffers were allocated for (",
                    capacity_.maxPages, ")");
  }
  if (m.usesNumSplits() &&
      (shape.numSplits < 1 || shape.numSplits > m.maxSplits()))
    throwInvalidArgument(fn, ": num_splits ", shape.numSplits,
                         " is outside [1, ", m.maxSplits(),
                         "] (max_splits of the split-KV kernels)");
  std::string unbound;
  for (size_t i = 0; i < argAddress_.size(); ++i) {
    if (argAddress_[i] != 0)
      continue;
    // Arguments no kernel reads (and no result returns) need no buffer.
    bool used = m.argumentRole(static_cast<int>(i)) != contract::role::kUnused;
    for (const ManifestResult &r : m.results())
      used |= r.source.kind == Binding::Kind::Argument &&
              r.source.index == static_cast<int>(i);
    if (used)
      unbound += (unbound.empty() ? "" : ", ") + m.arguments()[i].name;
  }
  if (!unbound.empty())
    throwInvalidArgument(fn, ": unbound arguments: ", unbound);
  for (size_t i = 0; i < internalAddress_.size(); ++i)
    if (internalAddress_[i] == 0)
      throwInvalidArgument(fn, ": internal buffer ",
                           m.internalBuffers()[i].label,
                           " has no device memory");
  if (!m.tensorMaps().empty() && tensorMapTable_ == 0)
    throwInvalidArgument(fn, ": the tensor maps (", m.tensorMaps()[0].label,
                         ", ...) have no device memory");
  Symbols s{shape.batch, shape.numSplits, shape.maxPages, capacity_.numPages};
  for (const ManifestKernel *k : m.kernels()) {
    int v = k->variantFor(shape.batch);
    const LaunchGeometry &launch = k->launchFor(shape.batch);
    std::array<int64_t, 3> g = launch.gridFor(s);
    const int64_t limits[3] = {2147483647, 65535, 65535};
    for (int d = 0; d < 3; ++d)
      if (g[d] < 1 || g[d] > limits[d])
        throwInvalidArgument(fn, ": ", k->label(v), ": grid dimension ", d,
                             " = ", launch.grid[d].str(), " = ", g[d],
                             " is outside [1, ", limits[d], "]");
  }
}

PreparedLaunch launchGeometry(const Model &model, int kernel,
                              const Symbols &sizes) {
  const ManifestKernel &k = *model.kernels()[kernel];
  const LaunchGeometry &launch = k.launchFor(sizes.batch);
  PreparedLaunch l;
  l.kernel = kernel;
  l.variant = k.variantFor(sizes.batch);
  l.entry = launch.entry;
  std::array<int64_t, 3> g = launch.gridFor(sizes);
  for (int d = 0; d < 3; ++d) {
    l.grid[d] = static_cast<uint32_t>(g[d]);
    l.block[d] = static_cast<uint32_t>(launch.block[d]);
  }
  l.dynamicSharedBytes = static_cast<uint32_t>(launch.dynamicSharedBytes);
  l.programmaticDependentLaunch = k.programmaticDependentLaunch;
  l.clusterX =
      static_cast<uint32_t>(k.clusterXFor(sizes.batch, sizes.num_splits));
  return l;
}

std::vector<PreparedLaunch> LaunchPlan::prepare(const StepShape &shape) const {
  validate(shape);
  const Model &m = *model_;
  Symbols s{shape.batch, shape.numSplits, shape.maxPages, capacity_.numPages};
  std::vector<PreparedLaunch> out;
  for (size_t i = 0; i < m.kernels().size(); ++i) {
    PreparedLaunch l = launchGeometry(m, static_cast<int>(i), s);
    for (const ParamSource &src : m.paramSources(i)) {
      KernelArg a;
      switch (src.kind) {
      case ParamSource::Kind::Argument:
        a.pointer = argAddress_[src.index];
        break;
      case ParamSource::Kind::Internal:
        a.pointer = internalAddress_[src.index];
        break;
      case ParamSource::Kind::TensorMap:
        a.pointer = tensorMapAddress(src.index);
        break;
      case ParamSource::Kind::Scalar:
        a.isScalar = true;
        a.scalar = static_cast<int32_t>(*s.lookup(src.scalar));
        break;
      }
      l.args.push_back(a);
    }
    out.push_back(std::move(l));
  }
  return out;
}

namespace {

/// Which kernels of `m` append to / read the paged caches, found from their
/// parameter roles: a kernel taking positions and a cache appends
/// (kv_append), one taking seq_lens and a cache reads (decode_attention).
struct CacheUse {
  bool appends = false, reads = false;
  /// No kernel both appends to and reads the caches: each step's appends are
  /// done before a later kernel reads (kernels run in order), so rows of one
  /// sequence may share its pages (docs/abi.md section 1.1).
  bool appendsApart = true;
  int64_t pageSize = 0; ///< the caches' dimension 1 (0: no caches)
};

CacheUse cacheUse(const Model &m) {
  CacheUse u;
  for (const ManifestKernel *k : m.kernels()) {
    bool cache = false, positions = false, seqLens = false;
    for (const ManifestParam &p : k->params) {
      if (p.kind != ParamKind::Input)
        continue;
      if (p.role == contract::role::kKeyCache ||
          p.role == contract::role::kValueCache) {
        cache = true;
        if (p.shape.size() == 4 && !p.shape[1].isSymbol())
          u.pageSize = p.shape[1].value;
      }
      positions |= p.role == contract::role::kPositions;
      seqLens |= p.role == contract::role::kSeqLens;
    }
    u.appends |= cache && positions;
    u.reads |= cache && seqLens;
    u.appendsApart &= !(cache && positions && seqLens);
  }
  return u;
}

/// Whether the slot `pos` of a row (page row[pos / P], slot pos % P) is one
/// of the slots of tokens [0, len) attention reads: normally pos < len; or,
/// for a row whose block table maps the logical page of pos onto a page of
/// the window (GoldenCacheLayout), a token t < len in the same page and slot.
bool appendedSlotIsRead(const int32_t *row, int64_t pos, int64_t len,
                        int64_t P) {
  if (pos < len)
    return true;
  for (int64_t t = pos % P; t < len; t += P)
    if (row[t / P] == row[pos / P])
      return true;
  return false;
}

/// The pages row `b` uses: logical pages [0, ceil(len / P)) it reads and
/// the page of `pos` it writes (-1: none). Checks each id is in
/// [0, numPages).
void checkRowPages(const std::string &fn, int64_t b, const int32_t *row,
                   int64_t readPages, int64_t writePage, int64_t numPages) {
  auto check = [&](int64_t j, const char *why) {
    if (row[j] < 0 || row[j] >= numPages)
      throwInvalidArgument(fn, ": sequence (row) ", b, ": block_table[", b,
                           ", ", j, "] = ", row[j], " (", why,
                           ") is not a page of the cache [0, ", numPages, ")");
  };
  for (int64_t j = 0; j < readPages; ++j)
    check(j, "a page attention reads");
  if (writePage >= 0)
    check(writePage, "the page the new token is written to");
}

} // namespace

void LaunchPlan::checkStepInputs(const StepShape &shape,
                                 const StepInputs &in) const {
  validate(shape);
  const Model &m = *model_;
  const std::string fn = "decode step of \"" + m.function().name + "\"";
  const CacheUse use = cacheUse(m);
  auto need = [&](const int32_t *p, const char *role) {
    if (!p && m.argumentWithRole(role) >= 0)
      throwInvalidArgument(fn, ": no host copy of the ", role,
                           " input to check");
    return p;
  };
  const int32_t *pos = need(in.positions, "positions");
  const int32_t *lens = need(in.seqLens, "seq_lens");
  const int32_t *table = need(in.blockTable, "block_table");
  if (use.pageSize == 0 || !table || !(use.appends || use.reads))
    return;
  const int64_t P = use.pageSize, W = shape.maxPages, C = W * P;
  // Rows b and o are tokens of one sequence: the same block-table row, in a
  // model whose appends are done before its reads.
  auto sameSequence = [&](int64_t b, int64_t o) {
    return use.appendsApart &&
           std::equal(table + b * W, table + (b + 1) * W, table + o * W);
  };
  // Page -> a row that writes it; page * P + slot -> the row that writes it.
  std::unordered_map<int32_t, int64_t> writer;
  std::unordered_map<int64_t, int64_t> slotWriter;
  for (int64_t b = 0; b < shape.batch; ++b) {
    const int32_t *row = table + b * W;
    int64_t writePage = -1, readPages = 0;
    if (use.appends && pos) {
      if (pos[b] < 0)
        throwInvalidArgument(fn, ": sequence (row) ", b, ": position ", pos[b],
                             " is negative");
      if (pos[b] >= C)
        throwCapacity(fn, ": sequence (row) ", b, ": position ", pos[b],
                      " is past the ", C, " tokens its block-table row ",
                      "addresses (max_pages ", W, " * page size ", P, ")");
      writePage = pos[b] / P;
    }
    if (use.reads && lens) {
      if (lens[b] < 0)
        throwInvalidArgument(fn, ": sequence (row) ", b, ": seq_lens ", lens[b],
                             " is negative");
      if (lens[b] > C)
        throwCapacity(fn, ": sequence (row) ", b, ": seq_lens ", lens[b],
                      " is past the ", C, " tokens its block-table row ",
                      "addresses (max_pages ", W, " * page size ", P, ")");
      readPages = (lens[b] + P - 1) / P;
    }
    checkRowPages(fn, b, row, readPages, writePage, capacity_.numPages);
    if (writePage < 0)
      continue;
    const int32_t page = row[writePage];
    if (use.reads && lens && !appendedSlotIsRead(row, pos[b], lens[b], P))
      throwInvalidArgument(
          fn, ": sequence (row) ", b, ": the new token's slot (position ",
          pos[b], ": page ", page, ", slot ", pos[b] % P,
          ") is not among the seq_lens = ", lens[b],
          " slots attention reads (normally seq_lens = position + 1)");
    if (auto [it, fresh] = writer.emplace(page, b);
        !fresh && !sameSequence(it->second, b))
      throwInvalidArgument(fn, ": sequences (rows) ", it->second, " and ", b,
                           " both write page ", page);
    if (auto [it, fresh] =
            slotWriter.emplace(int64_t{page} * P + pos[b] % P, b);
        !fresh)
      throwInvalidArgument(fn, ": sequences (rows) ", it->second, " and ", b,
                           " both write slot ", pos[b] % P, " of page ", page);
  }
  // A page one row writes must not be used by a row of another sequence.
  for (int64_t b = 0; b < shape.batch; ++b) {
    const int32_t *row = table + b * W;
    int64_t readPages = use.reads && lens ? (lens[b] + P - 1) / P : 0;
    for (int64_t j = 0; j < readPages; ++j) {
      auto it = writer.find(row[j]);
      if (it != writer.end() && it->second != b && !sameSequence(it->second, b))
        throwInvalidArgument(fn, ": sequence (row) ", it->second,
                             " writes page ", row[j], ", which sequence (row) ",
                             b, " reads (block_table[", b, ", ", j,
                             "]): rows must not share a page one of them "
                             "writes unless they are tokens of one sequence "
                             "(the same block-table row) in a model whose "
                             "appends precede its reads");
    }
  }
}

bool LaunchPlan::rowsMayShareSequence() const {
  return cacheUse(*model_).appendsApart;
}

//===----------------------------------------------------------------------===//
// FrontHalfSignature
//===----------------------------------------------------------------------===//

namespace {

/// The reference configuration the kernels' ops describe (see
/// FrontHalfSignature::reference).
std::optional<ref::FrontHalfConfig>
referenceFromOps(const Model &m, const FrontHalfSignature &sig,
                 const std::string &fn) {
  const ManifestOp *norm = nullptr, *qkv = nullptr, *rope = nullptr,
                   *attn = nullptr;
  bool any = false;
  for (const ManifestKernel *k : m.kernels())
    for (const ManifestOp &op : k->ops) {
      any = true;
      if ((op.name == "rmsnorm" || op.name == "layernorm") && !norm)
        norm = &op;
      else if (op.name == "qkv_proj" && !qkv)
        qkv = &op;
      else if (op.name == "rope" && !rope)
        rope = &op;
      else if (op.name == "decode_attention" && !attn)
        attn = &op;
    }
  if (!any)
    return std::nullopt;
  const char *missing = !norm   ? "rmsnorm or layernorm"
                        : !qkv  ? "qkv_proj"
                        : !rope ? "rope"
                        : !attn ? "decode_attention"
                                : nullptr;
  if (missing)
    throwInvalidArgument(fn, ": the kernels' ops have no ", missing,
                         " (not a decode-layer front half)");
  ref::FrontHalfConfig c;
  c.dtype = sig.dtype;
  c.hidden = sig.hidden;
  c.dims = sig.dims;
  c.norm = norm->name == "rmsnorm" ? ref::NormKind::RMSNorm
                                   : ref::NormKind::LayerNorm;
  // Required attributes (the manifest parser checked them).
  c.normOptions.eps = norm->numbers.at("epsilon");
  c.normOptions.unit_offset = norm->flag("unit_offset");
  if (norm->flag("residual") != (sig.residual >= 0))
    throwInvalidArgument(fn, ": the ", norm->name, " op ",
                         norm->flag("residual") ? "adds" : "has no",
                         " residual but the function ",
                         sig.residual >= 0 ? "has" : "has no",
                         " residual argument");
  auto checkDim = [&](const char *key, int64_t expected) {
    double v = qkv->numbers.at(key);
    if (v != static_cast<double>(expected))
      throwInvalidArgument(fn, ": qkv_proj ", key, " = ", v,
                           " but the buffers imply ", expected);
  };
  checkDim("num_heads", sig.dims.numQHeads);
  checkDim("num_kv_heads", sig.dims.numKVHeads);
  checkDim("head_dim", sig.dims.headDim);
  if (qkv->flag("bias") != (sig.qkvBias >= 0))
    throwInvalidArgument(
        fn, ": qkv_proj bias = ", qkv->flag("bias") ? "true" : "false",
        " but the function ", sig.qkvBias >= 0 ? "has" : "has no",
        " qkv_bias argument");
  const std::string &p = rope->strings.at("pairing");
  if (p == "neox")
    c.rope.pairing = ref::RopePairing::NeoX;
  else if (p == "gptj")
    c.rope.pairing = ref::RopePairing::GPTJ;
  else
    throwUnsupported(fn, ": unknown rope pairing \"", p, "\"");
  c.rope.theta = rope->numbers.at("theta");
  int64_t rd = static_cast<int64_t>(rope->numbers.at("rotary_dim"));
  if (rd > sig.dims.headDim || rd % 2 != 0)
    throwInvalidArgument(fn, ": rope rotary_dim ", rd,
                         " is not an even number of at most head_dim ",
                         sig.dims.headDim);
  c.rope.rotaryDim = rd == sig.dims.headDim ? 0 : rd;
  auto scaling = rope->strings.find("scaling.type");
  if (scaling != rope->strings.end()) {
    if (scaling->second != "llama3")
      throwUnsupported(fn, ": rope scaling \"", scaling->second,
                       "\" has no reference");
    ref::Llama3RopeScaling l;
    l.factor = rope->numbers.at("scaling.factor");
    l.lowFreqFactor = rope->numbers.at("scaling.low_freq_factor");
    l.highFreqFactor = rope->numbers.at("scaling.high_freq_factor");
    l.originalMaxPosition =
        static_cast<int64_t>(rope->numbers.at("scaling.original_max_position"));
    c.rope.llama3 = l;
  }
  // The default scale is 1/sqrt(D); record only a different one.
  double scale = attn->numbers.at("scale");
  double def = 1.0 / std::sqrt(static_cast<double>(sig.dims.headDim));
  if (std::fabs(scale - def) > 1e-12 * def)
    c.attention.scale = scale;
  return c;
}

} // namespace

FrontHalfSignature FrontHalfSignature::fromModel(const Model &m) {
  FrontHalfSignature sig;
  const std::string fn =
      "function \"" + m.function().name + "\" of " + m.manifest().source;
  auto need = [&](std::string_view role) {
    int i = m.argumentWithRole(role);
    if (i < 0)
      throwInvalidArgument(fn,
                           " is not a decode-layer front half: no argument ",
                           "with role \"", role, "\"");
    return i;
  };
  auto arg = [&](int i) -> const ManifestArgument & {
    return m.arguments()[i];
  };
  auto constDim = [&](const ManifestArgument &a, size_t d) -> int64_t {
    if (d >= a.shape.size() || a.shape[d].isSymbol())
      throwInvalidArgument(fn, ": argument \"", a.name, "\" has shape ",
                           shapeString(a.shape), "; expected a constant ",
                           "dimension ", d);
    return a.shape[d].value;
  };
  int layers = 0;
  for (size_t i = 0; i < m.arguments().size(); ++i)
    layers += m.argumentRole(static_cast<int>(i)) == contract::role::kQKVWeight;
  if (layers > 1)
    throwUnsupported(fn, " has ", layers, " qkv weights (", layers,
                     " layers); only a single layer's front half is "
                     "supported here");
  sig.x = need(contract::role::kInput);
  sig.residual = m.argumentWithRole(contract::role::kResidual);
  sig.normWeight = need(contract::role::kNormWeight);
  sig.normBias = m.argumentWithRole(contract::role::kNormBias);
  sig.qkvWeight = need(contract::role::kQKVWeight);
  sig.qkvBias = m.argumentWithRole(contract::role::kQKVBias);
  sig.positions = need(contract::role::kPositions);
  sig.seqLens = need(contract::role::kSeqLens);
  sig.blockTable = need(contract::role::kBlockTable);
  sig.keyCache = need(contract::role::kKeyCache);
  sig.valueCache = need(contract::role::kValueCache);
  sig.output = m.resultWithRole(contract::role::kOutput);
  if (sig.output < 0)
    throwInvalidArgument(fn, " is not a decode-layer front half: no result ",
                         "with role \"output\" (attention output)");
  sig.residualOut = m.resultWithRole(contract::role::kResidualOut);

  const ManifestArgument &x = arg(sig.x);
  if (x.dtype == ElemType::F16)
    sig.dtype = DType::F16;
  else if (x.dtype == ElemType::BF16)
    sig.dtype = DType::BF16;
  else
    throwInvalidArgument(fn, ": activation \"", x.name, "\" is ",
                         elemTypeName(x.dtype), ", expected f16 or bf16");
  if (x.shape.size() != 2)
    throwInvalidArgument(fn, ": activation \"", x.name, "\" has shape ",
                         shapeString(x.shape), ", expected [batch, hidden]");
  sig.hidden = constDim(x, 1);
  const ManifestArgument &kc = arg(sig.keyCache);
  if (kc.shape.size() != 4)
    throwInvalidArgument(fn, ": key cache \"", kc.name, "\" has shape ",
                         shapeString(kc.shape),
                         ", expected [num_pages, page_size, Hkv, D]");
  sig.pageSize = constDim(kc, 1);
  sig.dims.numKVHeads = constDim(kc, 2);
  sig.dims.headDim = constDim(kc, 3);
  const ManifestResult &o = m.results()[sig.output];
  if (o.shape.size() != 3 || o.shape[1].isSymbol() || o.shape[2].isSymbol() ||
      o.shape[2].value != sig.dims.headDim)
    throwInvalidArgument(fn, ": attention output has shape ",
                         shapeString(o.shape), ", expected [batch, Hq, ",
                         sig.dims.headDim, "]");
  sig.dims.numQHeads = o.shape[1].value;
  const ManifestArgument &w = arg(sig.qkvWeight);
  if (w.shape.size() != 2 || constDim(w, 0) != sig.dims.qkvRows() ||
      constDim(w, 1) != sig.hidden)
    throwInvalidArgument(fn, ": qkv weight \"", w.name, "\" has shape ",
                         shapeString(w.shape), ", expected [",
                         sig.dims.qkvRows(), ", ", sig.hidden, "] for ",
                         sig.dims.numQHeads, "/", sig.dims.numKVHeads,
                         " heads of ", sig.dims.headDim);
  const ManifestArgument &nw = arg(sig.normWeight);
  if (nw.shape.size() != 1 || constDim(nw, 0) != sig.hidden)
    throwInvalidArgument(fn, ": norm weight \"", nw.name, "\" has shape ",
                         shapeString(nw.shape), ", expected [", sig.hidden,
                         "]");
  if (sig.qkvBias >= 0) {
    const ManifestArgument &b = arg(sig.qkvBias);
    if (b.shape.size() != 1 || constDim(b, 0) != sig.dims.qkvRows())
      throwInvalidArgument(fn, ": qkv bias \"", b.name, "\" has shape ",
                           shapeString(b.shape), ", expected [",
                           sig.dims.qkvRows(), "]");
  }
  if (sig.dims.numQHeads % sig.dims.numKVHeads != 0)
    throwInvalidArgument(fn, ": ", sig.dims.numQHeads,
                         " query heads are not a multiple of ",
                         sig.dims.numKVHeads, " KV heads");
  sig.reference = referenceFromOps(m, sig, fn);
  return sig;
}

} // namespace fusion::runtime
