#!/usr/bin/env python3
"""bench/pred_vs_measured.py NGCTL RUN_DIR... : per (collective, size >= 512 KiB, algorithm)
the re-fitted prediction / the run's measured median; prints the geometric
mean and range of the ratio over runs."""
import json, math, os, re, subprocess, sys, tempfile
ng = sys.argv[1]
unit = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}
ratios = {}
for out in sys.argv[2:]:
    bench = open(f"{out}/bench.md").read()
    gamma = float(re.search(r"γ = ([0-9.]+) ns/B", bench).group(1))
    meas = {}
    for line in bench.splitlines():
        c = [x.strip() for x in line.split("|")]
        if len(c) > 8 and c[1] in ("bcast", "allreduce") and not c[3].startswith("*") and int(c[2]) >= 524288:
            v, u = c[5].split()
            meas[(c[1], int(c[2]), c[3].split(" (")[0])] = float(v) * unit[u]
    fd, seg = tempfile.mkstemp(prefix="ng-pv-", dir="/dev/shm"); os.close(fd); os.unlink(seg)
    subprocess.run([ng, "fit", f"{out}/probe.json", "--publish", "--shm", seg, "--peer", "vm",
                    "--transport", "mpi"], check=True, capture_output=True)
    try:
        for (coll, size) in sorted({(c, s) for c, s, _ in meas}):
            j = json.loads(subprocess.run([ng, "predict", coll, "--ranks", "4", "--bytes", str(size),
                "--shm", seg, "--gamma-ns-per-byte", str(gamma), "--cores", "2", "--json"],
                check=True, capture_output=True, text=True).stdout)
            for cand in j["candidates"]:
                k = (coll, size, cand["algorithm"])
                if k in meas:
                    ratios.setdefault(k, []).append(cand["predicted_ns"] / meas[k])
    finally:
        for f in (seg, seg + ".lock"):
            if os.path.exists(f): os.unlink(f)
print("| collective | bytes | algorithm | runs | predicted / measured, geo. mean | min – max |")
print("|---|---:|---|---:|---:|---|")
for k, v in sorted(ratios.items()):
    gm = math.exp(sum(math.log(x) for x in v) / len(v))
    print(f"| {k[0]} | {k[1]} | {k[2]} | {len(v)} | {gm:.2f} | {min(v):.2f} – {max(v):.2f} |")
