#!/usr/bin/env python3
"""Puts convtune's immediate mode beside cuDNN's heuristic on the same layers.

Joins the per-layer JSON of bench_heuristic_accuracy --json (convtune's
leave-one-network-out pick, find's best) with two runs of torch_peer.py over
the same --layers_out list: one with --no-benchmark (the algorithm cuDNN's
heuristic picks) and one without (cuDNN's benchmark-mode best). Per
direction x type x layout it reports, for each side, the share of picks
within 10% of that side's best, the mean slowdown and the worst pick; and
cuDNN's heuristic pick against convtune's find.

    python3 tests/bench/compare_heuristics.py --ours gpu.json \\
        --heuristic torch_heuristic.json --benchmark torch_benchmark.json
"""

import argparse
import json
import sys


def key(rec):
    return (int(rec["line_no"]), rec["direction"], rec["layout"])


def load(path):
    with open(path) as fh:
        data = json.load(fh)
    if not isinstance(data, list):
        sys.exit("error: %s: expected a JSON list" % path)
    return data


def usable(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0


class Score:
    def __init__(self):
        self.ratios = []

    def add(self, ratio):
        self.ratios.append(ratio)

    def cells(self):
        if not self.ratios:
            return ["–", "–", "–"]
        n = len(self.ratios)
        within = sum(r <= 1.10 for r in self.ratios) / n
        mean = sum(r - 1 for r in self.ratios) / n
        return ["%.1f%%" % (100 * within), "%+.1f%%" % (100 * mean),
                "%.2f×" % max(self.ratios)]


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Rows whose torch times are missing (an error on either run) "
        "are left out of the cuDNN columns and counted.")
    ap.add_argument("--ours", required=True,
                    help="bench_heuristic_accuracy --json output")
    ap.add_argument("--heuristic", required=True,
                    help="torch_peer.py --no-benchmark --json output")
    ap.add_argument("--benchmark", required=True,
                    help="torch_peer.py --json output (benchmark mode)")
    args = ap.parse_args(argv)
    heuristic = {key(r): r for r in load(args.heuristic)}
    benchmark = {key(r): r for r in load(args.benchmark)}
    classes = {}
    missing = 0
    for rec in load(args.ours):
        cls = "%s %s %s" % (rec["direction"], rec["type"].upper(),
                            rec["layout"])
        s = classes.setdefault(cls, [Score(), Score(), Score()])
        overall = classes.setdefault("all", [Score(), Score(), Score()])
        ours = rec["pick_ms"] / rec["find_ms"]
        s[0].add(ours)
        overall[0].add(ours)
        h = heuristic.get(key(rec), {}).get("torch_ms")
        b = benchmark.get(key(rec), {}).get("torch_ms")
        if not usable(h) or not usable(b):
            missing += 1
            continue
        # cuDNN's heuristic against cuDNN's own best, and against convtune's
        # find (the best either found).
        for target in (s, overall):
            target[1].add(h / min(h, b))
            target[2].add(h / min(rec["find_ms"], b))
    print("| class | layers | convtune immediate: within 10% | mean | worst "
          "| cuDNN heuristic vs cuDNN benchmark: within 10% | mean | worst "
          "| cuDNN heuristic vs the better of both finds: within 10% | mean "
          "| worst |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for cls in sorted(classes, key=lambda c: (c == "all", c)):
        s = classes[cls]
        name = "**all**" if cls == "all" else cls
        print("| %s | %d | %s |" % (name, len(s[0].ratios), " | ".join(
            s[0].cells() + s[1].cells() + s[2].cells())))
    if missing:
        print("\n%d layer(s) without both torch times are left out of the "
              "cuDNN columns." % missing)
    return 0


if __name__ == "__main__":
    sys.exit(main())
