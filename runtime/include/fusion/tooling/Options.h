//===- Options.h - fusion-run's command line ----------------------*- C++
//-*-===//
//
// The options of fusion-run as a plain struct, parsed and checked against
// each other (a bad request is an InvalidArgumentError naming the option,
// before anything is loaded).
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_TOOLING_OPTIONS_H
#define FUSION_TOOLING_OPTIONS_H

#include <cstdint>
#include <string>
#include <vector>

namespace fusion::tooling {

/// Most sequences in a run: the attention kernels' grids have a batch
/// dimension, which CUDA bounds to 65535.
constexpr int64_t kMaxBatch = 65535;

/// fusion-run's options (`fusion-run --help` describes each).
struct Options {
  std::string ptx, manifest, function, weights, config, out, inputs;
  int64_t layer = 0;
  uint64_t seed = 1;
  int64_t batch = 0;
  int64_t kvLen = 64;
  std::vector<int64_t> kvLens;
  int64_t steps = 1;
  int64_t numSplits = 0;
  int64_t numPages = 0;
  bool graph = false;
  double tol = 0;
  int64_t iters = 100;
  int64_t warmup = 10;
  int64_t layers = 1;
  std::string json;
  int device = 0;
  bool syncEach = false;
  bool noClusters = false;
  bool inspect = false;
  bool dryRun = false;
  bool checkDevice = false;
  /// --help: print usage() and exit (the other fields are unset).
  bool help = false;
};

/// The text of `fusion-run --help`.
const char *usage();

/// Parses `args` (the command line without the program name). After parsing,
/// unless --help or --check-device: --ptx and --manifest are set, and without
/// --inputs `kvLens` holds `batch` lengths (from --kv-lens, or --kv-len
/// repeated). Throws InvalidArgumentError for a bad request.
Options parseOptions(const std::vector<std::string> &args);

} // namespace fusion::tooling

#endif // FUSION_TOOLING_OPTIONS_H
