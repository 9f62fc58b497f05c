#!/usr/bin/env python3
"""Geometric means of MPI_X / PMPI_X from bench/ngcoll_bench.c outputs, by
methodology and collective: for a run where both sides are the same code
(no preload, a wrapper, libngcoll off), what the bench itself and the
interposition cost; with --passthrough DIR..., the points of preloaded
runs (DIR/openmpi-*-preload.txt and its NETGAUGE_COLL=log lines) where
libngcoll kept the library's own, by (collective, methodology).
Usage: bench/ngcoll_bias.py FILE.txt...
       bench/ngcoll_bias.py --passthrough DIR..."""
import collections
import glob
import importlib.util
import math
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("summary", os.path.join(here, "ngcoll_summary.py"))
summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(summary)


def ratios(path):
    for (coll, mode, b), (o, lib) in summary.points(path).items():
        if o > 0 and lib > 0 and math.isfinite(lib):
            yield coll, mode, b, o / lib


def show(title, groups):
    for key in sorted(groups):
        v = groups[key]
        print(f"{title} {key}: {len(v)} points, geometric mean {summary.gmean(v):.4f}, max {max(v):.2f}")


if len(sys.argv) > 1 and sys.argv[1] == "--passthrough":
    by = collections.defaultdict(list)
    for d in sys.argv[2:]:
        txt = glob.glob(os.path.join(d, "openmpi-*-preload.txt"))[0]
        ch = summary.choices(txt[:-4] + ".log")
        for coll, mode, b, r in ratios(txt):
            if summary.chosen_ours(ch, coll, b) is False:
                by[f"{coll} {mode}"].append(r)
                by["all"].append(r)
    show("library's own kept:", by)
else:
    for path in sys.argv[1:]:
        by = collections.defaultdict(list)
        for coll, mode, b, r in ratios(path):
            by[mode].append(r)
            by[coll].append(r)
            by["all"].append(r)
        show(os.path.basename(path), by)
