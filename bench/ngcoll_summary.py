#!/usr/bin/env python3
"""Summarizes a bench/ngcoll_run.sh output directory: for every MPI, rank
count and kind (preloaded libngcoll; exported rules), the geometric mean of
our time / the library's own over every (collective, methodology, size)
point, the worst point, the points worse than 1.25x, and the full table.

Preloaded: ours = MPI_X with libngcoll, the library's own = PMPI_X, timed
interleaved in the same run. Rules: ours = MPI_X with the exported rules,
own = MPI_X without, runs in the order own-a, rules-a, rules-b, own-b; each
side is the geometric mean of its two runs. Open MPI's rules in one process
(<mpi>-<P>-forced-rules.txt, bench --rules): ours = MPI_X with every rule
forced on a communicator of its own, own = PMPI_X, the fixed decision,
interleaved as the preloaded runs are.

For the preloaded runs the points are also split by libngcoll's choice
(its NETGAUGE_COLL=log lines in <tag>.log, the world communicator): one
of ours; another of the library's algorithms (Open MPI's, forced on a
duplicate: "(forced)"); or the library's own, where both sides run the
same code and the ratio is the run's noise (plus the ~10 ns choice).

Usage: bench/ngcoll_summary.py OUT_DIR [--table]"""
import glob
import math
import os
import re
import sys


def points(path):
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 7 and f[0] == "point":
            out[(f[1], f[2], int(f[3]))] = (float(f[4]), float(f[5]))
    return out


UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20}


def choices(path):
    """(coll, lo, hi, kind) of the world communicator from a log; kind:
    "ours", "library-alg" (another of the library's algorithms) or
    "library" (its own choice)."""
    out = []
    if not os.path.exists(path):
        return out
    pat = re.compile(r"^ngcoll: comm 0 \(\d+ ranks[^)]*\) (\w+)(?: (\d+) (B|KiB|MiB)(?:–(\d+) (B|KiB|MiB))?)?: (ours|Open MPI|MPICH)([^—]*)—")
    for line in open(path):
        m = pat.match(line)
        if not m:
            continue
        coll = m.group(1)
        if m.group(2) is None:
            lo = hi = 0
        else:
            lo = int(m.group(2)) * UNITS[m.group(3)]
            hi = int(m.group(4)) * UNITS[m.group(5)] if m.group(4) else lo
        kind = "ours" if m.group(6) == "ours" else "library-alg" if "(forced)" in m.group(7) else "library"
        out.append((coll, lo, hi, kind))
    return out


def chosen(ch, coll, b):
    for c, lo, hi, kind in ch:
        if c == coll and lo <= b <= hi:
            return kind
    return None


OMPI_IDS = {0: "allgather", 2: "allreduce", 3: "alltoall", 6: "barrier", 7: "bcast", 11: "reduce"}


def ompi_rules(path, p):
    """{coll: [(key bytes, algorithm)]} of communicator size p in an Open
    MPI classic rules file (ngctl export --format ompi-rules)."""
    if not os.path.exists(path):
        return None
    nums = [int(line.split("#")[0].split()[0]) if len(line.split("#")[0].split()) == 1 else
            [int(x) for x in line.split("#")[0].split()]
            for line in open(path) if line.split("#")[0].strip()]
    out, i = {}, 1
    for _ in range(nums[0]):
        cid, ncomm = nums[i], nums[i + 1]
        i += 2
        for _ in range(ncomm):
            size, nmsg = nums[i], nums[i + 1]
            rows = nums[i + 2:i + 2 + nmsg]
            i += 2 + nmsg
            if size == p:
                out[OMPI_IDS.get(cid, str(cid))] = [(r[0], r[1]) for r in rows]
    return out


def rule_alg(rules, coll, b, p):
    """The algorithm the rules give a point (allgather, alltoall: keyed by
    block x ranks, as the export writes them)."""
    key = b * p if coll in ("allgather", "alltoall") else b
    alg = 0
    for k, a in rules.get(coll, []):
        if k <= key:
            alg = a
    return alg


def gmean(xs):
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def fmt_bytes(b):
    if b >= 1 << 20 and b % (1 << 20) == 0:
        return "%d MiB" % (b >> 20)
    if b >= 1024 and b % 1024 == 0:
        return "%d KiB" % (b >> 10)
    return "%d B" % b


def report(title, rows, table):
    """rows: (coll, mode, bytes, ours_us, lib_us)."""
    ratios = [(o / l, c, m, b, o, l) for c, m, b, o, l in rows if l > 0 and o > 0]
    if not ratios:
        return
    g = gmean([r[0] for r in ratios])
    worst = max(ratios)
    bad = sorted((r for r in ratios if r[0] > 1.25), reverse=True)
    print("### %s" % title)
    print()
    print("- points: %d; geometric mean ours/library **%.3f**; worst %.2fx (%s %s %s: %.1f vs %.1f us)"
          % (len(ratios), g, worst[0], worst[1], worst[2], fmt_bytes(worst[3]), worst[4], worst[5]))
    by = {}
    for r in ratios:
        by.setdefault((r[1], r[2]), []).append(r[0])
    print("- per collective and methodology: " + "; ".join(
        "%s %s %.2f" % (c, m, gmean(v)) for (c, m), v in sorted(by.items())))
    print("- points worse than 1.25x: %s" % (", ".join(
        "%s %s %s %.2fx" % (r[1], r[2], fmt_bytes(r[3]), r[0]) for r in bad) or "none"))
    print()
    if table:
        print("| collective | methodology | size | ours µs | library µs | ratio |")
        print("|---|---|---:|---:|---:|---:|")
        for r in sorted(ratios, key=lambda r: (r[1], r[2], r[3])):
            print("| %s | %s | %s | %.2f | %.2f | %.2f |" % (r[1], r[2], fmt_bytes(r[3]), r[4], r[5], r[0]))
        print()


def by_rule(rows, rules, p, title, unnamed):
    """Reports rows split by whether the Open MPI rules name an algorithm
    for them (nothing without rules)."""
    if not rules:
        return
    for want, what in ((True, "where the file names an algorithm"), (False, unnamed)):
        sub = [r for r in rows if (rule_alg(rules, r[0], r[2], p) != 0) is want]
        report("%s, %s" % (title, what), sub, False)


def main():
    out = sys.argv[1]
    table = "--table" in sys.argv
    tags = sorted(glob.glob(os.path.join(out, "*-preload.txt")))
    for f in tags:
        m = re.match(r"(\w+)-(\d+)-preload\.txt", os.path.basename(f))
        mpi, p = m.group(1), m.group(2)
        pts = points(f)
        rows = [(c, md, b, o, l) for (c, md, b), (o, l) in pts.items()]
        dist = " (DISTURBED)" if os.path.exists(f.replace(".txt", ".DISTURBED")) else ""
        report("%s, %s ranks: preloaded libngcoll%s" % (mpi, p, dist), rows, table)
        ch = choices(f.replace(".txt", ".log"))
        if ch:
            for want, what in (("ours", "where libngcoll ran one of ours"),
                               ("library-alg", "where it ran another of the library's algorithms"),
                               ("library", "where it kept the library's own (noise)")):
                sub = [r for r in rows if chosen(ch, r[0], r[2]) == want]
                if sub:
                    report("%s, %s ranks: preloaded, %s" % (mpi, p, what), sub, False)
        own = [points(x) for x in sorted(glob.glob(os.path.join(out, "%s-%s-own-*.txt" % (mpi, p))))]
        rules = [points(x) for x in sorted(glob.glob(os.path.join(out, "%s-%s-rules-*.txt" % (mpi, p))))]
        if own and rules:
            rows = []
            for k in own[0]:
                o = gmean([r[k][0] for r in rules if k in r])
                l = gmean([r[k][0] for r in own if k in r])
                rows.append((k[0], k[1], k[2], o, l))
            report("%s, %s ranks: exported rules" % (mpi, p), rows, table)
            rules = ompi_rules(os.path.join(out, "rules-%s.txt" % p), int(p)) if mpi == "openmpi" else None
            by_rule(rows, rules, int(p), "%s, %s ranks: exported rules" % (mpi, p),
                    "where it leaves Open MPI's decision (0: the same code; the noise)")
        forced = os.path.join(out, "%s-%s-forced-rules.txt" % (mpi, p))
        if os.path.exists(forced):
            rows = [(c, md, b, o, l) for (c, md, b), (o, l) in points(forced).items()]
            dist = " (DISTURBED)" if os.path.exists(forced.replace(".txt", ".DISTURBED")) else ""
            report("%s, %s ranks: exported rules in one process, each rule forced%s" % (mpi, p, dist), rows, table)
            by_rule(rows, ompi_rules(os.path.join(out, "rules-%s.txt" % p), int(p)), int(p),
                    "%s, %s ranks: rules in one process" % (mpi, p),
                    "where it leaves Open MPI's decision (the same code; the noise)")


if __name__ == "__main__":
    main()
