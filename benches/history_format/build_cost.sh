#!/bin/bash
# Cold debug build of this crate once per polars feature set, each in a fresh target dir, one
# after another (run it on an otherwise idle machine; it prints the load average around each).
# Usage: ./build_cost.sh [TMPDIR]   (needs the crates fetched once: `cargo fetch`)
set -u
cd "$(dirname "$0")"
base=${1:-/tmp}
for cfg in "lazy:--no-default-features" "parquet:--no-default-features --features parquet" \
           "csv:--no-default-features --features polars-csv" "parquet_csv:"; do
  name=${cfg%%:*}; flags=${cfg#*:}
  target="$base/history_format_target_$name"
  rm -rf "$target"
  echo "== $name: start load $(cut -d' ' -f1-3 /proc/loadavg)"
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  CARGO_TARGET_DIR="$target" cargo build --offline $flags >"$target.log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  echo "== $name: exit $rc, $(echo "$end - $start" | bc) s, $(grep -c Compiling "$target.log") crates," \
       "$(du -sh "$target" | cut -f1); end load $(cut -d' ' -f1-3 /proc/loadavg)"
done
