#!/bin/bash
# The Python package on the GPU machine, in one go: its CUDA tests, the host
# cost of a call, and the ResNet-50 AMP training step against cuDNN.
#
#   tests/gpu/python_round.sh BUNDLE OUTDIR
#
# BUNDLE is a device-bundle of build/server/convtuned and
# build/client/libconvtune.so with build/python copied in as BUNDLE/python.
# What runs is chosen by the environment: TESTS=1 (test_torch_cuda),
# OVERHEAD=1 (python_overhead.py), TRAIN=0 skips the training step, whose
# arguments TRAIN_ARGS adds to. Logs and tables land in OUTDIR.
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$2
mkdir -p "$out"
here=$(cd "$(dirname "$0")/../.." && pwd)
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CONVTUNED="$bundle/bin/convtuned"
export CONVTUNE_LIBRARY="$bundle/bin/libconvtune.so"
export PYTHONPATH="$bundle/python:$here/tests/python"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1
python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())' >> "$out/gpu.txt" 2>&1

if [ "${TESTS:-0}" = 1 ]; then
  echo "== test_torch_cuda"
  (cd "$here/tests/python" && timeout 400 python3 -m unittest test_torch_cuda -v) > "$out/tests.log" 2>&1
  echo "rc=$?" >> "$out/tests.log"
  tail -5 "$out/tests.log"
fi

dir=$(mktemp -d)
"$CONVTUNED" --backend cuda --socket "$dir/s" --db "$dir/db" --log-rpcs off > "$out/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 600); do [ -S "$dir/s" ] && break; sleep 0.1; done

if [ "${OVERHEAD:-0}" = 1 ]; then
  echo "== python_overhead"
  timeout 120 python3 "$here/tests/bench/python_overhead.py" --socket "$dir/s" --device cuda > "$out/overhead.md" 2>&1
  echo "rc=$?" >> "$out/overhead.md"
  cat "$out/overhead.md"
fi

if [ "${TRAIN:-1}" = 1 ]; then
  echo "== torch_train_step ${TRAIN_ARGS:-}"
  # shellcheck disable=SC2086
  timeout 500 python3 "$here/tests/bench/torch_train_step.py" --socket "$dir/s" ${TRAIN_ARGS:-} > "$out/train.md" 2> "$out/train.err"
  echo "rc=$?" >> "$out/train.md"
  cat "$out/train.md"
fi

kill -TERM "$daemon" 2>/dev/null
wait "$daemon"
echo "daemon exit $?" >> "$out/daemon.log"
rm -rf "$dir"
