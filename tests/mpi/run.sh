#!/usr/bin/env bash
# Everything that needs mpirun (Open MPI, one machine). Called by .ci/run.
# Exits non-zero on any failure. A few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PATH="$HOME/.cargo/bin:$PATH"
command -v mpirun >/dev/null || { echo "tests/mpi: mpirun missing (scripts/install-deps.sh)" >&2; exit 1; }

cargo build --release --features mpi --bin ngctl --example mpi_collectives --example bcast_rule
T="${CARGO_TARGET_DIR:-target}/release"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
SEG="$W/seg"

echo "== mpi probe (4 ranks oversubscribed: the placement the collectives run in), published"
mpirun --oversubscribe -np 4 "$T/ngctl" probe --transport mpi --max-size 4194304 --resamples 0 \
    --publish --shm "$SEG" --json > "$W/probe.json"
python3 - "$W/probe.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
s = p["S_bytes"]
print("EEL %.0f ns, L %.0f ns, S %s B" % (p["eel_ns"], p["L_ns"], s))
# The fit never publishes a negative overhead (o', O) or G per range.
for r in p["ranges"]:
    for k in ("G_ns_per_byte", "o_s_ns", "o_r_ns", "O_s_ns_per_byte", "O_r_ns_per_byte"):
        assert r[k] >= 0, (k, r)
# 4 ranks: the 1:P-P:1 fan-out over the 3 others ran (LogfP).
assert p["logfp"] is not None and len(p["logfp"]["curve"]) == 3, p["logfp"]
# vader's eager limit is 4 KiB (including Open MPI's header): S must be found near it.
# Reported, not fatal: with 4 ranks on 2 cores the eager burst gap is already
# so high that the jump at 4 KiB is often below one EEL (bench/mpi.md).
if s is None or not 2048 <= s <= 8192:
    print("WARN: rendezvous switch not found near 4 KiB (S = %r); machine loaded?" % s)
# The all-ranks exchange sweep: every size 1 B .. 4 MiB (1, powers of two
# and their √2 midpoints), 21 rounds each, fitted into 1..8 ranges.
x = p["exchange"]
assert x["ranks"] == 4, x["ranks"]
sizes = [q["size_bytes"] for q in x["points"]]
assert sizes[0] == 1 and sizes[-1] == 4194304 and len(sizes) == 44, sizes
assert all(q["step_ns"] > 0 for q in x["points"]), x["points"]
assert 1 <= len(x["ranges"]) <= 8 and x["ranges"][0]["from_bytes"] == 1, x["ranges"]
# 4 MiB moves 4194303 more bytes than 1 B: one exchange step costs more.
assert x["points"][-1]["step_ns"] > x["points"][0]["step_ns"], x["points"]
print("exchange step (4 ranks at once): %.1f us at 1 B, %.1f us at 4 MiB, %d ranges"
      % (x["points"][0]["step_ns"] / 1e3, x["points"][-1]["step_ns"] / 1e3, len(x["ranges"])))
PY
# Captured first: `ngctl dump | grep -q` lets grep exit at the first match,
# ngctl then dies of SIGPIPE and pipefail fails the pipeline.
dump=$("$T/ngctl" dump --shm "$SEG")
grep -q "mpi-x4" <<<"$dump" || { echo "the exchange entry mpi-x4 was not published" >&2; exit 1; }
# The conflict sweep's penalties, as the mpi transport's contention record.
grep -q "^mpi: bandwidth sharing" <<<"$dump" || { echo "the mpi contention record was not published" >&2; exit 1; }
grep -qE "^  mixed +k=1 [0-9.]+ +k=2 [0-9.]+ +k=3 [0-9.]+" <<<"$dump" || { echo "the mpi record lacks mixed penalties for k = 1..3" >&2; exit 1; }

echo "== predict / export from the segment"
"$T/ngctl" predict bcast --ranks 4 --bytes 1048576 --cores 2 --shm "$SEG"
"$T/ngctl" predict allreduce --ranks 4 --bytes 65536 --cores 2 --shm "$SEG" --json \
    | python3 -c 'import json, sys; j = json.load(sys.stdin); assert j["measured_exchange"], j'
for f in loggopsim netgauge smpi mpich-json; do
    "$T/ngctl" export --format "$f" --shm "$SEG" > "$W/export.$f"
done
"$T/ngctl" export --format ompi-rules --shm "$SEG" --comm-sizes 2,4,8 > "$W/rules.txt"

echo "== Open MPI reads the exported rules file"
out=$(mpirun --oversubscribe -np 4 --mca coll_tuned_use_dynamic_rules 1 \
    --mca coll_tuned_dynamic_rules_filename "$W/rules.txt" --mca coll_base_verbose 1 \
    "$T/examples/bcast_rule" 2>&1)
echo "$out" | tail -3
if grep -qi "bad configure file\|Ignoring user supplied" <<<"$out"; then
    echo "Open MPI rejected the exported rules file" >&2; exit 1
fi

echo "== a rule changes what MPI_Bcast does (rank 2 enters 400 ms late)"
rules() { # $1 = algorithm, $2 = fan-out, $3 = segment size
    printf '1 # collectives\n7 # bcast\n1 # comm sizes\n4 # comm size\n1 # msg sizes\n0 %s %s %s\n' "$1" "$2" "$3"
}
rules 1 0 0 > "$W/linear.txt"
rules 3 1 65536 > "$W/pipeline.txt"
t_of() {
    mpirun --oversubscribe -np 4 --mca coll_tuned_use_dynamic_rules 1 \
        --mca coll_tuned_dynamic_rules_filename "$1" "$T/examples/bcast_rule" \
        | sed -n 's/^rank3_bcast_ms=//p'
}
lin=$(t_of "$W/linear.txt"); pipe=$(t_of "$W/pipeline.txt")
echo "rank 3 MPI_Bcast: basic_linear $lin ms, pipeline $pipe ms"
python3 -c "
lin, pipe = $lin, $pipe
# pipeline: rank 3's data comes through the late rank 2 (≈ 400 ms);
# linear: straight from the root.
assert pipe > 300 and lin < 200 and pipe > 2 * lin, (lin, pipe)
print('rule effect confirmed: pipeline/linear = %.1f' % (pipe / max(lin, 1e-3)))
"

echo "== collectives bench (4 ranks, oversubscribed)"
mpirun --oversubscribe -np 4 "$T/examples/mpi_collectives" --shm "$SEG" | tee "$W/bench.md" | grep -E "^(ranks|results|choice within)"
# The points where the choice missed (reported; the criterion is bench/mpi.md's).
grep -E "choice NOT within" "$W/bench.md" | cut -d'|' -f2,3,10 || true
grep -q "results correct: yes" "$W/bench.md"
echo "tests/mpi: all passed"
