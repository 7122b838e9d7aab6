#!/usr/bin/env bash
# Installs the dependencies, builds, starts convtuned on the CPU backend with
# its database in ./state, finds the best solver for every ResNet-50 layer,
# prints the table and stops the daemon. Run it twice: the second run is
# answered from the FindDb.
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" -j "${JOBS:-2}" --target convtuned convtune

state="$PWD/state"
mkdir -p "$state"
socket="$state/convtuned.sock"
"$BUILD_DIR/server/convtuned" --backend cpu --socket "$socket" --db "$state/db" \
  2>"$state/convtuned.log" &
daemon=$!
trap 'kill -TERM $daemon 2>/dev/null; wait $daemon 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  [[ -S "$socket" ]] && break
  kill -0 $daemon 2>/dev/null || { cat "$state/convtuned.log" >&2; exit 1; }
  sleep 0.1
done
"$BUILD_DIR/client/convtune" --socket "$socket" find --file deploy/problems/resnet50_b1.txt
