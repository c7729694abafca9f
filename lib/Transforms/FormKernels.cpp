//===- FormKernels.cpp - group fusion ops into fusion.kernel regions ------===//
//
// Implements --fusion-form-kernels. See Passes.td for the strategies and the
// legality rules; the numbers below refer to those rules.
//
//===----------------------------------------------------------------------===//

#include "fusion/Dialect/Fusion/IR/FusionOps.h"
#include "fusion/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::fusion {
#define GEN_PASS_DEF_FUSIONFORMKERNELSPASS
#include "fusion/Transforms/Passes.h.inc"
} // namespace mlir::fusion

using namespace mlir;
using namespace mlir::fusion;

namespace {

/// Whether `value` is available before `op` (a block argument, defined in
/// another block, or earlier in `op`'s block).
static bool isDefinedBefore(Value value, Operation *op) {
  Operation *def = value.getDefiningOp();
  return !def || def->getBlock() != op->getBlock() || def->isBeforeInBlock(op);
}

/// Rule 7: whether `embedding` may join the kernel of the norm it feeds: its
/// result the `input` (and not the residual) of the rmsnorm or layernorm
/// right after it, whose normalised result is the input of the qkv_proj or
/// linear right after the norm, with the other operands of both defined
/// before the embedding, so that rules 1, 4 and 5 put the three in one
/// group (no emitter takes an embedding with a norm alone).
static bool isFoldableEmbedding(EmbeddingOp embedding) {
  Value rows = embedding.getResult();
  Operation *norm = embedding->getNextNode();
  Value normInput, normed;
  if (auto rms = dyn_cast_or_null<RMSNormOp>(norm)) {
    if (rms.getResidual() == rows)
      return false;
    normInput = rms.getInput();
    normed = rms.getResult();
  } else if (auto layer = dyn_cast_or_null<LayerNormOp>(norm)) {
    normInput = layer.getInput();
    normed = layer.getResult();
  } else {
    return false;
  }
  Operation *projection = norm->getNextNode();
  Value projectionInput =
      llvm::TypeSwitch<Operation *, Value>(projection)
          .Case<QKVProjOp, LinearOp>([](auto op) { return op.getInput(); })
          .Default([](Operation *) { return Value(); });
  if (normInput != rows || !projectionInput || projectionInput != normed)
    return false;
  auto operandsBefore = [&](Operation *op, Value fromChain) {
    return llvm::all_of(op->getOperands(), [&](Value v) {
      return v == fromChain || isDefinedBefore(v, embedding);
    });
  };
  return operandsBefore(norm, rows) && operandsBefore(projection, normed);
}

/// Position of an op in a projection chain, the front half
/// [embedding ->] norm -> qkv_proj -> rope -> kv_append or a linear layer
/// [embedding | sum_partials ->] norm -> linear -> silu_mul | argmax, or in
/// the attention chain decode_attention -> linear_partials (rule 6);
/// std::nullopt for ops that never join a group (an embedding that rule 7
/// does not fold).
static std::optional<int> frontHalfStage(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<int>>(op)
      .Case<EmbeddingOp>([](EmbeddingOp embedding) -> std::optional<int> {
        if (!isFoldableEmbedding(embedding))
          return std::nullopt;
        return -2;
      })
      .Case<SumPartialsOp>([](auto) { return -1; })
      .Case<RMSNormOp, LayerNormOp, DecodeAttentionOp>([](auto) { return 0; })
      .Case<QKVProjOp, LinearOp, LinearPartialsOp>([](auto) { return 1; })
      .Case<RopeOp, SiluMulOp, ArgmaxOp>([](auto) { return 2; })
      .Case<KVAppendOp>([](auto) { return 3; })
      .Default([](Operation *) { return std::nullopt; });
}

/// The fusion operators the pass groups (not kernel/yield).
static bool isFusionCompute(Operation *op) {
  return isa<RMSNormOp, LayerNormOp, QKVProjOp, RopeOp, KVAppendOp,
             DecodeAttentionOp, LinearOp, LinearPartialsOp, SumPartialsOp,
             SiluMulOp, EmbeddingOp, ArgmaxOp>(op);
}

/// Rule 6: whether `linear` is an o_proj the attention kernel may project:
/// its input the only use of a decode_attention result, its only user the
/// input of an rmsnorm with a residual whose normalised result feeds one
/// linear, at most 8 query heads per KV head, W_o of at most `maxBytes`.
/// The four ops must follow each other, with W_o defined before the
/// attention and the norm's and the next linear's other operands before
/// o_proj, so that rules 1, 4 and 5 put linear_partials in the attention's
/// kernel and sum_partials in the norm's (no emitter takes either alone).
static bool isFoldableOProj(LinearOp linear, int64_t maxBytes) {
  auto attention = linear.getInput().getDefiningOp<DecodeAttentionOp>();
  if (!attention || !attention.getResult().hasOneUse() ||
      !linear.getResult().hasOneUse())
    return false;
  auto norm = dyn_cast<RMSNormOp>(*linear.getResult().getUsers().begin());
  if (!norm || norm.getInput() != linear.getResult() || !norm.getResidual() ||
      !norm.getResult().hasOneUse())
    return false;
  auto next = dyn_cast<LinearOp>(*norm.getResult().getUsers().begin());
  if (!next || attention->getNextNode() != linear ||
      linear->getNextNode() != norm || norm->getNextNode() != next ||
      !isDefinedBefore(linear.getWeight(), attention) ||
      !isDefinedBefore(norm.getWeight(), linear) ||
      !isDefinedBefore(norm.getResidual(), linear) ||
      !isDefinedBefore(next.getWeight(), linear))
    return false;
  auto query = attention.getQuery().getType();
  int64_t numKvHeads = attention.getKeyCache().getType().getDimSize(2);
  if (query.getDimSize(1) / numKvHeads > 8)
    return false;
  auto weight = linear.getWeight().getType();
  int64_t bytes = weight.getNumElements() *
                  weight.getElementType().getIntOrFloatBitWidth() / 8;
  return bytes <= maxBytes;
}

/// Rule 6: rewrites the foldable o_proj linears of `block` into
/// sum_partials(linear_partials(attention, W_o)), one partial per KV head.
static void splitOutputProjections(Block &block, int64_t maxBytes) {
  SmallVector<LinearOp> linears;
  for (Operation &op : block)
    if (auto linear = dyn_cast<LinearOp>(op))
      if (isFoldableOProj(linear, maxBytes))
        linears.push_back(linear);
  for (LinearOp linear : linears) {
    auto attention = linear.getInput().getDefiningOp<DecodeAttentionOp>();
    auto input = attention.getQuery().getType();
    auto result = linear.getResult().getType();
    int64_t numKvHeads = attention.getKeyCache().getType().getDimSize(2);
    auto partialsType = RankedTensorType::get(
        {input.getDimSize(0), numKvHeads, result.getDimSize(1)},
        Float32Type::get(linear.getContext()));
    OpBuilder builder(linear);
    auto partials =
        LinearPartialsOp::create(builder, linear.getLoc(), partialsType,
                                 linear.getInput(), linear.getWeight());
    auto sum = SumPartialsOp::create(builder, linear.getLoc(), result,
                                     partials.getResult());
    linear.getResult().replaceAllUsesWith(sum.getResult());
    linear.erase();
  }
}

/// Whether `value` is a normalised activation (the `result` of a norm),
/// cheap enough to recompute inside a group when it also has other users.
static bool isRecomputableNormResult(Value value) {
  Operation *def = value.getDefiningOp();
  if (auto norm = dyn_cast_or_null<RMSNormOp>(def))
    return value == norm.getResult();
  if (auto norm = dyn_cast_or_null<LayerNormOp>(def))
    return value == norm.getResult();
  return false;
}

/// Whether `value` is logits (a linear's result) that the group's argmax
/// reads: the kernel writes them anyway, so other users outside the group
/// read them as a kernel result and the group is not cut.
static bool
isLogitsOfArgmax(Value value,
                 const llvm::SmallPtrSetImpl<Operation *> &members) {
  return isa_and_nonnull<LinearOp>(value.getDefiningOp()) &&
         llvm::all_of(value.getUsers(), [&](Operation *u) {
           return !members.contains(u) || isa<ArgmaxOp>(u);
         });
}

/// Forms the kernels of one block.
class KernelFormer {
public:
  KernelFormer(FusionStrategy strategy, StringRef prefix, unsigned firstIndex)
      : strategy(strategy), prefix(prefix), nextIndex(firstIndex) {}

  void runOnBlock(Block &block) {
    // Snapshot: kernel creation rewrites the block while we walk it.
    SmallVector<Operation *> ops = llvm::map_to_vector(
        block.without_terminator(), [](Operation &op) { return &op; });
    SmallVector<Operation *> group;
    for (Operation *op : ops) {
      if (!isFusionCompute(op)) {
        // Rule 5: a side-effecting op that cannot join ends the group.
        if (!isMemoryEffectFree(op))
          flush(group);
        continue;
      }
      if (strategy == FusionStrategy::decode && !group.empty() &&
          canJoin(group, op)) {
        group.push_back(op);
        continue;
      }
      flush(group);
      group.push_back(op);
      if (strategy == FusionStrategy::none || !frontHalfStage(op))
        flush(group);
    }
    flush(group);
  }

private:
  /// Rules 1 and 4: may `op` join the front-half `group`?
  bool canJoin(ArrayRef<Operation *> group, Operation *op) {
    std::optional<int> stage = frontHalfStage(op);
    if (!stage || *stage <= *frontHalfStage(group.back()))
      return false;
    auto inGroup = [&](Value v) {
      Operation *def = v.getDefiningOp();
      return def && llvm::is_contained(group, def);
    };
    // Rule 1: the op consumes a group value along a chain edge.
    bool chainEdge =
        llvm::TypeSwitch<Operation *, bool>(op)
            .Case<QKVProjOp, LinearOp>([&](auto proj) {
              return inGroup(proj.getInput()) &&
                     isRecomputableNormResult(proj.getInput());
            })
            .Case<SiluMulOp>([&](SiluMulOp silu) {
              return isa_and_nonnull<LinearOp>(
                         silu.getInput().getDefiningOp()) &&
                     inGroup(silu.getInput());
            })
            .Case<ArgmaxOp>([&](ArgmaxOp argmax) {
              return isa_and_nonnull<LinearOp>(
                         argmax.getLogits().getDefiningOp()) &&
                     inGroup(argmax.getLogits());
            })
            .Case<RopeOp>([&](RopeOp rope) {
              return isa_and_nonnull<QKVProjOp>(
                         rope.getQuery().getDefiningOp()) &&
                     inGroup(rope.getQuery());
            })
            .Case<KVAppendOp>([&](KVAppendOp append) {
              return inGroup(append.getKey()) || inGroup(append.getValue());
            })
            .Case<LinearPartialsOp>([&](LinearPartialsOp partials) {
              return isa_and_nonnull<DecodeAttentionOp>(
                         partials.getInput().getDefiningOp()) &&
                     inGroup(partials.getInput());
            })
            .Case<RMSNormOp, LayerNormOp>([&](auto norm) {
              // Rule 6 (sum_partials, rmsnorm only) and rule 7 (embedding).
              Operation *def = norm.getInput().getDefiningOp();
              bool producer = isa_and_nonnull<EmbeddingOp>(def) ||
                              (isa<RMSNormOp>(norm.getOperation()) &&
                               isa_and_nonnull<SumPartialsOp>(def));
              return producer && inGroup(norm.getInput());
            })
            .Default([](Operation *) { return false; });
    if (!chainEdge)
      return false;
    // Rule 4: every other operand is available before the group starts, so
    // the kernel can sit at the group's first op without forming a cycle.
    Operation *front = group.front();
    return llvm::all_of(op->getOperands(), [&](Value v) {
      return inGroup(v) || isDefinedBefore(v, front);
    });
  }

  /// Rule 2, then kernel creation. A value produced and consumed inside the
  /// group but also used outside it is recomputed when it is a normalised
  /// activation (the norm stays outside as its own kernel for those users
  /// and a copy joins the group), and is a kernel result when it is the
  /// logits of the group's argmax; otherwise the group is cut before the
  /// first member that consumes it and the rest is grouped again. A folded
  /// embedding's rows (rule 7) are neither: they become a kernel result.
  void flush(SmallVectorImpl<Operation *> &group) {
    if (group.empty())
      return;
    SmallVector<Operation *> members(group.begin(), group.end());
    group.clear();

    llvm::SmallPtrSet<Operation *, 8> memberSet(members.begin(), members.end());
    SmallVector<Operation *> recomputed;
    for (Operation *member : members) {
      if (isa<EmbeddingOp>(member))
        continue;
      for (Value result : member->getResults()) {
        auto users = result.getUsers();
        auto inside = llvm::find_if(members, [&](Operation *m) {
          return llvm::is_contained(users, m);
        });
        bool usedOutside = llvm::any_of(
            users, [&](Operation *u) { return !memberSet.contains(u); });
        if (inside == members.end() || !usedOutside ||
            isLogitsOfArgmax(result, memberSet))
          continue;
        if (isRecomputableNormResult(result)) {
          recomputed.push_back(member);
          continue;
        }
        // Leave unfused: cut before the first consumer.
        SmallVector<Operation *> head(members.begin(), inside);
        SmallVector<Operation *> tail(inside, members.end());
        flush(head);
        regroup(tail);
        return;
      }
    }
    createKernel(members, recomputed);
    for (Operation *norm : recomputed) {
      SmallVector<Operation *> alone{norm};
      createKernel(alone, {});
    }
  }

  /// Greedily groups `ops` (a former group's tail) again.
  void regroup(ArrayRef<Operation *> ops) {
    SmallVector<Operation *> group;
    for (Operation *op : ops) {
      if (!group.empty() && canJoin(group, op)) {
        group.push_back(op);
        continue;
      }
      flush(group);
      group.push_back(op);
    }
    flush(group);
  }

  /// Replaces `members` with one fusion.kernel at the first member's place.
  /// Members listed in `recomputed` are copied into the kernel and kept
  /// outside for their other users (which makes them users outside the
  /// kernel of what they take from it, e.g. a folded embedding's rows).
  void createKernel(ArrayRef<Operation *> members,
                    ArrayRef<Operation *> recomputed) {
    llvm::SmallPtrSet<Operation *, 8> memberSet(members.begin(), members.end());
    auto outside = [&](Operation *user) {
      return !memberSet.contains(user) || llvm::is_contained(recomputed, user);
    };
    llvm::SetVector<Value> inputs;
    for (Operation *member : members)
      for (Value operand : member->getOperands())
        if (!memberSet.contains(operand.getDefiningOp()))
          inputs.insert(operand);
    SmallVector<Value> outputs;
    for (Operation *member : members) {
      if (llvm::is_contained(recomputed, member))
        continue;
      for (Value result : member->getResults())
        if (llvm::any_of(result.getUsers(), outside))
          outputs.push_back(result);
    }

    Operation *front = members.front();
    OpBuilder builder(front);
    std::string name = (prefix + "_k" + Twine(nextIndex++)).str();
    if (members.size() == 1)
      name += "_" + front->getName().stripDialect().str();
    else
      name += "_fused";
    auto kernel = KernelOp::create(
        builder, front->getLoc(), ValueRange(outputs).getTypes(),
        inputs.getArrayRef(), builder.getStringAttr(name),
        FusionStrategyAttr::get(builder.getContext(), strategy),
        /*schedule=*/ScheduleAttrInterface(), /*launch=*/LaunchAttr());
    Block *body = builder.createBlock(&kernel.getBody());
    IRMapping mapping;
    for (Value input : inputs)
      mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
    for (Operation *member : members)
      builder.clone(*member, mapping);
    YieldOp::create(builder, kernel.getLoc(),
                    llvm::map_to_vector(
                        outputs, [&](Value v) { return mapping.lookup(v); }));

    for (auto [output, result] : llvm::zip(outputs, kernel.getResults()))
      output.replaceUsesWithIf(
          result, [&](OpOperand &use) { return outside(use.getOwner()); });
    for (Operation *member : llvm::reverse(members)) {
      if (llvm::is_contained(recomputed, member))
        continue;
      member->dropAllUses();
      member->erase();
    }
  }

  FusionStrategy strategy;
  std::string prefix;
  unsigned nextIndex;
};

struct FusionFormKernelsPass
    : mlir::fusion::impl::FusionFormKernelsPassBase<FusionFormKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    // Collect blocks first: forming kernels adds regions we must not visit.
    llvm::SetVector<Block *> blocks;
    getOperation().walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<KernelOp>(op))
        return WalkResult::skip();
      if (isFusionCompute(op))
        blocks.insert(op->getBlock());
      return WalkResult::advance();
    });
    for (Block *block : blocks) {
      // Kernels are named after the enclosing symbol (usually the function).
      Operation *symbolOwner =
          block->getParentOp()->getParentWithTrait<OpTrait::SymbolTable>();
      Operation *named = block->getParentOp();
      while (named->getParentOp() != symbolOwner)
        named = named->getParentOp();
      StringRef prefix = "kernel";
      if (auto sym = named->getAttrOfType<StringAttr>(
              SymbolTable::getSymbolAttrName()))
        prefix = sym.getValue();
      if (!isValidKernelName(prefix)) {
        named->emitOpError()
            << "name \"" << prefix
            << "\" cannot prefix the names of its fusion.kernel ops (PTX "
               "entries <name>_k<N>_...): expected "
            << describeKernelNameRule();
        signalPassFailure();
        continue;
      }
      // Continue numbering after kernels formed by an earlier run.
      unsigned existing = 0;
      named->walk([&](KernelOp) { ++existing; });
      if (strategy == FusionStrategy::decode && oProjPartialsMaxBytes > 0)
        splitOutputProjections(*block, oProjPartialsMaxBytes);
      KernelFormer(strategy, prefix, existing).runOnBlock(*block);
    }
  }
};

} // namespace
