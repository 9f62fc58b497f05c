#!/usr/bin/env python3
"""Print the side-by-side table of one Soft-RoCE VM run (markdown).
Usage: tests/verbs/table.py OUT_DIR"""
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])


def perftest_row(name, size):
    for line in (out / name).read_text().splitlines():
        cols = line.split()
        if len(cols) >= 4 and cols[0] == str(size):
            return [float(c) for c in cols]
    return None


def qperf_ns():
    for line in (out / "qperf.txt").read_text().splitlines():
        if line.strip().startswith("latency"):
            v, unit = line.split("=")[1].split()[:2]
            return float(v) * {"ns": 1, "us": 1e3, "ms": 1e6, "sec": 1e9}[unit]
    return None


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


ROUNDS = 7  # ib_write_bw
LAT_ROUNDS = 7  # ib_write_lat and our latency probe (tests/verbs_vm.rs)
rdma = json.loads((out / "rdma.json").read_text())
msg = json.loads((out / "msg.json").read_text())
lat_rounds = [r for r in range(1, LAT_ROUNDS + 1) if (out / f"lat_r{r}.json").exists()]
lat = [json.loads((out / f"lat_r{r}.json").read_text()) for r in lat_rounds]


def half_rtt(j, s):
    return next(p["half_rtt_ns"] for p in j["points"] if p["size_bytes"] == s)


print(f"Latency: each tool's best of {len(lat_rounds)} alternating rounds (ib_write_lat at 2 and 8 B, "
      "then `ngctl probe --transport rdma --max-size 64`); medians of the rounds in brackets.")
print()
print("| quantity | size | ours (ngctl probe) | reference | ratio ours/ref |")
print("|---|---|---|---|---|")
typ = {}
for s in (2, 8):
    rows = [perftest_row(f"ib_write_lat_{s}_r{r}.txt", s) for r in lat_rounds]
    rows = [row for row in rows if row and row[4] != float("inf")]
    typ[s] = min(row[4] * 1e3 for row in rows)
    tmin = min(row[2] for row in rows)
    ours = min(half_rtt(j, s) for j in lat)
    each = ", ".join(f"{half_rtt(j, s)/1e3:.1f}" for j in lat)
    theirs = ", ".join(f"{row[4]:.1f}" for row in rows)
    print(f"| RDMA write half round trip | {s} B | {ours/1e3:.2f} µs (PRTT(1,0,{s})/2; rounds {each}; "
          f"median {median([half_rtt(j, s) for j in lat])/1e3:.2f}) "
          f"| {typ[s]/1e3:.2f} µs (ib_write_lat t_typical; rounds {theirs}; "
          f"median {median([row[4] for row in rows]):.2f}; t_min {tmin:.2f}) | {ours/typ[s]:.3f} |")
eel = min(j["eel_ns"] for j in lat)
eels = ", ".join(f"{j['eel_ns']/1e3:.1f}" for j in lat)
print(f"| EEL | 1 B | {eel/1e3:.2f} µs (rounds {eels}) "
      f"| {typ[2]/1e3:.2f} µs (ib_write_lat 2 B t_typical) | {eel/typ[2]:.3f} |")
# Distributions: ib_write_lat's 99 % and 99.9 % (-n 1000, so its 99.9 % is
# nearly the maximum) beside our latency run's nearest-rank percentiles (1000
# round trips per size, 1 B to 64 B), medians over the rounds.
for s in (2, 8):
    rows = [perftest_row(f"ib_write_lat_{s}_r{r}.txt", s) for r in lat_rounds]
    rows = [row for row in rows if row and len(row) >= 9]
    if rows:
        print(f"| ib_write_lat p99 / p99.9 | {s} B | — | {median([row[7] for row in rows]):.2f} / "
              f"{median([row[8] for row in rows]):.2f} µs (t_typical {median([row[4] for row in rows]):.2f}) | |")
recs = {}
for j in lat:
    for rec in j.get("latency", []):
        recs.setdefault(rec["size_bytes"], []).append(rec)
for size, rs in sorted(recs.items()):
    med = {k: median([r[k] for r in rs]) / 1e3 for k in ("p50_ns", "p99_ns", "p999_ns")}
    print(f"| our half round trip p50 / p99 / p99.9 | {size} B | {med['p50_ns']:.2f} / {med['p99_ns']:.2f} / "
          f"{med['p999_ns']:.2f} µs ({rs[0]['samples']} samples, median of {len(rs)} rounds) | — | |")
q = qperf_ns()
if q:
    print(f"| RDMA write latency | 1 B | {eel/1e3:.2f} µs (EEL) | {q/1e3:.2f} µs (qperf rc_rdma_write_lat) "
          f"| {eel/q:.3f} |")
pairs = []
for r in range(1, ROUNDS + 1):
    bw = perftest_row(f"ib_write_bw_r{r}.txt", 65536)[3]
    last = json.loads((out / f"bw_r{r}.json").read_text())["ranges"][-1]
    g_msg = max(last["g_ns"], 0.0)
    implied = (65536 * 1e9 / (bw * 1048576) - g_msg) / 65535
    pairs.append((last["G_ns_per_byte"], implied, bw))
ratio = median([ours / theirs for ours, theirs, _ in pairs])
each = "; ".join(f"{o:.1f} vs {t:.1f} ({bw:.1f} MiB/s)" for o, t, bw in pairs)
print(f"| G (bandwidth-bound: last range of 8–64 KiB) | 64 KiB | five paired rounds, ours vs implied: {each} "
      f"| (s/BW − g)/(s−1) of the ib_write_bw run just before, with our g | median ratio {ratio:.3f} |")
print(f"| o_s (rdma, first range) | — | {rdma['o_s_ns']/1e3:.2f} µs | — | |")
print(f"| msg o_r | — | {msg['o_r_ns']/1e3:.2f} µs | > 0 required | |")
print(f"| msg S (eager→rendezvous) | — | {msg['S_bytes']} B | the configured --eager-max | |")
print()
print(f"rdma probe: {rdma['sizes']} sizes in {rdma['elapsed_ns']/1e9:.1f} s; "
      f"msg probe: {msg['sizes']} sizes in {msg['elapsed_ns']/1e9:.1f} s, ranges "
      + ", ".join(f"{r['from_bytes']}–{r['to_bytes']} B (g {r['g_ns']/1e3:.1f} µs, G {r['G_ns_per_byte']:.2f} ns/B)" for r in msg["ranges"]))
