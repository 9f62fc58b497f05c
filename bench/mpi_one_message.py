#!/usr/bin/env python3
"""One message against the probe's own measurement: for every size the probe
sampled, PRTT(1,0,s)/2 (half_rtt_ns) against the selector's one-message time
(ffi/src/select.rs, one_message_on: each range's bytes at its own G, continuing
from the range below, + 2 EEL above S) and against the LogGPS sum
o_s(s) + L + (s-1)G + o_r(s) (+ 2 EEL above S), from the fitted ranges.
Usage: mpi_one_message.py PROBE.json   (ngctl probe --json)"""
import json
import statistics
import sys

p = json.load(open(sys.argv[1]))
S = p["S_bytes"] if p["S_bytes"] is not None else float("inf")
eel, L = p["eel_ns"], p["L_ns"]


def range_of(s):
    return [r for r in p["ranges"] if r["from_bytes"] <= s][-1]


def bytes_time(s):
    """T(s) without the handshake, as the selector computes it."""
    r = range_of(s)
    g = max(r["G_ns_per_byte"], 0)
    if r["from_bytes"] > 1 and range_of(r["from_bytes"] - 1) is not r:
        return bytes_time(r["from_bytes"] - 1) + (s - r["from_bytes"] + 1) * g
    return eel + (s - 1) * g


err = {"selector": [], "loggps_sum": []}
for q in p["points"]:
    s, k = q["size_bytes"], q["size_bytes"] - 1
    r = range_of(s)
    hs = 2 * eel if s > S else 0.0
    sel = max(bytes_time(s) + hs, 0.0)
    tot = (r["o_s_ns"] + k * r["O_s_ns_per_byte"] + L + k * r["G_ns_per_byte"]
           + r["o_r_ns"] + k * r["O_r_ns_per_byte"] + hs)
    h = q["half_rtt_ns"]
    err["selector"].append(abs(sel - h) / h)
    err["loggps_sum"].append(abs(tot - h) / h)
print("one message vs PRTT(1,0,s)/2 over %d sizes (EEL %.0f ns, S %s):" % (len(p["points"]), eel, p["S_bytes"]))
for name, e in err.items():
    e.sort()
    print("  %-10s median |error| %3.0f %%, 90th percentile %3.0f %%"
          % (name, 100 * statistics.median(e), 100 * e[int(0.9 * (len(e) - 1))]))
