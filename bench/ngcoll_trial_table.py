"""The table of bench/ngcoll.md ("Trials") from bench/ngcoll_trial.sh's
runs: per run, the geometric mean of ours / the library's over all points,
the points where the plan chose ours, their geometric mean and those worse
than 1.25x, and the trials' verdicts (kept ours / gave the class back).
Usage: python3 bench/ngcoll_trial_table.py OUT_DIR [VARIANT VARIANT]
(the variants' directory names nb<P>-<variant>-<run>: trial and notrial by
default, a and b for bench/ngcoll_ab.sh)"""
import glob
import os
import re
import sys

out_dir = sys.argv[1]
variants = sys.argv[2:4] if len(sys.argv) >= 4 else ["trial", "notrial"]
print("| ranks | variant | run | all points | points where ours ran | their geometric mean | their points > 1.25x | kept / gave back | disturbed |")
print("|---|---|---|---:|---:|---:|---|---|---|")
for P in (4, 8):
    for v in variants:
        for d in sorted(glob.glob(os.path.join(out_dir, f"nb{P}-{v}-*"))):
            s = os.path.join(d, "summary.out")
            if not os.path.isdir(d) or not os.path.exists(s):
                continue
            secs = re.split(r"\n### ", open(s).read())

            def section(name):
                return next((x for x in secs if x.startswith(f"openmpi, {P} ranks: {name}")), "")

            got = []
            for name in ("preloaded libngcoll\n", "preloaded, where libngcoll ran one of ours"):
                x = section(name)
                m = re.search(r"points: (\d+); geometric mean ours/library \*\*([0-9.]+)\*\*", x)
                w = re.search(r"points worse than 1.25x: (.*)", x)
                got.append((m.group(1), m.group(2), w.group(1) if w else "none") if m else ("-", "-", "-"))
            log = open(os.path.join(d, f"openmpi-{P}-preload.log")).read()
            kept = log.count("kept ours")
            gave = log.count("from then on") + log.count("kept the library's own")
            dist = "yes" if os.path.exists(os.path.join(d, f"openmpi-{P}-preload.DISTURBED")) else ""
            name = os.path.basename(d)
            print(f"| {P} | {v} | {name} | {got[0][1]} | {got[1][0]} | {got[1][1]} | {got[1][2]} | {kept} / {gave} | {dist} |")
