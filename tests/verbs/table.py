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


rdma = json.loads((out / "rdma.json").read_text())
msg = json.loads((out / "msg.json").read_text())
pts = {p["size_bytes"]: p for p in rdma["points"]}
print("| quantity | size | ours (ngctl probe) | reference | ratio ours/ref |")
print("|---|---|---|---|---|")
for s in (2, 8):
    row = perftest_row(f"ib_write_lat_{s}.txt", s)
    ref = row[4] * 1e3
    ours = pts[s]["half_rtt_ns"]
    print(f"| RDMA write half round trip | {s} B | {ours/1e3:.2f} µs (PRTT(1,0,{s})/2, median) "
          f"| {ref/1e3:.2f} µs (ib_write_lat t_typical; t_min {row[2]:.2f} µs) | {ours/ref:.3f} |")
row = perftest_row("ib_write_lat_2.txt", 2)
print(f"| EEL | 1 B | {rdma['eel_ns']/1e3:.2f} µs | {row[4]:.2f} µs (ib_write_lat 2 B t_typical) "
      f"| {rdma['eel_ns']/(row[4]*1e3):.3f} |")
q = qperf_ns()
if q:
    print(f"| RDMA write latency | 1 B | {rdma['eel_ns']/1e3:.2f} µs (EEL) | {q/1e3:.2f} µs (qperf rc_rdma_write_lat) "
          f"| {rdma['eel_ns']/q:.3f} |")
bw = perftest_row("ib_write_bw.txt", 65536)
g_bw = 1e9 / (bw[3] * 1048576)
last = rdma["ranges"][-1]
print(f"| G (bandwidth-bound range {last['from_bytes']}–{last['to_bytes']} B) | 64 KiB | "
      f"{last['G_ns_per_byte']:.2f} ns/B | {g_bw:.2f} ns/B (1/BW, ib_write_bw average {bw[3]:.2f} MiB/s) "
      f"| {last['G_ns_per_byte']/g_bw:.3f} |")
print(f"| o_s (rdma, first range) | — | {rdma['o_s_ns']/1e3:.2f} µs | — | |")
print(f"| msg o_r | — | {msg['o_r_ns']/1e3:.2f} µs | > 0 required | |")
print(f"| msg S (eager→rendezvous) | — | {msg['S_bytes']} B | the configured --eager-max | |")
print()
print(f"rdma probe: {rdma['sizes']} sizes in {rdma['elapsed_ns']/1e9:.1f} s; "
      f"msg probe: {msg['sizes']} sizes in {msg['elapsed_ns']/1e9:.1f} s, ranges "
      + ", ".join(f"{r['from_bytes']}–{r['to_bytes']} B (g {r['g_ns']/1e3:.1f} µs, G {r['G_ns_per_byte']:.2f} ns/B)" for r in msg["ranges"]))
