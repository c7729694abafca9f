//===- TargetInfo.cpp - the GPU the kernels are emitted for ---------------===//

#include "TargetInfo.h"

#include "fusion/contract/Contract.h"

using namespace mlir::fusion;

int64_t TargetInfo::getMaxThreadsPerBlock() const {
  return ::fusion::contract::kMaxThreadsPerBlock;
}

int64_t TargetInfo::getMaxStaticSharedBytes() const {
  return ::fusion::contract::kMaxStaticSharedBytes;
}

int64_t TargetInfo::getMaxSharedBytesPerCTA() const {
  return ::fusion::contract::maxSharedBytesPerBlock(computeCapability);
}
