//===- Checker.h - fusion-run's checks of a step's outputs ------*- C++ -*-===//
//
// Compares what the kernels wrote with the CPU references (relative L2
// error against fp64 within a tolerance, no NaN/inf) and, with a Hugging
// Face golden, with the golden's tensors; formats the report lines.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_TOOLING_CHECKER_H
#define FUSION_TOOLING_CHECKER_H

#include "fusion/runtime/Compare.h"
#include "fusion/runtime/Golden.h"
#include "fusion/runtime/KVCacheManager.h"
#include "fusion/runtime/Model.h"
#include "fusion/tooling/ReferenceRunner.h"

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace fusion::tooling {

/// `v` with three significant digits ("1.23e-04").
std::string sci(double v);

/// The default tolerance of `dtype`: 2e-3 for f16, 1e-2 for bf16.
double defaultTolerance(runtime::DType dtype);

/// A kernel output holding an intermediate of the front half.
struct Intermediate {
  /// What it holds, by its golden name: "normed", "q", "k", "v" (qkv_proj
  /// outputs) or "q_rot", "k_rot" (outputs of a kernel that applies RoPE).
  std::string name;
  /// "kernel 2 output query".
  std::string source;
  int buffer = 0; ///< Model::internalBuffers() index
  int64_t rowElems = 0;
  std::vector<uint16_t> values;
};

/// The intermediates the compiled function materialises: every kernel output
/// with role normed / query / key / value (a fused kernel yields only what a
/// later kernel reads, e.g. the rotated query; strategy none yields all).
std::vector<Intermediate>
findIntermediates(const runtime::Model &model,
                  const runtime::FrontHalfSignature &sig);

/// What one step of the kernels (or of the dry run's stand-in) produced.
struct StepOutputs {
  std::vector<uint16_t> out;         ///< the function result [B, Hq, D]
  std::vector<uint16_t> residualOut; ///< [B, hidden], if the layer has one
  std::vector<uint16_t> kNew, vNew;  ///< the cache rows written [B, Hkv, D]
  std::vector<Intermediate> intermediates; ///< with --inputs
};

/// One output of a step and its two references.
struct OutputRow {
  std::string name;
  const std::vector<uint16_t> *out, *ref64, *ref32;
};

/// The rows a step checks: output, residual_out (if `sig` has one), k_new,
/// v_new.
std::vector<OutputRow> outputRows(const runtime::FrontHalfSignature &sig,
                                  const StepOutputs &got, const RefOutputs &r64,
                                  const RefOutputs &r32);

/// "step 2 (positions 5..13):" for the step of `view`.
std::string stepHeading(int64_t step, const runtime::BatchView &view);

/// The check of every step of a run.
class StepChecker {
public:
  /// Rows of `dtype` pass within relative L2 error `tol` against fp64.
  StepChecker(runtime::DType dtype, double tol) : dtype_(dtype), tol_(tol) {}

  /// Compares each row with its references; returns one report line per
  /// row ("  output        vs fp64: max|d| ... ok").
  std::string check(const std::vector<OutputRow> &rows);
  /// Records the result of another check (the golden table).
  void record(bool ok) { pass_ &= ok; }

  /// Whether every row so far was within tolerance and finite.
  bool pass() const { return pass_; }
  /// The worst relative L2 error vs fp64 of each output, in first-checked
  /// order.
  const std::vector<std::pair<std::string, double>> &worstRel() const {
    return worstRel_;
  }

private:
  runtime::DType dtype_;
  double tol_;
  bool pass_ = true;
  std::vector<std::pair<std::string, double>> worstRel_;
};

/// One output of the step checked against a golden tensor.
struct GoldenRow {
  std::string tensor; ///< the golden's name for it
  std::string source; ///< where the run read it
  const std::vector<uint16_t> *out, *ref64, *ref32;
  /// The golden tensor (transformers), and the float64 one if any.
  const std::vector<uint16_t> *golden;
  const std::vector<double> *golden64 = nullptr;
};

/// The golden rows of a step: attn_output, k_rot, v, the intermediates of
/// `got` and residual_out (against hidden_states: x + 0).
std::vector<GoldenRow> goldenRows(const runtime::GoldenDecodeStep &golden,
                                  const runtime::FrontHalfSignature &sig,
                                  const StepOutputs &got, const RefOutputs &r64,
                                  const RefOutputs &r32);

/// Writes the golden table to `os`; returns whether every row is within
/// `tol` against float64 (the CPU fp64 reference, and attn_output_f64) and
/// finite.
bool checkGolden(const runtime::GoldenDecodeStep &g,
                 const std::vector<GoldenRow> &rows, double tol,
                 std::ostream &os);

} // namespace fusion::tooling

#endif // FUSION_TOOLING_CHECKER_H
