#!/bin/sh
# Runs PROGRAM with the address of a convtuned started on a temporary socket
# and database, then stops the daemon.  Usage: run_with_daemon.sh CONVTUNED PROGRAM [ARGS...]
set -u
convtuned=$1
shift
dir=$(mktemp -d "${TMPDIR:-/tmp}/ctc-XXXXXX") || exit 1
"$convtuned" --socket "$dir/convtuned.sock" --db "$dir/db" --backend cpu 2>"$dir/log" &
pid=$!
cleanup() {
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM
tries=0
until grep -q "serving on unix:$dir/convtuned.sock" "$dir/log" 2>/dev/null; do
  if ! kill -0 "$pid" 2>/dev/null || [ "$tries" -ge 600 ]; then
    echo "convtuned did not start:" >&2
    cat "$dir/log" >&2
    exit 1
  fi
  tries=$((tries + 1))
  sleep 0.1
done
"$@" "unix:$dir/convtuned.sock"
