#!/bin/bash
# The own kernels on the GPU machine in one go: the correctness suite for
# chosen solvers, then for each list and layout convtune's find beside
# PyTorch's cuDNN on the same layers, in the same call.
#
#   tests/gpu/kernel_round.sh BUNDLE OUTDIR
#
# BUNDLE is a device-bundle of build/tests/gpu/gpu_solvers_test and
# build/tests/bench/bench_gpu_vs_cudnn, with the shared problem lists copied
# in as BUNDLE/shared/problems. The environment chooses what runs:
#   FILTER       gtest filter for gpu_solvers_test (empty: no tests; '*' is
#                the whole suite)
#   SHARDS       gpu_solvers_test processes run at once on the GPU, each a
#                gtest shard of FILTER (default 8)
#   SHARD_SECONDS  each shard's time limit (default 400)
#   LISTS        "LIST:LAYOUT[:SUBSET[:TYPE[:DIRS]]] ..." (LIST a file of
#                the perf-model lists, LAYOUT NCHW or NHWC; SUBSET all or
#                grouped, its lines with more than one group alone; TYPE
#                fp32, fp16 or bf16, the lines run in that type instead;
#                DIRS some of F, B and W, those directions' lines alone;
#                empty: no benchmark). E.g. Resnet50_v1.5_FP16_BS128.txt:
#                NHWC:all:bf16:W runs that list's W layers in bf16.
#   MAX_SECONDS  each side's time per list (default 60)
#   NCU          a kernel name: ncu's summary of its launches in the first
#                list's find (empty: none)
# Logs, JSON and the comparison tables (each layer with its TFLOP/s and
# TB/s beside the floor of the card's measured ceilings) land in OUTDIR.
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$2
mkdir -p "$out"
here=$(cd "$(dirname "$0")/../.." && pwd)
export CONVTUNE_SHARED_DIR="$bundle/shared"
lists="$bundle/shared/problems/miopen-perf-models"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1
# The card's measured ceilings for the per-layer floors (compare_peers.py).
ceilings=()
grep -q "H100" "$out/gpu.txt" && ceilings=(--ceilings 798 3.0)
python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())' >> "$out/gpu.txt" 2>&1

if [ -n "${FILTER:-}" ]; then
  echo "== gpu_solvers_test $FILTER"
  shards=${SHARDS:-8}
  pids=()
  for ((i = 0; i < shards; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout ${SHARD_SECONDS:-400} "$bundle/run" \
      gpu_solvers_test --gtest_filter="$FILTER" > "$out/tests.$i.log" 2>&1 &
    pids+=($!)
  done
  rc=0
  : > "$out/tests.log"
  for ((i = 0; i < shards; i++)); do
    wait "${pids[$i]}" || rc=$?
    cat "$out/tests.$i.log" >> "$out/tests.log"
    rm -f "$out/tests.$i.log"
  done
  echo "rc=$rc" >> "$out/tests.log"
  grep -E "^\[  (PASSED|FAILED) |^\[  SKIPPED \] [0-9]+ test|rc=" "$out/tests.log" | tail -24
fi

for item in ${LISTS:-}; do
  IFS=: read -r list layout only type dirs <<< "$item"
  name="${list%.txt}-$layout"
  path="$lists/$list"
  if [ "${only:-all}${type:-}${dirs:-}" != all ]; then
    case "${only:-all}" in
      all) keep='' ;;
      grouped) keep='--group_count 1 ' name="$name-grouped" ;;
      *) echo "kernel_round: $item: SUBSET is all or grouped, not '${only:0:16}'" >&2; exit 2 ;;
    esac
    case "${type:-}" in
      '') driver='' ;;
      fp32) driver=conv ;;
      fp16) driver=convfp16 ;;
      bf16) driver=convbfp16 ;;
      *) echo "kernel_round: $item: TYPE is fp32, fp16 or bf16, not '${type:0:16}'" >&2; exit 2 ;;
    esac
    if ! [[ "${dirs:-FBW}" =~ ^[FBW]+$ ]]; then
      echo "kernel_round: $item: DIRS is some of F, B and W, not '${dirs:0:16}'" >&2
      exit 2
    fi
    # MIOpenDriver's --forw codes: F 1, B 2, W 4. Some lists end their lines
    # in CR LF, so the code ends at any space.
    codes=$(echo "${dirs:-FBW}" | sed 's/F/1|/g; s/B/2|/g; s/W/4|/g')
    [ -n "$driver" ] && name="$name-$type"
    [ -n "${dirs:-}" ] && name="$name-$dirs"
    path="$out/$name.txt"
    grep -E -- "--forw (${codes%|})([[:space:]]|\$)" "$lists/$list" |
      { if [ -n "$keep" ]; then grep -v -- "$keep"; else cat; fi; } |
      { if [ -n "$driver" ]; then sed -E "s/MIOpenDriver conv[a-z0-9]* /MIOpenDriver $driver /"; else cat; fi; } > "$path"
  fi
  echo "== $name"
  timeout 500 "$bundle/run" bench_gpu_vs_cudnn --repeats 5 --max-seconds "${MAX_SECONDS:-60}" \
    --layout "$layout" --json "$out/$name-ours.json" "$path" > "$out/$name-ours.log" 2>&1
  echo "rc=$?" >> "$out/$name-ours.log"
  timeout 300 python3 "$here/tests/bench/torch_peer.py" --repeats 5 --warmup 2 \
    --max-seconds "${MAX_SECONDS:-60}" --layout "$layout" --json "$out/$name-torch.json" \
    "$path" > "$out/$name-torch.log" 2>&1
  echo "rc=$?" >> "$out/$name-torch.log"
  python3 "$here/tests/bench/compare_peers.py" --ours "$out/$name-ours.json" \
    --torch "$out/$name-torch.json" --markdown --layers "${ceilings[@]}" > "$out/$name.md" 2>&1
  grep -E "^\| [^|]+ \| all \| (F|B|W) \|" "$out/$name.md" | cut -d'|' -f4-11
done

if [ -n "${NCU:-}" ] && [ -n "${LISTS:-}" ]; then
  first=${LISTS%% *}
  IFS=: read -r list layout _ <<< "$first"
  echo "== ncu $NCU"
  timeout 300 ncu --clock-control none -k "regex:$NCU" -c 12 \
    --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed \
    "$bundle/run" bench_gpu_vs_cudnn --repeats 1 --max-layers 4 --layout "$layout" "$lists/$list" > "$out/ncu.log" 2>&1
  tail -40 "$out/ncu.log"
fi
