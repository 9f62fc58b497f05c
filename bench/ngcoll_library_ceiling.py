#!/usr/bin/env python3
"""The best an Open MPI rules file could do, from a
bench/ngcoll_library_survey.sh directory.

Every file there is one forced variant (algorithm, segment size) of one
collective in one pass: per (methodology, size) point the forced time over
the fixed decision's, timed interleaved in one process. A rules file picks
one variant per (collective, size) for every methodology (it sees the
communicator size and the message size, nothing else), or leaves the fixed
decision (ratio 1). This prints, as geometric means over the points of
bench/ngcoll_bench.c (the same points as bench/ngcoll_run.sh):

  in-sample   the choice made and scored on the mean of all passes (a
              best case: picking the minimum of noisy ratios flatters it)
  held-out    the choice made on one pass and scored on another, both
              ways round: what a file chosen from one measurement gets
  per-mode    a variant per (collective, methodology, size), in-sample:
              beyond any rules file, which cannot see the methodology

and per collective, with the chosen variants (--table).

Usage: bench/ngcoll_library_ceiling.py DIR [--table]"""
import collections
import glob
import math
import os
import re
import sys

NAMES = {
    "bcast": "linear chain pipeline split_binary binary binomial knomial scatter_allgather scatter_allgather_ring",
    "reduce": "linear chain pipeline binary binomial in_order_binary rabenseifner",
    "allreduce": "linear nonoverlapping recursive_doubling ring segmented_ring rabenseifner",
    "allgather": "linear bruck recursive_doubling ring neighbor two_proc",
    "alltoall": "linear pairwise modified_bruck linear_sync two_proc",
    "barrier": "linear double_ring recursive_doubling bruck two_proc tree",
}


def variant_name(coll, alg, seg):
    name = NAMES[coll].split()[alg - 1]
    return f"{name}/{seg // 1024}K" if seg else name


def load(directory):
    """{pass: {(coll, mode, size): {variant: ratio}}} and the rank count."""
    runs = collections.defaultdict(lambda: collections.defaultdict(dict))
    ranks = set()
    for path in glob.glob(os.path.join(directory, "*.txt")):
        m = re.match(r"(\d+)-(\w+)-(\d+)-(\d+)-(\d+)\.txt$", os.path.basename(path))
        if not m:
            continue
        p, coll, alg, seg, pas = m.groups()
        ranks.add(int(p))
        v = variant_name(coll, int(alg), int(seg))
        for line in open(path):
            f = line.split()
            if len(f) >= 7 and f[0] == "point":
                x, own = float(f[4]), float(f[5])
                if x > 0 and own > 0:
                    runs[int(pas)][(f[1], f[2], int(f[3]))][v] = x / own
    return runs, ranks


def gmean(values):
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def choose(points, keys):
    """The variant (or None: the fixed decision) with the least summed log
    ratio over `keys` (points of one collective and size)."""
    common = set.intersection(*(set(points[k]) for k in keys))
    best, best_score = None, 0.0
    for v in sorted(common):
        score = sum(math.log(points[k][v]) for k in keys)
        if score < best_score:
            best, best_score = v, score
    return best


def score(points, keys, v):
    return [1.0 if v is None else points[k][v] for k in keys]


def mean_points(runs):
    """Per point and variant, the geometric mean over the passes that have it."""
    out = collections.defaultdict(dict)
    for pas in runs.values():
        for k, d in pas.items():
            for v, r in d.items():
                out[k].setdefault(v, []).append(r)
    return {k: {v: gmean(rs) for v, rs in d.items()} for k, d in out.items()}


def groups(points):
    """Point keys grouped by (collective, size): what a rules file tells apart."""
    g = collections.defaultdict(list)
    for k in points:
        g[(k[0], k[2])].append(k)
    return g


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    runs, ranks = load(sys.argv[1])
    if not runs:
        sys.exit(f"no survey files in {sys.argv[1]}")
    mean = mean_points(runs)
    grouped = groups(mean)
    per_coll = collections.defaultdict(lambda: collections.defaultdict(list))
    chosen = {}
    for (coll, size), keys in sorted(grouped.items()):
        v = choose(mean, keys)
        chosen[(coll, size)] = v
        per_coll[coll]["in-sample"] += score(mean, keys, v)
        for k in keys:
            per_coll[coll]["per-mode"].append(min([1.0] + list(mean[k].values())))
    passes = sorted(runs)
    held = []
    for a in passes:
        for b in passes:
            if a == b:
                continue
            vals = collections.defaultdict(list)
            for (coll, size), keys in groups(runs[a]).items():
                keys = [k for k in keys if k in runs[b]]
                if not keys:
                    continue
                v = choose(runs[a], keys)
                if v is not None and not all(v in runs[b][k] for k in keys):
                    continue
                vals[coll] += score(runs[b], keys, v)
            held.append(vals)
    print(f"# {','.join(map(str, sorted(ranks)))} ranks, passes {passes}, {len(mean)} points")
    print(f"{'':10} {'points':>6} {'in-sample':>10} {'held-out':>10} {'per-mode':>10}")
    total = collections.defaultdict(list)
    for coll in sorted(per_coll):
        row = per_coll[coll]
        ho = [gmean(h[coll]) for h in held if h[coll]]
        total["in-sample"] += row["in-sample"]
        total["per-mode"] += row["per-mode"]
        ho_s = f"{sum(ho) / len(ho):10.3f}" if ho else f"{'—':>10}"
        print(f"{coll:10} {len(row['in-sample']):6} {gmean(row['in-sample']):10.3f} {ho_s} {gmean(row['per-mode']):10.3f}")
    # Over all points only where every collective has a held-out score.
    ho_all = [gmean([r for c in h for r in h[c]]) for h in held if all(h[c] for c in per_coll)]
    ho_s = f"{sum(ho_all) / len(ho_all):10.3f}" if ho_all else f"{'—':>10}"
    print(f"{'all':10} {len(total['in-sample']):6} {gmean(total['in-sample']):10.3f} {ho_s} {gmean(total['per-mode']):10.3f}")
    if "--table" in sys.argv:
        print("\n# collective size: the in-sample choice (— the fixed decision), ratio per methodology")
        for (coll, size), v in sorted(chosen.items()):
            keys = sorted(grouped[(coll, size)])
            ratios = " ".join(f"{k[1]}={r:.2f}" for k, r in zip(keys, score(mean, keys, v)))
            print(f"{coll:10} {size:8} {v or '—':24} {ratios}")


if __name__ == "__main__":
    main()
