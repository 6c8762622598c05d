#!/bin/bash
# The per-cell harness cost by part and case category, from the cells' own clocks.
#
# usage: scripts/cost-by-part.sh HCBENCH_BINARY ROOT [more matrix arguments]
#   Runs an oracle matrix of HC-Bench at --jobs 1 (--sandbox $SANDBOX, default none) in ROOT (a
#   copy of this repository's benchmarks, fixtures and suites, made on first use) with
#   RUST_LOG=hcbench::cost=debug, and prints each category's mean per cell, in ms: the harness
#   (a cell's wall time less its commands and model turns) and its timed parts (copy, repo map,
#   checkpoints, trace writes, context packing, tools, scoring, the removals' wait) and the rest.
#   The run's workspaces are removed after it; the stored repo maps and fixture digests beside
#   them are kept. Run it twice and read the second: the first stores the maps of a new binary.
#   To measure the cell's supervised sandbox (SANDBOX=bubblewrap), the binary must be hcbench's.
set -euo pipefail
BIN=${1:?usage: $0 HCBENCH_BINARY ROOT [matrix args]}
R=${2:?usage: $0 HCBENCH_BINARY ROOT [matrix args]}
shift 2
REPO=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -d "$R/benchmarks" ]; then
  mkdir -p "$R"
  cp -r "$REPO"/{benchmarks,fixtures,suites,experiment_config.yaml} "$R"/
  # A fixture changed within the last 2 s may still change within its clock tick: its repo map
  # is kept in the process but not stored (src/agent/repomap.rs). Past that, the first run
  # stores every map and the second reads them.
  sleep 2.1
fi
RUST_LOG=hcbench::cost=debug "$BIN" matrix --profiles oracle --sandbox "${SANDBOX:-none}" --jobs 1 \
  --root "$R" "$@" >/dev/null 2>"$R/cost.err"
grep 'hcbench::cost' "$R/cost.err" | sed 's/\x1b\[[0-9;]*m//g' | awk '
{ cat = ""; delete v
  for (i = 1; i <= NF; i++) if (split($i, kv, "=") == 2) { v[kv[1]] = kv[2]; if (kv[1] == "cell") { c = kv[2]; sub(/-.*/, "", c); cat = c } }
  n = split("harness_us workspace_us repo_map_us checkpoint_us trace_us context_us tools_us scoring_us removal_wait_us", K, " ")
  cnt[cat]++; cnt["ALL"]++
  rest = v["harness_us"]
  for (j = 1; j <= n; j++) { s[cat, j] += v[K[j]]; s["ALL", j] += v[K[j]]; if (j > 1) rest -= v[K[j]] }
  r[cat] += rest; r["ALL"] += rest }
END {
  printf "%-10s %7s %5s %5s %5s %5s %5s %5s %5s %5s %5s\n", "category", "harness", "copy", "map", "ckpt", "trace", "ctx", "tools", "score", "rmw", "rest"
  for (c in cnt) {
    line = sprintf("%-10s", c)
    for (j = 1; j <= 9; j++) line = line sprintf(" %*.2f", (j == 1 ? 7 : 5), s[c, j] / cnt[c] / 1000)
    print line sprintf(" %5.2f  n=%d", r[c] / cnt[c] / 1000, cnt[c]) | "sort"
  }
  close("sort") }'
# The run's workspaces (outside ROOT, where its `workspaces` link points) and its run directory.
for run in "$R"/workspace/runs/*/; do
  [ -L "$run/workspaces" ] && rm -rf "$(readlink -f "$run/workspaces")"
  rm -rf "$run"
done
