#!/usr/bin/python3
"""The scale study's tables (docs/results_scale.md) from scripts/scale_study.sh's CSVs.

    scripts/scale_summary.py build/scale_study/*.csv

Per platform (one CSV each), per (N, size), for Sum:
  - automatic's time, the fastest side of either collection and its time,
  - best / automatic (at least 0.95 is the goal: automatic within 5% of the best),
  - each MPI selector's time / automatic's (at least 1.0: never slower than a selector),
  - best / tuned, where the CSV has tuned (which measures gradsync's candidates);
then Adasum / Sum per gradsync algorithm, and, where the CSV has predictions (--predict), each
cost line's error (predicted / simulated).
"""
import collections
import csv
import os
import sys

GRADSYNC = ["ring", "recursive_halving", "recursive_doubling", "hierarchical", "automatic"]  # Sum and Adasum
SELECTORS = ["ompi", "mpich", "mvapich2", "impi"]


def size_text(b):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return f"{b // scale} {unit}"
    return f"{b} B"


def load(path):
    rows = collections.defaultdict(dict)  # (policy, ranks, bytes) -> side -> (seconds, predicted)
    with open(path) as f:
        for r in csv.DictReader(f):
            predicted = r.get("predicted") or ""
            rows[(r["policy"], int(r["ranks"]), int(r["bytes"]))][r["side"]] = (
                float(r["seconds"]), float(predicted) if predicted else None)
    return rows


def table(header, lines):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(str(x) for x in line) + " |" for line in lines]
    return "\n".join(out)


def summary(path):
    rows = load(path)
    name = os.path.splitext(os.path.basename(path))[0]
    print(f"### {name}\n")
    lines, misses = [], []
    for (policy, n, b), sides in sorted(rows.items()):
        if policy != "sum" or "automatic" not in sides:
            continue
        auto = sides["automatic"][0]
        best_side = min(sides, key=lambda s: sides[s][0])
        best = sides[best_side][0]
        ratio = best / auto
        selectors = [f"{sides[s][0] / auto:.3f}" if s in sides else "-" for s in SELECTORS]
        tuned = f"{best / sides['tuned'][0]:.3f}" if "tuned" in sides else "-"
        lines.append([n, size_text(b), f"{auto * 1e3:.4g}", best_side, f"{best * 1e3:.4g}", f"{ratio:.3f}"] + selectors +
                     [tuned])
        if ratio < 0.95 or any(s in sides and sides[s][0] / auto < 1.0 for s in SELECTORS):
            misses.append((n, b))
    print(table(["N", "size", "automatic ms", "fastest", "its ms", "fastest / automatic"] +
                [f"{s} / automatic" for s in SELECTORS] + ["fastest / tuned"], lines))
    print(f"\n{len(lines) - len(misses)} of {len(lines)} points meet both goals.\n")

    lines = []
    for (policy, n, b), sides in sorted(rows.items()):
        if policy != "adasum":
            continue
        plain = rows.get(("sum", n, b), {})
        lines.append([n, size_text(b)] + [f"{sides[s][0] / plain[s][0]:.3f}" if s in sides and s in plain else "-"
                                          for s in GRADSYNC])
    if lines:
        print("Adasum's time / Sum's:\n")
        print(table(["N", "size"] + GRADSYNC, lines) + "\n")

    errors = collections.defaultdict(list)
    for (policy, n, b), sides in sorted(rows.items()):
        for s in GRADSYNC:
            if s in sides and sides[s][1] is not None and n >= 16:
                errors[(policy, s)].append((sides[s][1] / sides[s][0], n, b))
    if errors:
        print("Cost lines, predicted / simulated (N >= 16): worst low, worst high, share within 10%:\n")
        lines = []
        for (policy, s), e in sorted(errors.items()):
            low, high = min(e), max(e)
            within = sum(1 for r, _, _ in e if 0.9 <= r <= 1.1)
            lines.append([policy, s, f"{low[0]:.3f} (N={low[1]}, {size_text(low[2])})",
                          f"{high[0]:.3f} (N={high[1]}, {size_text(high[2])})", f"{within} of {len(e)}"])
        print(table(["policy", "algorithm", "lowest", "highest", "within 10%"], lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        summary(p)
