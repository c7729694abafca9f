//===- CudaTest.cpp - CUDA driver wrappers, DecodeStep on a GPU -----------===//
//
// These tests need a CUDA device; without one (no libcuda.so.1, no device)
// each reports itself skipped. The DecodeStep tests launch the kernels of
// test/data/tiny_decode.ptx, fusion-compile's output for
// test/data/tiny_decode.mlir (test/Target/runtime-fixture.mlir keeps them
// equal), on zeroed arguments and valid step inputs: they check the
// runtime's mechanics (JIT load, binding, launches of the kernels and their
// batch variants, programmatic dependent launch, graph capture and replay,
// errors), not the math (fusion-run and the runtime.gpu.example tests check
// that).
//
//===----------------------------------------------------------------------===//

#include "fusion/runtime/Cuda.h"
#include "fusion/runtime/DecodeStep.h"
#include "fusion/runtime/Error.h"
#include "fusion/runtime/Manifest.h"

#include "GpuTest.h"
#include "TestUtil.h"
#include "TinyStep.h"

#include <algorithm>

using namespace fusion::runtime;
using namespace fusion::runtime::test;

TEST(CudaDriver, UnavailableDeviceIsADeviceUnavailableError) {
  // Either there is a device, or opening it says clearly why not.
  try {
    cuda::Context ctx = cuda::Context::open(0);
    std::string msg =
        EXPECT_THROW_MSG(DeviceUnavailableError, cuda::Context::open(4096));
    EXPECT_CONTAINS(msg, "no CUDA device 4096");
  } catch (const DeviceUnavailableError &e) {
    std::string msg = e.what();
    EXPECT_CONTAINS(msg, "no CUDA");
    // Every later call reports the same.
    std::string again =
        EXPECT_THROW_MSG(DeviceUnavailableError, cuda::initialize());
    EXPECT_EQ(again, msg);
  }
}

TEST_F(Gpu, ContextAndBuffers) {
  EXPECT_FALSE(ctx().name().empty());
  EXPECT_GE(ctx().computeCapability().first, 7);
  EXPECT_GT(ctx().multiprocessorCount(), 0);
  EXPECT_GT(cuda::Context::driverVersion(), 0);

  cuda::DeviceBuffer buf(1024, "test buffer");
  std::vector<uint8_t> in(1024), out(1024);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<uint8_t>(i * 7);
  buf.upload(in.data(), in.size());
  buf.download(out.data(), out.size());
  EXPECT_EQ(in, out);
  buf.fill(0xAB, nullptr, 16);
  buf.download(out.data(), 32);
  EXPECT_EQ(out[0], 0xAB);
  EXPECT_EQ(out[15], 0xAB);
  EXPECT_EQ(out[16], in[16]);
  std::string msg =
      EXPECT_THROW_MSG(InvalidArgumentError, buf.upload(in.data(), 16, 1020));
  EXPECT_CONTAINS(msg, "16 bytes at offset 1020 exceed buffer \"test buffer\" "
                       "of 1024 bytes");

  // Device-to-device copies, stream-ordered; the source must fit.
  cuda::Stream stream = cuda::Stream::create();
  cuda::DeviceBuffer copy(2048, "copy");
  copy.fill(0x5A);
  copy.copyFrom(buf, stream.get());
  stream.synchronize();
  std::vector<uint8_t> copied(2048);
  copy.download(copied.data(), copied.size());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), copied.begin()));
  EXPECT_EQ(copied[1024], 0x5A);
  msg =
      EXPECT_THROW_MSG(InvalidArgumentError, buf.copyFrom(copy, stream.get()));
  EXPECT_CONTAINS(msg, "DeviceBuffer::copyFrom: 2048 bytes at offset 0 exceed "
                       "buffer \"test buffer\" of 1024 bytes");
  // A range of device memory to an offset, as Engine::generate collects
  // each step's tokens (`out` holds buf[0, 32) after the fill).
  copy.copyFrom(buf.get() + 8, 16, "bytes 8..24", stream.get(), 2000);
  stream.synchronize();
  copy.download(copied.data(), copied.size());
  EXPECT_TRUE(
      std::equal(out.begin() + 8, out.begin() + 24, copied.begin() + 2000));
  EXPECT_EQ(copied[1999], 0x5A);
  msg = EXPECT_THROW_MSG(InvalidArgumentError,
                         copy.copyFrom(buf.get(), 16, "x", nullptr, 2040));
  EXPECT_CONTAINS(msg, "16 bytes at offset 2040 exceed buffer \"copy\"");

  // Page-locked host memory: zeroed, and a source of async uploads.
  cuda::PinnedHostBuffer pinned(64, "pinned");
  ASSERT_EQ(pinned.bytes(), 64u);
  auto *bytes = static_cast<uint8_t *>(pinned.data());
  EXPECT_EQ(std::count(bytes, bytes + 64, 0), 64);
  std::fill(bytes, bytes + 64, 0x11);
  buf.uploadAsync(pinned.data(), 64, stream.get(), 100);
  stream.synchronize();
  buf.download(out.data(), out.size());
  EXPECT_EQ(out[100], 0x11);
  EXPECT_EQ(out[163], 0x11);
  EXPECT_EQ(out[164], in[164]);
}

TEST_F(Gpu, BadPtxReportsTheJitLog) {
  std::string ptx = ".version 8.0\n.target sm_90\n.address_size 64\n"
                    ".visible .entry broken()\n{\n  this is not ptx;\n}\n";
  try {
    cuda::Module::loadPtx(ptx, "broken.ptx");
    ADD_FAILURE() << "expected a CudaError";
  } catch (const CudaError &e) {
    std::string msg = e.what();
    EXPECT_CONTAINS(msg, "cuModuleLoadDataEx(broken.ptx");
    EXPECT_CONTAINS(msg, "CUDA_ERROR_INVALID_PTX");
    EXPECT_CONTAINS(msg, "JIT error log");
    EXPECT_EQ(e.errorName(), "CUDA_ERROR_INVALID_PTX");
  }
}

TEST_F(Gpu, MissingEntryNamesIt) {
  cuda::Module m =
      cuda::Module::loadPtx(readText(dataPath("tiny_decode.ptx")), "tiny.ptx");
  std::string msg = EXPECT_THROW_MSG(CudaError, m.function("nope"));
  EXPECT_CONTAINS(msg, "cuModuleGetFunction(nope in tiny.ptx)");
  EXPECT_CONTAINS(msg, "CUDA_ERROR_NOT_FOUND");
}

TEST_F(Gpu, DecodeStepLaunchesAndReplaysGraphs) {
  Model model = Model::load(dataPath("tiny_decode.manifest.json"));
  std::string ptx = readText(dataPath("tiny_decode.ptx"));
  Capacity cap{4, 8, 32};
  DecodeStep step(ctx(), model, ptx, "tiny.ptx", cap);
  // Steps of block tables of 3 pages; batch 2 and 3 launch kernel 0's
  // tensor-core variant (min_batch 2).
  std::vector<cuda::DeviceBuffer> args = tinyArguments(ctx(), step, 3);

  // Unbound arguments are reported before anything is launched.
  std::string msg =
      EXPECT_THROW_MSG(InvalidArgumentError,
                       step.run(StepShape{1, 1, 1}, TinyInputs(1, 1).view()));
  EXPECT_CONTAINS(msg, "unbound arguments: x, residual");
  for (size_t i = 0; i < args.size(); ++i)
    step.bind(static_cast<int>(i), args[i]);
  cuda::DeviceBuffer small(16, "small");
  msg = EXPECT_THROW_MSG(InvalidArgumentError, step.bind("x", small));
  EXPECT_CONTAINS(msg, "needs 512 bytes");

  // The internal buffers start at zero; poisoning fills outputs only.
  std::vector<uint16_t> host(4 * 4 * 16);
  step.downloadResult(0, StepShape{4, 1, 1}, host.data(), host.size() * 2);
  EXPECT_EQ(host[0], 0);
  step.poisonOutputs();
  step.synchronize();
  step.downloadResult(0, StepShape{4, 1, 1}, host.data(), host.size() * 2);
  EXPECT_EQ(host[0], 0xFFFF);
  std::vector<int32_t> counters(8, -1);
  const std::vector<InternalBuffer> &internal =
      step.plan().model().internalBuffers();
  auto counterBuffer = std::find_if(
      internal.begin(), internal.end(), [](const InternalBuffer &b) {
        return b.kernel == 1 && b.role == "split_counters";
      });
  ASSERT_NE(counterBuffer, internal.end());
  step.downloadInternal(static_cast<int>(counterBuffer - internal.begin()),
                        counters.data(), 32);
  EXPECT_EQ(counters[0], 0);

  step.run(StepShape{2, 3, 4}, TinyInputs(2, 3).view());
  step.synchronize();
  EXPECT_EQ(step.graphCaptures(), 0);
  step.runGraph(StepShape{2, 3, 4}, TinyInputs(2, 3).view());
  step.runGraph(StepShape{2, 3, 4}, TinyInputs(2, 3).view());
  EXPECT_EQ(step.graphCaptures(), 1);
  step.runGraph(StepShape{3, 3, 4},
                TinyInputs(3, 3).view()); // new batch: a new capture
  EXPECT_EQ(step.graphCaptures(), 2);
  step.runGraph(StepShape{2, 3, 4}, TinyInputs(2, 3).view()); // kept
  EXPECT_EQ(step.graphCaptures(), 2);
  // x bound to other memory: a graph of those addresses is captured; bound
  // back, the first one is replayed.
  cuda::DeviceBuffer otherX(args[0].bytes(), "other x");
  otherX.copyFrom(args[0], step.stream());
  step.bind("x", otherX);
  step.runGraph(StepShape{3, 3, 4}, TinyInputs(3, 3).view());
  EXPECT_EQ(step.graphCaptures(), 3);
  step.bind("x", args[0]);
  step.runGraph(StepShape{3, 3, 4}, TinyInputs(3, 3).view());
  EXPECT_EQ(step.graphCaptures(), 3);
  step.synchronize();

  msg = EXPECT_THROW_MSG(CapacityError, step.runGraph(StepShape{5, 3, 4},
                                                      TinyInputs(5, 3).view()));
  EXPECT_CONTAINS(msg, "batch 5 exceeds");
  msg =
      EXPECT_THROW_MSG(InvalidArgumentError,
                       step.run(StepShape{1, 1, 65}, TinyInputs(1, 1).view()));
  EXPECT_CONTAINS(msg, "num_splits 65 is outside [1, 64]");
  // A position past the block-table row: refused before any launch.
  TinyInputs past(1, 1);
  past.pos[0] = 4;
  msg = EXPECT_THROW_MSG(CapacityError,
                         step.run(StepShape{1, 1, 1}, past.view()));
  EXPECT_CONTAINS(msg, "sequence (row) 0: position 4 is past the 4 tokens");
  step.synchronize();
}

/// `m` with the fingerprint of `ptx`: the manifest of an edited PTX.
Manifest describing(Manifest m, std::string_view ptx) {
  m.ptxFingerprint = ptxFingerprintHex(ptx);
  return m;
}

TEST_F(Gpu, DecodeStepLaunchesVariantsWithLargeSharedMemory) {
  // From batch 2 kernel 0 runs as its GEMM-shaped variant
  // decode_layer_k0_fused_gemm16, with 65536 bytes of dynamic shared memory
  // (128 weight rows of 128 bytes by TMA + 33 rows of 144 = 21136 bytes,
  // 1 KiB-aligned slots of 21504, 3 stages + 1 KiB to align them): the
  // launch fails unless the function was opted in to more than 48 KiB.
  // Its split-K workspaces (the arrival counters zero before the first
  // launch and left zero) are the runtime's, across launches and graph
  // replays.
  Model model = Model::load(dataPath("tiny_decode.manifest.json"));
  ASSERT_EQ(model.kernels()[0]->variants.size(), 3u);
  EXPECT_EQ(model.kernels()[0]->variants[0].dynamicSharedBytes, 65536);
  std::string ptx = readText(dataPath("tiny_decode.ptx"));
  DecodeStep step(ctx(), model, ptx, "tiny_decode.ptx", Capacity{4, 8, 32});
  std::vector<cuda::DeviceBuffer> args = tinyArguments(ctx(), step, 3);
  for (size_t i = 0; i < args.size(); ++i)
    step.bind(static_cast<int>(i), args[i]);

  step.run(StepShape{1, 3, 4}, TinyInputs(1, 3).view()); // the primary entry
  step.run(StepShape{3, 3, 4}, TinyInputs(3, 3).view()); // the variant
  step.synchronize();
  step.runGraph(StepShape{1, 3, 4}, TinyInputs(1, 3).view());
  step.runGraph(StepShape{4, 3, 4}, TinyInputs(4, 3).view());
  step.runGraph(StepShape{4, 3, 4}, TinyInputs(4, 3).view());
  EXPECT_EQ(step.graphCaptures(), 2);
  step.synchronize();

  // The variant's entry is checked against the PTX like the kernel's.
  const std::string variant = "decode_layer_k0_fused_gemm16";
  std::string renamed = ptx;
  for (size_t p; (p = renamed.find(variant)) != std::string::npos;)
    renamed.replace(p, variant.size(), "other_gemm16");
  Model withoutVariantEntry(describing(model.manifest(), renamed));
  std::string msg = EXPECT_THROW_MSG(
      FormatError, DecodeStep(ctx(), withoutVariantEntry, renamed, "tiny.ptx",
                              Capacity{1, 1, 1}));
  EXPECT_CONTAINS(msg, "no .entry decode_layer_k0_fused_gemm16 for kernel 0");
}

TEST_F(Gpu, DecodeStepChecksThePtxFirst) {
  Manifest manifest = Manifest::load(dataPath("tiny_decode.manifest.json"));
  std::string ptx = readText(dataPath("tiny_decode.ptx"));
  std::string from = ".param .u32 decode_layer_k1_decode_attention_param_11";
  ASSERT_NE(ptx.find(",\n\t" + from), std::string::npos);
  ptx.erase(ptx.find(",\n\t" + from), from.size() + 3);
  // Not the PTX the manifest was written with.
  std::string msg =
      EXPECT_THROW_MSG(FormatError, DecodeStep(ctx(), Model(manifest), ptx,
                                               "tiny.ptx", Capacity{1, 1, 1}));
  EXPECT_CONTAINS(msg, "tiny.ptx: not the PTX ");
  // Its fingerprint, but an entry with a parameter missing.
  Model model(describing(manifest, ptx));
  msg = EXPECT_THROW_MSG(FormatError, DecodeStep(ctx(), model, ptx, "tiny.ptx",
                                                 Capacity{1, 1, 1}));
  EXPECT_CONTAINS(msg, ".entry decode_layer_k1_decode_attention has 11 "
                       "parameters");
}
