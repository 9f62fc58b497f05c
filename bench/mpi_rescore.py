#!/usr/bin/env python3
"""Re-score one run of bench/mpi_run.sh with this version's fit and selector.

The run's measured medians (OUT_DIR/bench.md) stay what they were; the probe
(OUT_DIR/probe.json, saved with --raw) is re-fitted and published into a
scratch segment (`ngctl fit --publish`), and `ngctl predict` chooses again for
every (collective, size) with the run's γ, 4 ranks and 2 cores. Prints how
many choices are within 10 % of the measured fastest and the misses.
Usage: bench/mpi_rescore.py NGCTL OUT_DIR [--as-run]   (--as-run: the run's
own segment instead of a re-fit)"""
import json
import os
import re
import subprocess
import sys
import tempfile

ngctl, out = sys.argv[1], sys.argv[2]
as_run = "--as-run" in sys.argv[3:]
bench = open(f"{out}/bench.md").read()
gamma = float(re.search(r"γ = ([0-9.]+) ns/B", bench).group(1))
unit = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}
measured = {}
for line in bench.splitlines():
    c = [x.strip() for x in line.split("|")]
    if len(c) > 8 and c[1] in ("bcast", "allreduce", "barrier") and not c[3].startswith("*"):
        value, u = c[5].split()
        measured.setdefault((c[1], int(c[2])), {})[c[3].split(" (")[0]] = float(value) * unit[u]
if as_run:
    seg = f"{out}/seg"
else:
    fd, seg = tempfile.mkstemp(prefix="ng-rescore-", dir="/dev/shm")
    os.close(fd)
    os.unlink(seg)
    subprocess.run([ngctl, "fit", f"{out}/probe.json", "--publish", "--shm", seg,
                    "--peer", "vm", "--transport", "mpi"], check=True, capture_output=True)
good, misses = 0, []
try:
    for (coll, size), times in sorted(measured.items()):
        j = json.loads(subprocess.run(
            [ngctl, "predict", coll, "--ranks", "4", "--bytes", str(size), "--shm", seg,
             "--gamma-ns-per-byte", str(gamma), "--cores", "2", "--json"],
            check=True, capture_output=True, text=True).stdout)
        choice = j["choice"]["algorithm"]
        fastest = min(times, key=times.get)
        t = times.get(choice, float("inf"))
        if t <= 1.1 * times[fastest]:
            good += 1
        else:
            misses.append(f"{coll} {size} B: {choice} {t / 1e3:.1f} µs, fastest {fastest} "
                          f"{times[fastest] / 1e3:.1f} µs")
finally:
    if not as_run:
        os.unlink(seg)
print(f"{out}: choice within 10 % of the measured fastest: {good}/{len(measured)} points "
      f"({100 * good / len(measured):.0f} %)")
for m in misses:
    print("   ", m)
