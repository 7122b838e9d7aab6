#!/usr/bin/env bash
# Prints the Debian packages that hold the shared libraries BINARY... load,
# one per line, sorted: what a runtime image must install. Libraries no
# package holds (CUDA's under /usr/local/cuda, the driver's libcuda) are
# named on stderr and left out.
# Usage: deploy/runtime-packages.sh BINARY...
set -euo pipefail
if (($# == 0)); then
  echo "usage: $0 BINARY..." >&2
  exit 2
fi
for b in "$@"; do
  [[ -x $b ]] || { echo "runtime-packages: not an executable: $b" >&2; exit 2; }
done
ldd "$@" | awk '/=>/ && $3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  real=$(readlink -f "$lib")
  found=""
  # /lib is /usr/lib on a merged /usr: dpkg knows one of the two names.
  for candidate in "$lib" "$real" "${lib#/usr}" "/usr$lib" "${real#/usr}" "/usr$real"; do
    if pkg=$(dpkg -S "$candidate" 2>/dev/null); then
      found=${pkg%%:*}
      break
    fi
  done
  if [[ -n $found ]]; then
    echo "$found"
  else
    echo "runtime-packages: no package holds $lib" >&2
  fi
done | sort -u
