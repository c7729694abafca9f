//===- GenerateOptions.h - fusion-generate's command line -------*- C++ -*-===//
//
// The options of fusion-generate as a plain struct, parsed and checked
// against each other (a bad request is an InvalidArgumentError naming the
// option, before anything is loaded), and the token-id lists it reads.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_TOOLING_GENERATEOPTIONS_H
#define FUSION_TOOLING_GENERATEOPTIONS_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fusion::tooling {

/// fusion-generate's options (`fusion-generate --help` describes each).
struct GenerateOptions {
  /// --model PREFIX: PREFIX.ptx and PREFIX.manifest.json (fusion-compile
  /// -o PREFIX).
  std::string model;
  /// --checkpoint DIR: config.json and the safetensors.
  std::string checkpoint;
  /// --random-weights SEED: seeded random weights of DIR/config.json's
  /// shapes instead of its safetensors (randomModelWeights; for timing).
  std::optional<uint64_t> randomWeights;
  /// --dtype f16|bf16; empty: the dtype the model was compiled for.
  std::string dtype;
  /// --function NAME.
  std::string function = "decode_step";
  /// The prompt (generation) or the text (--score): --ids "1 2 3", or
  /// --ids-file FILE read later (idsFile).
  std::vector<int32_t> ids;
  std::string idsFile;
  /// --batch B: B copies of the prompt as B sequences.
  int64_t batch = 1;
  /// --max-new-tokens N.
  int64_t maxNewTokens = 32;
  /// --max-tokens N: the longest a sequence may grow; 0: what the run
  /// needs.
  int64_t maxTokens = 0;
  /// --prefill-rows N: the rows of one step (EngineCapacity::maxStepRows,
  /// at least --batch); 0: the engine's default.
  int64_t prefillRows = 0;
  /// --score: teacher-forced log-probs and perplexity instead of
  /// generation.
  bool score = false;
  /// --no-graph, --sync-each: launch kernel by kernel (debugging).
  bool noGraph = false;
  bool syncEach = false;
  /// --no-clusters: launch every kernel without thread-block clusters
  /// (EngineOptions::launchClusters false; for compute-sanitizer racecheck).
  bool noClusters = false;
  int device = 0;
  bool checkDevice = false;
  /// --help: print generateUsage() and exit (the other fields are unset).
  bool help = false;
};

/// The text of `fusion-generate --help`.
const char *generateUsage();

/// Parses `args` (the command line without the program name). Unless --help
/// or --check-device, --model and --checkpoint are set and exactly one of
/// --ids and --ids-file is. Throws InvalidArgumentError for a bad request.
GenerateOptions parseGenerateOptions(const std::vector<std::string> &args);

/// The whitespace-separated token ids of `text` (`what` names it in
/// errors). Throws InvalidArgumentError for a word that is not an integer
/// in [0, 2^31), or for no ids at all.
std::vector<int32_t> parseTokenIds(const std::string &text,
                                   const std::string &what);

} // namespace fusion::tooling

#endif // FUSION_TOOLING_GENERATEOPTIONS_H
