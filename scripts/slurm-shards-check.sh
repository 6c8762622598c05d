#!/usr/bin/env bash
# The scripted check that a real job engine runs hcbench's shards (docs/scale-out.md): a Slurm
# job array of N shards with `--shard auto`, then a dependent job that merges them, on the
# one-node cluster of scripts/slurm-single-node.sh. The merged report.md must equal an
# unsharded run's apart from run ids. Needs root, slurm-wlm and munge, a built hcbench
# (HCBENCH, default target/debug/hcbench) and python3 for the cases. Usage:
#   scripts/slurm-shards-check.sh [N] [extra matrix flags...]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-3}
shift || true
hcbench=${HCBENCH:-$root/target/debug/hcbench}
hcbench=$(realpath "$hcbench")
work=$(mktemp -d /tmp/hcbench-slurm-check.XXXXXX)
flags=(--profiles oracle,nop --epochs 2 "$@")

"$root/scripts/slurm-single-node.sh" > /dev/null
export SLURM_CONF=${SLURM_HOME:-/tmp/hcbench-slurm}/slurm.conf
export HCBENCH_WORKSPACES=$work/workspaces HCBENCH_HISTORY=$work/history

cat > "$work/shard.sh" <<JOB
#!/usr/bin/env bash
cd "$root"
exec "$hcbench" matrix ${flags[*]} --jobs 1 --shard auto --out "$work/shard-\$SLURM_ARRAY_TASK_ID"
JOB
array=$(sbatch --parsable --array="0-$((n - 1))" --cpus-per-task=1 -o "$work/shard-%a.log" "$work/shard.sh")
# afterany: the merge runs whatever the shards' exit codes, and judges the whole run itself.
merge=$(sbatch --parsable --dependency="afterany:$array" -o "$work/merge.log" \
    --wrap "cd '$root' && '$hcbench' merge '$work/merged' $(for k in $(seq 0 $((n - 1))); do printf "'%s' " "$work/shard-$k"; done)")
echo "slurm-shards-check: array job $array ($n shards), merge job $merge; logs in $work"

while squeue -h -j "$array,$merge" 2>/dev/null | grep -q .; do sleep 1; done
state=$(sacct -n -X -j "$merge" -o State 2>/dev/null | tr -d ' ' || true)
[[ -f $work/merged/reports/report.md ]] || { echo "slurm-shards-check: the merge wrote no report ($state); see $work/merge.log" >&2; cat "$work/merge.log" >&2; exit 1; }

"$hcbench" matrix "${flags[@]}" --no-history --out "$work/unsharded" > "$work/unsharded.log" 2>&1
ids=$(python3 -c 'import json,sys; [print(json.load(open(p))["run_id"]) for p in sys.argv[1:]]' "$work"/*/manifest.json)
mask() { local text; text=$(cat "$1"); for id in $ids; do text=${text//$id/RUN}; done; printf '%s\n' "$text"; }
if diff <(mask "$work/unsharded/reports/report.md") <(mask "$work/merged/reports/report.md") > "$work/diff.txt"; then
    echo "slurm-shards-check: OK: $n Slurm array tasks merged into a report equal to the unsharded run's"
    grep -m1 '^merged' "$work/merge.log"
else
    echo "slurm-shards-check: the merged report differs from the unsharded run's:" >&2
    cat "$work/diff.txt" >&2
    exit 1
fi
