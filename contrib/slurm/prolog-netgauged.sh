#!/bin/sh
# Slurm prolog (Prolog= in slurm.conf, runs as root on every node of a job
# before it starts): hold the node quiet for the job, so netgauged sends no
# probes, declines sessions and runs no busy-polling thread while the job
# computes. Each job holds the node under its own name; the node resumes
# when the last job lets go (epilog-netgauged.sh). --for bounds the hold in
# case the epilog never runs: the job's time limit plus a margin, else a day.
NGCTL=${NGCTL:-/usr/local/bin/ngctl}
limit=1d
if [ -n "${SLURM_JOB_ID:-}" ] && command -v scontrol >/dev/null 2>&1; then
    # TimeLimit=[days-]hours:minutes:seconds, or UNLIMITED.
    tl=$(scontrol show job "$SLURM_JOB_ID" 2>/dev/null | sed -n 's/.*TimeLimit=\([^ ]*\).*/\1/p')
    case "$tl" in
        ''|UNLIMITED|Partition_Limit) ;;
        *)
            secs=$(printf '%s\n' "$tl" | awk -F'[-:]' '
                NF == 4 { print $1 * 86400 + $2 * 3600 + $3 * 60 + $4; next }
                NF == 3 { print $1 * 3600 + $2 * 60 + $3; next }
                NF == 2 { print $1 * 60 + $2; next }
                { print $1 * 60 }')
            [ -n "$secs" ] && limit=$(( secs + 600 ))s
            ;;
    esac
fi
# Never fail the job because of netgauged.
"$NGCTL" quiet --name "slurm-${SLURM_JOB_ID:-unknown}" --for "$limit" >/dev/null 2>&1 || true
exit 0
