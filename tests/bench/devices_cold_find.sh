#!/bin/bash
# Cold finds of distinct layers on one device against several: the wall time
# of `convtune find --file` over LAYERS distinct ResNet-50 v1.5 forward layers
# (batch 1) with an empty database each time, for each daemon setup below,
# REPEATS times; prints each run and the medians.
#
#   tests/bench/devices_cold_find.sh BUILD_DIR [LAYERS] [REPEATS]
#
# Setups (the CPU backend): one device of one thread, one device of two
# threads, two devices of one thread each (--cpu-devices 2).
set -euo pipefail
build=$(cd "$1" && pwd)
layers=${2:-8}
repeats=${3:-3}
here=$(cd "$(dirname "$0")/../.." && pwd)
shared=${CONVTUNE_SHARED_DIR:-$here/../shared}
list="$shared/problems/miopen-perf-models/Resnet50_v1.5_FP32_BS128.txt"
work=$(mktemp -d /tmp/convtune-devbench-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

# The first LAYERS distinct forward lines, at batch 1.
grep -- '--forw 1' "$list" | sed 's/--batchsize 128/--batchsize 1/' |
  awk '!seen[$0]++' | head -n "$layers" > "$work/layers.txt"
echo "layers: $(wc -l < "$work/layers.txt") distinct forward lines of $(basename "$list"), batch 1"

run() {  # NAME ARGS...: one cold run, prints seconds
  local name=$1
  shift
  rm -rf "$work/db" "$work/d.sock"
  "$build/server/convtuned" --socket "$work/d.sock" --db "$work/db" \
    --backend cpu --background-tune off --log-rpcs off "$@" \
    2> "$work/$name.log" &
  local pid=$!
  for _ in $(seq 1 200); do
    [ -S "$work/d.sock" ] && break
    sleep 0.05
  done
  local start end
  start=$(date +%s.%N)
  CONVTUNE_SOCKET="$work/d.sock" "$build/client/convtune" find \
    --file "$work/layers.txt" --jobs 8 --mode NORMAL --progress off \
    --count 1 > "$work/$name.out"
  end=$(date +%s.%N)
  kill -TERM "$pid"
  wait "$pid" || true
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f\n", b - a }'
}

declare -A times
for r in $(seq 1 "$repeats"); do
  for setup in "1x1:--tuning-threads 1" "1x2:--tuning-threads 2" \
               "2x1:--tuning-threads 2 --cpu-devices 2"; do
    name=${setup%%:*}
    # shellcheck disable=SC2086
    t=$(run "$name" ${setup#*:})
    times[$name]="${times[$name]:-} $t"
    echo "run $r $name ${t}s"
  done
done
echo "median wall seconds (devices x threads each):"
for name in 1x1 1x2 2x1; do
  # shellcheck disable=SC2086
  m=$(printf '%s\n' ${times[$name]} | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "  $name $m"
done
