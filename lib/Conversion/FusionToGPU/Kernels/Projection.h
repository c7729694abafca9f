//===- Projection.h - projection kernels, shared ----------------*- C++ -*-===//
//
// What the CUDA-core projection kernel (ProjectionKernel.cpp) and its
// tensor-core batch variants (ProjectionMmaKernel.cpp,
// ProjectionGemmKernel.cpp) share: the analysed ops, the plan bound to a
// gpu.func's arguments, the mapping of output row pairs to weight rows, and
// the epilogue that finishes a pair (bias, RoPE, the stores of q/k/v and of
// the KV-cache entries; or the SwiGLU activation).
//
// Two chains are projections: the front half
//   [embedding ->] [rmsnorm | layernorm] -> qkv_proj -> [rope] -> [kv_append]
// and a linear layer of the back half
//   [embedding | sum_partials ->] [rmsnorm | layernorm] -> linear -> [silu_mul]
// (o_proj, gate/up with SiLU(gate) * up in the epilogue, down_proj, the LM
// head). A linear layer is planned as a projection whose "heads" are its
// output row pairs: without silu_mul, N / 2 heads of 2 rows (pair p = rows
// 2p, 2p + 1, stored at [token, 2p]); with silu_mul, one head of the 2I
// packed [gate | up] rows whose pair j is (j, I + j), the pairing of NeoX
// RoPE over a whole head, finished as round(silu(g) * u) at [token, j].
// With an embedding (layer 0 of a whole model: --fusion-form-kernels rule
// 7) the norm reads its x rows from the table, row clamp(tokens[t], 0,
// V - 1) for token t (NormSpec::table), and writes them where the kernel
// yields the embedding.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_KERNELS_PROJECTION_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_KERNELS_PROJECTION_H

#include "../Fragments/Abi.h"
#include "../Fragments/Norm.h"
#include "../Fragments/PagedKV.h"
#include "../Schedule/ProjectionSchedule.h"

namespace mlir::fusion {

/// The ops of a projection kernel body: a norm (with the embedding or
/// sum_partials that makes its input), then qkv_proj (with rope, kv_append)
/// or linear (with silu_mul).
struct FrontHalf {
  EmbeddingOp embedding;
  SumPartialsOp sum;
  RMSNormOp rms;
  LayerNormOp layer;
  QKVProjOp qkv;
  RopeOp rope;
  KVAppendOp append;
  LinearOp linear;
  SiluMulOp siluMul;
  ArgmaxOp argmax;
};

/// Everything the body builders need, resolved to gpu.func values.
struct ProjectionPlan {
  FrontHalf ops;
  Type act;
  int64_t hidden = 0, hq = 0, hkv = 0, headDim = 0, rows = 0, pairs = 0;
  int64_t rotaryDim = 0;
  bool neox = true;
  PagedKVLayout cache;
  NormSpec norm;
  Value weight, bias;
  Value ropePositions, invFreq;
  // Destinations: raw projection outputs, rotated outputs, caches.
  Value qRaw, kRaw, vRaw, qRot, kRot;
  Value keyCache, valueCache, blockTable, appendPositions, maxPages;
  bool appendKeyRotated = false;
  /// A linear + silu_mul kernel: pair j is rows (j, I + j) and the
  /// epilogue stores round(silu(g) * u) to `siluOut` ([B, I]).
  bool gateUp = false;
  Value siluOut;
  /// The batch (index), and the i32 scalar argument it comes from (usable
  /// before griddepcontrol.wait).
  Value batch, batchArg;
  /// A linear + argmax kernel (ProjectionArgmax.cpp): the ids ([B] i32), the
  /// argmax_keys workspace (`!llvm.ptr<1>`), the arrival counter, and this
  /// function's shared slots (i64 [argmaxTile], one per token of a tile) and
  /// last-CTA flag; argmaxThreads is the block size.
  Value tokensOut, argmaxGlobalKeys, argmaxArrivals, argmaxKeys, argmaxLast;
  int64_t argmaxTile = 0, argmaxThreads = 0;
};

/// Finds the front-half ops of `kernel` and checks they form the chain the
/// kernels implement, then fills the static part of a plan (shapes, RoPE
/// pairing, cache layout) and checks the shapes the schedules support.
FailureOr<ProjectionPlan> analyseProjection(KernelOp kernel,
                                            const TargetInfo &target);

/// The shape the projection schedules take.
ProjectionShape getProjectionShape(const ProjectionPlan &p);

/// The shape the GEMM-shaped variant's schedules take (its norm is
/// `Other` for a LayerNorm and for an RMSNorm whose output the kernel
/// yields).
ProjectionGemmShape getProjectionGemmShape(const ProjectionPlan &p);

/// Creates the gpu.func `entry` with `launch`'s parameters and `blockSize`
/// threads and binds `p` to its arguments (RoPE table: that of the primary
/// entry, shared by its variants); `b` is left in its body. `tileTokens` is
/// the token tile of the function's forEachTokenTile (the argmax slots).
FailureOr<gpu::GPUFuncOp> createProjectionFunc(
    ImplicitLocOpBuilder &b, ProjectionPlan &p, KernelOp kernel,
    gpu::GPUModuleOp module, const KernelLaunch &launch, StringRef entry,
    int64_t blockSize, int64_t tileTokens, const TargetInfo &target);

/// The two weight rows of output pair `pair` and their offsets `da`, `db`
/// inside the head: a RoPE pair (j, j + rd/2) (neox) or (2j, 2j+1) (gptj),
/// otherwise two adjacent rows.
struct PairRows {
  Value head, j, rotated, da, db, rowA, rowB;
  /// The pair's RoPE inverse frequency (loadRopeInvFreq), null without RoPE.
  Value invFreq;
};
PairRows getPairRows(ImplicitLocOpBuilder &b, const ProjectionPlan &p,
                     Value pair);

/// What the epilogue needs of one token, loaded before the dot products so
/// that these loads overlap the weight stream.
struct TokenInputs {
  Value token;
  Value ropePosition; ///< null without rope
  Value cacheSlot;    ///< page * page_size + slot of the new KV entry, or null
};
TokenInputs loadTokenInputs(ImplicitLocOpBuilder &b, const ProjectionPlan &p,
                            Value token);

/// Finishes output pair `rows` of one token from its fp32 dot products:
/// + bias, round (the projection's outputs), RoPE, then the stores of q / k
/// / v and of the new KV-cache entries.
void emitPairEpilogue(ImplicitLocOpBuilder &b, const ProjectionPlan &p,
                      const PairRows &rows, const TokenInputs &in, Value sumA,
                      Value sumB);

/// `for tileStart in [0, p.batch) step tile`: calls `body` with the tile's
/// first token and its token count (min(tile, batch - tileStart)) after a
/// barrier, so that the previous tile's readers are done with the shared
/// rows the body overwrites. With an argmax (p.tokensOut) each tile's slots
/// are then published and, after the last tile, the last CTA writes the
/// ids. Every thread of the CTA calls it.
void forEachTokenTile(
    ImplicitLocOpBuilder &b, const ProjectionPlan &p, int64_t tile,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, Value)> body);

/// Adds the argmax workspaces (argmax_keys [batch, 2] i32 and
/// argmax_arrivals [batch] i32, of which element 0 counts; both zero_init)
/// after the other workspaces.
void appendArgmaxWorkspaces(SmallVectorImpl<KernelParam> &params,
                            MLIRContext *context);

/// Binds the argmax workspaces of `args` to `p` and gives the function its
/// shared slots (zeroed here, by `blockSize` threads) for tiles of
/// `tileTokens` tokens.
void bindProjectionArgmax(ImplicitLocOpBuilder &b, ProjectionPlan &p,
                          gpu::GPUFuncOp func, const KernelArgs &args,
                          int64_t tileTokens, int64_t blockSize);

/// Offers output columns rows.rowA / rows.rowB of `token` with the rounded
/// logits `rawA` / `rawB` to the token's argmax slot (atomic max of their
/// packed keys).
void emitArgmaxCandidates(ImplicitLocOpBuilder &b, const ProjectionPlan &p,
                          const PairRows &rows, Value token, Value rawA,
                          Value rawB);

/// After a token tile: publishes the slots of tokens [tileStart, +count)
/// (red.global.max.u64) and zeroes them.
void publishArgmaxTile(ImplicitLocOpBuilder &b, const ProjectionPlan &p,
                       Value tileStart, Value count);

/// After the last tile: fence, arrival; the last CTA decodes every token's
/// key into its id and zeroes the keys.
void finishArgmax(ImplicitLocOpBuilder &b, const ProjectionPlan &p);

/// The 16-byte vectors of weight rows `wA` and `wB` (element offsets of this
/// lane's first elements) at `offsets` past them, row A then row B for each:
/// independent loads, all in flight at once.
SmallVector<Value> loadRowPairVectors(ImplicitLocOpBuilder &b, Value weight,
                                      Value wA, Value wB,
                                      ArrayRef<Value> offsets);

/// A software-pipelined `scf.for k = begin to end step step` carrying
/// `numAcc` f32 accumulators (from zero) and the weight vectors of one step:
/// step k + step's vectors (`loadStep`, at most `last`: the last step
/// reloads itself, an L1 hit, instead of branching) are loaded before
/// `compute` consumes step k's. Returns the final accumulators.
SmallVector<Value> emitPipelinedLoop(
    ImplicitLocOpBuilder &b, Value begin, Value end, int64_t step,
    llvm::function_ref<Value(ImplicitLocOpBuilder &)> last, int64_t numAcc,
    llvm::function_ref<SmallVector<Value>(ImplicitLocOpBuilder &, Value)>
        loadStep,
    llvm::function_ref<void(ImplicitLocOpBuilder &, Value, ArrayRef<Value>,
                            SmallVector<Value> &)>
        compute);

/// Adds the tensor-core variant of a projection kernel with schedule `s`
/// to `launch` (ProjectionMmaKernel.cpp).
LogicalResult emitProjectionMmaVariant(KernelOp kernel, gpu::GPUModuleOp module,
                                       ProjectionPlan p,
                                       const ProjectionMmaSchedule &s,
                                       KernelLaunch &launch,
                                       const TargetInfo &target);

/// Inserts the GEMM-shaped variants' workspaces (schedules `variants`,
/// `rows` weight rows; kSplit the largest of theirs) before the scalars of
/// `params`: partial_out [batch, kSplit, rows] (f32), with an RMSNorm
/// partial_stats [batch, rowTiles * kSplit] (f32: per-token partial sums of
/// h^2), and split_counters [batch, rowTiles] (i32, zero before the first
/// launch; the kernel leaves it zero). Every GEMM variant of a kernel takes
/// the same (a variant of a smaller k split uses a prefix of each).
void appendProjectionGemmWorkspaces(SmallVector<KernelParam> &params,
                                    ArrayRef<ProjectionGemmSchedule> variants,
                                    int64_t rows, bool rmsNorm,
                                    MLIRContext *context);

/// Appends (before the scalars) the weight_map tensor map of the GEMM
/// variants with tmaWeights: the TMA descriptor of the input parameter of
/// the projection's weight (of `p.ops`'s qkv_proj or linear, not another
/// `weight` such as an embedding table; nothing where the weight is not a
/// kernel operand, which createProjectionFunc reports), boxes of stageK
/// columns by tileRows rows (tileRows / 2 for gate/up, whose tiles hold the
/// gate rows and the up rows of their pairs). Every GEMM variant of a kernel
/// takes the same.
void appendProjectionWeightMap(SmallVector<KernelParam> &params,
                               const ProjectionGemmSchedule &s,
                               const ProjectionPlan &p);

/// Appends (before the scalars) the input_map and, with a residual, the
/// residual_map tensor maps that the warp-specialised GEMM variants of a
/// kernel share: the TMA descriptors of the RMSNorm's x and residual input
/// parameters ([batch, hidden]), boxes of `s.stageK` columns by
/// kTokenBoxRows rows (docs/abi.md section 3.3).
void appendProjectionActivationMaps(SmallVector<KernelParam> &params,
                                    const ProjectionGemmSchedule &s,
                                    const ProjectionPlan &p);

/// Adds the GEMM-shaped variant of a projection kernel with schedule `s` to
/// `launch`, whose params hold its workspaces (ProjectionGemmKernel.cpp).
LogicalResult
emitProjectionGemmVariant(KernelOp kernel, gpu::GPUModuleOp module,
                          ProjectionPlan p, const ProjectionGemmSchedule &s,
                          KernelLaunch &launch, const TargetInfo &target);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_KERNELS_PROJECTION_H
