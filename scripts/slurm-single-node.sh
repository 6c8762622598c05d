#!/usr/bin/env bash
# Starts a one-node Slurm cluster on this machine, for trying `hcbench --shard auto` under a
# real job array (docs/scale-out.md). Needs root and Debian's slurm-wlm and munge packages
# (`apt-get install slurm-wlm munge`). Everything Slurm keeps lives under $SLURM_HOME (default
# /tmp/hcbench-slurm); the config is written there and named by SLURM_CONF, so /etc/slurm is
# not touched. Print the SLURM_CONF line to export with `--env`; stop with `--stop`.
set -euo pipefail

home=${SLURM_HOME:-/tmp/hcbench-slurm}
conf=$home/slurm.conf

if [[ ${1:-} == --stop ]]; then
    pkill -x slurmd || true
    pkill -x slurmctld || true
    exit 0
fi
if [[ ${1:-} == --env ]]; then
    echo "export SLURM_CONF=$conf"
    exit 0
fi

for tool in slurmctld slurmd munged sbatch; do
    command -v "$tool" > /dev/null || { echo "slurm-single-node: $tool is missing: apt-get install slurm-wlm munge" >&2; exit 2; }
done

mkdir -p "$home"/{state,spool,log}
node=$(hostname -s)
cpus=$(nproc)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
cat > "$conf" <<CONF
ClusterName=hcbench
SlurmctldHost=$node
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$home/state
SlurmdSpoolDir=$home/spool
SlurmctldPidFile=$home/slurmctld.pid
SlurmdPidFile=$home/slurmd.pid
SlurmctldLogFile=$home/log/slurmctld.log
SlurmdLogFile=$home/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
NodeName=$node CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=main Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF

# munge: the key comes with the package; the daemon may already run.
if ! pgrep -x munged > /dev/null; then
    mkdir -p /run/munge && chown munge:munge /run/munge
    runuser -u munge -- munged
fi
export SLURM_CONF=$conf
pgrep -x slurmctld > /dev/null || slurmctld -c
pgrep -x slurmd > /dev/null || slurmd -c
# Wait until the node takes jobs.
for _ in $(seq 1 50); do
    if sinfo -h -o '%t' 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
        echo "slurm-single-node: up (node $node, $cpus CPUs); export SLURM_CONF=$conf"
        exit 0
    fi
    sleep 0.2
done
echo "slurm-single-node: the node did not come up; see $home/log/" >&2
sinfo >&2 || true
exit 1
