#!/usr/bin/env python3
"""Joins convtune's GPU benchmark JSON with torch_peer.py's and prints the
speed-ratio tables of the README.

    python3 tests/bench/compare_peers.py --ours ours.json --torch torch.json \\
        --markdown

--ours takes what `bench_gpu_vs_cudnn --json PATH` writes: a list of objects
with list, line_no, line, direction, type, layout, group, find_ms, own_ms,
cudnn_ms (ms, own and cudnn may be null), find_solver and own_solver.
--torch takes what `torch_peer.py --json PATH` writes. Records are joined on
(list, line_no, direction, layout). Both options take several files; a key
seen twice keeps the last record. Needs no torch.
"""

import argparse
import json
import math
import sys

DIRECTIONS = ("F", "B", "W")
TYPES = ("fp32", "fp16", "bf16")
LAYOUTS = ("NCHW", "NHWC")
SUBSETS = ("all", "grouped", "depthwise")
OURS_KEYS = ("list", "line_no", "direction", "type", "layout", "group",
             "find_ms")
TORCH_KEYS = ("list", "line_no", "direction", "type", "layout", "torch_ms")


def join_key(rec):
    return (rec["list"], int(rec["line_no"]), rec["direction"],
            rec["layout"])


def load(paths, required, what, notes):
    """Records of JSON lists, by join key, in first-seen order."""
    out = {}
    for path in paths:
        with open(path) as fh:
            data = json.load(fh)
        if not isinstance(data, list):
            sys.exit("error: %s: expected a JSON list" % path)
        for i, rec in enumerate(data):
            missing = [k for k in required if k not in rec]
            if missing:
                sys.exit("error: %s: record %d lacks %s" % (
                    path, i, ", ".join(missing)))
            key = join_key(rec)
            if key in out:
                notes.append("%s: %s:%d %s %s appears twice; the last record "
                             "(%s) is used" % (what, key[0], key[1], key[2],
                                               key[3], path))
            out[key] = rec
    return out


def ms(value):
    """A usable time: a positive finite number, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


class Layer(object):
    """One joined (list, line_no, direction, layout)."""

    def __init__(self, ours, peer):
        self.ours, self.peer = ours, peer
        self.find = ms(ours.get("find_ms"))
        self.own = ms(ours.get("own_ms"))
        self.cudnn = ms(ours.get("cudnn_ms"))
        self.pair_find = ms(ours.get("pair_find_ms"))
        self.pair_cudnn = ms(ours.get("pair_cudnn_ms"))
        self.timing_s = ms(ours.get("timing_s"))
        self.torch = None if peer is None else ms(peer.get("torch_ms"))
        first = None if peer is None else ms(peer.get("first_call_ms"))
        self.first_call_s = None if first is None else first / 1e3

    def describe(self):
        """A short problem string from the torch record's fields."""
        p = self.peer
        if p is None or "n" not in p:
            return "-"
        s = "n%s c%s %s k%s %s" % (
            p["n"], p["c"], "x".join(str(v) for v in p.get("in", [])),
            p["k"], "x".join(str(v) for v in p.get("filter", [])))
        if p.get("groups", 1) != 1:
            s += " g%s" % p["groups"]
        return s


class Pair(object):
    """Speed ratios peer / ours over the layers having both times."""

    def __init__(self, layers, ours_attr, peer_attr):
        self.layers = [l for l in layers
                       if getattr(l, ours_attr) is not None and
                       getattr(l, peer_attr) is not None]
        ours = [getattr(l, ours_attr) for l in self.layers]
        peer = [getattr(l, peer_attr) for l in self.layers]
        self.count = len(self.layers)
        self.totals = sum(peer) / sum(ours) if ours else None
        self.ratios = [p / o for p, o in zip(peer, ours)]
        self.geomean = geomean(self.ratios) if ours else None

    def worst(self):
        if not self.layers:
            return None, None
        i = min(range(self.count), key=lambda j: self.ratios[j])
        return self.layers[i], self.ratios[i]


# The H200's ceilings as measured on the device machine (KINDS.md): a
# 16-bit matrix product through PyTorch, and a device-to-device copy
# (bytes read plus written). The H100's, measured the same way: 798 TFLOP/s
# and 3.0 TB/s (--ceilings 798 3.0).
PEAK_TFLOPS = 788.0
PEAK_TBPS = 4.3


def work(rec):
    """(FLOP, fewest bytes moved) of a layer from its problem key:
    C-H-W-RxS-K-OH-OW-N-pads-strides-dilations-G-layout-type-dir (2-D), or
    None where the key does not read so."""
    parts = str(rec.get("problem_key", "")).split("-")
    try:
        if len(parts) != 15:
            return None
        c, h, w = int(parts[0]), int(parts[1]), int(parts[2])
        r, s = (int(v) for v in parts[3].split("x"))
        k, oh, ow, n = int(parts[4]), int(parts[5]), int(parts[6]), \
            int(parts[7])
        g = int(parts[11])
    except ValueError:
        return None
    es = 4 if parts[13] == "FP32" else 2
    flop = 2.0 * n * k * oh * ow * (c // g) * r * s
    elements = n * c * h * w + k * (c // g) * r * s + n * k * oh * ow
    return flop, float(elements * es)


def layer_rows(layers, peak_tflops=PEAK_TFLOPS, peak_tbps=PEAK_TBPS):
    """Per-layer table: the own kernels' pick, its rate and bandwidth beside
    the floor that the ceilings give, and PyTorch."""
    rows = []
    for l in layers:
        r = l.ours
        amount = work(r)
        rate = bw = floor = "-"
        if amount is not None and l.own is not None:
            flop, nbytes = amount
            rate = "%.0f" % (flop / (l.own * 1e-3) / 1e12)
            bw = "%.2f" % (nbytes / (l.own * 1e-3) / 1e12)
            floor = f3(max(flop / (peak_tflops * 1e12),
                           nbytes / (peak_tbps * 1e12)) * 1e3)
        rows.append([r["list"], r["direction"], r["type"], r["layout"],
                     str(r["line_no"]), l.describe(),
                     str(r.get("own_solver") or "-"), f3(l.own), rate, bw,
                     floor, f3(l.find), f3(l.torch),
                     f3(l.torch / l.own) if l.torch and l.own else "-"])
    return rows


def f3(v):
    return "-" if v is None else "%.3f" % v


def with_count(text, pair, layers):
    if pair.count and pair.count != layers:
        return "%s (n=%d)" % (text, pair.count)
    return text


def render(headers, rows, markdown):
    if markdown:
        lines = ["| " + " | ".join(headers) + " |",
                 "|" + "|".join("---" for _ in headers) + "|"]
        for r in rows:
            lines.append("| " + " | ".join(c.replace("|", "/") for c in r)
                         + " |")
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)),
             "  ".join("-" * w for w in widths)]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    return "\n".join(line.rstrip() for line in lines)


def order_key(lists):
    def key(row_key):
        name, direction, type_, layout, subset = row_key
        return (lists.index(name),
                DIRECTIONS.index(direction) if direction in DIRECTIONS else 9,
                TYPES.index(type_) if type_ in TYPES else 9, type_,
                LAYOUTS.index(layout) if layout in LAYOUTS else 9, layout,
                SUBSETS.index(subset))
    return key


LEGEND = """\
Speed ratios are peer time / convtune time: above 1.000 convtune is faster,
below 1.000 the peer is. find = convtune's find (best of every solver, the
library solvers included); own = best of convtune's own kernels only;
cuDNN graph = best cuDNN graph-API engine config, timed by convtune's
harness; torch = PyTorch's cuDNN path in benchmark mode (torch_peer.py).
"totals" = sum of the peer's times / sum of ours; "geomean" = geometric
mean of the per-layer ratios. find vs cuDNN graph uses find's pick and
cuDNN's best config timed again in alternation where the records have
them; "layers < 0.98" counts the layers where find's pick was slower than
that by more than 2%. "find timing / torch first call" is the time find's
timing stage took, summed over the layers, against the wall time of
PyTorch's first call of each (cuDNN's own find), and their ratio.
A ratio uses the layers having both of its times; "(n=N)" after it says it covers N layers rather than the row's
"layers" (those with all four times), over which the ms columns are summed."""


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Speed ratios of convtune against PyTorch and cuDNN's "
        "graph API, from bench_gpu_vs_cudnn --json and torch_peer.py --json.",
        epilog=LEGEND, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", nargs="+", required=True, metavar="OURS.json",
                    help="bench_gpu_vs_cudnn --json output(s)")
    ap.add_argument("--torch", nargs="+", required=True, metavar="TORCH.json",
                    help="torch_peer.py --json output(s)")
    ap.add_argument("--markdown", action="store_true",
                    help="print Markdown tables (default: aligned text)")
    ap.add_argument("--layers", action="store_true",
                    help="also print every layer: the own kernels' pick, its "
                    "TFLOP/s and TB/s (fewest bytes) beside the floor of the "
                    "H200's measured ceilings (%.0f TFLOP/s, %.1f TB/s), and "
                    "PyTorch's time" % (PEAK_TFLOPS, PEAK_TBPS))
    ap.add_argument("--ceilings", nargs=2, type=float,
                    metavar=("TFLOPS", "TBPS"),
                    default=[PEAK_TFLOPS, PEAK_TBPS],
                    help="the card's matrix rate (TFLOP/s) and copy "
                    "bandwidth (TB/s) for --layers' floor (default the "
                    "H200's; the H100's: 798 3.0)")
    args = ap.parse_args(argv)
    if min(args.ceilings) <= 0:
        ap.error("--ceilings: TFLOPS and TBPS must be positive, got %g %g" %
                 tuple(args.ceilings))

    notes = []
    ours = load(args.ours, OURS_KEYS, "ours", notes)
    peer = load(args.torch, TORCH_KEYS, "torch", notes)

    counts = {"no torch record": 0, "torch failed": 0, "type differs": 0,
              "no find time": 0, "no own time": 0, "no cuDNN graph time": 0}
    layers, lists = [], []
    for key, rec in ours.items():
        p = peer.get(key)
        if p is None:
            counts["no torch record"] += 1
        elif p.get("type") != rec.get("type"):
            counts["type differs"] += 1
            p = None
        layer = Layer(rec, p)
        if p is not None and layer.torch is None:
            counts["torch failed"] += 1
        if layer.find is None:
            counts["no find time"] += 1
        if layer.own is None:
            counts["no own time"] += 1
        if layer.cudnn is None:
            counts["no cuDNN graph time"] += 1
        layers.append(layer)
        if rec["list"] not in lists:
            lists.append(rec["list"])
    unmatched_torch = sum(1 for k in peer if k not in ours)

    groups = {}
    for layer in layers:
        r = layer.ours
        base = (r["list"], r["direction"], r["type"], r["layout"])
        groups.setdefault(base + ("all",), []).append(layer)
        if r.get("group") in ("grouped", "depthwise"):
            groups.setdefault(base + (r["group"],), []).append(layer)

    headers = ["list", "subset", "dir", "type", "layout", "layers",
               "find vs torch: totals", "find vs torch: geomean",
               "own vs torch: totals / geomean",
               "find vs cuDNN graph: totals / geomean",
               "layers < 0.98 vs cuDNN graph",
               "find timing / torch first call",
               "find ms", "own ms", "cuDNN graph ms", "torch ms"]
    worst_headers = ["list", "subset", "dir", "type", "layout", "line",
                     "problem", "find ms", "torch ms", "torch / find",
                     "find solver"]
    rows, worst_rows = [], []
    for gkey in sorted(groups, key=order_key(lists)):
        members = groups[gkey]
        full = [l for l in members if None not in
                (l.find, l.own, l.cudnn, l.torch)]
        n = len(full)
        ft = Pair(members, "find", "torch")
        ot = Pair(members, "own", "torch")
        # find's pick and the best cuDNN config re-timed in alternation
        # where the record has them (else the search's own medians).
        paired = [l for l in members if l.pair_cudnn is not None]
        fc = (Pair(paired, "pair_find", "pair_cudnn") if paired
              else Pair(members, "find", "cudnn"))
        below = sum(1 for r in fc.ratios if r < 0.98)
        # Fast find: our timing stage against PyTorch's first call.
        tf = Pair(members, "first_call_s", "timing_s")
        if full:
            totals = [f3(sum(getattr(l, a) for l in full))
                      for a in ("find", "own", "cudnn", "torch")]
        else:
            totals = ["-"] * 4
        rows.append(list(gkey[:1]) + [gkey[4]] + list(gkey[1:4]) + [
            str(n),
            with_count(f3(ft.totals), ft, n),
            with_count(f3(ft.geomean), ft, n),
            with_count("%s / %s" % (f3(ot.totals), f3(ot.geomean)), ot, n),
            with_count("%s / %s" % (f3(fc.totals), f3(fc.geomean)), fc, n),
            "%d of %d" % (below, fc.count),
            with_count("%s s / %s s = %s" % (
                "%.1f" % sum(l.timing_s for l in tf.layers),
                "%.1f" % sum(l.first_call_s for l in tf.layers),
                f3(tf.totals)), tf, n) if tf.count else "-",
        ] + totals)
        worst, ratio = ft.worst()
        if worst is not None:
            worst_rows.append(list(gkey[:1]) + [gkey[4]] + list(gkey[1:4]) + [
                str(worst.ours["line_no"]), worst.describe(), f3(worst.find),
                f3(worst.torch), f3(ratio),
                str(worst.ours.get("find_solver") or "-")])

    versions = sorted({(str(p.get("torch_version") or "-"),
                        str(p.get("cudnn_version") or "-"))
                       for p in peer.values()})
    title = "convtune against PyTorch (cuDNN benchmark mode) and cuDNN's " \
        "graph API"
    print(("## " if args.markdown else "") + title)
    print()
    if versions:
        print("torch peer: " + "; ".join("torch %s, cuDNN %s" % v
                                         for v in versions))
        print()
    print(LEGEND)
    print()
    print(render(headers, rows, args.markdown))
    print()
    print(("### " if args.markdown else "") +
          "Worst layer of each row (smallest torch / find ratio)")
    print()
    print(render(worst_headers, worst_rows, args.markdown))
    print()
    if args.layers:
        print(("### " if args.markdown else "") + "Every layer")
        print()
        print(render(["list", "dir", "type", "layout", "line", "problem",
                      "own pick", "own ms", "own TFLOP/s", "own TB/s",
                      "floor ms", "find ms", "torch ms", "torch / own"],
                     layer_rows(sorted(layers, key=lambda l: (
                         l.ours["direction"], l.ours["line_no"])),
                         *args.ceilings),
                     args.markdown))
        print()
    left_out = ["%d %s" % (v, k) for k, v in counts.items() if v]
    if unmatched_torch:
        left_out.append("%d torch records with no record of ours"
                        % unmatched_torch)
    joined = sum(1 for l in layers if l.peer is not None)
    print("Note: %d layers of ours, %d joined to a torch record; left out of "
          "the ratios that need the missing time: %s." % (
              len(layers), joined, ", ".join(left_out) if left_out
              else "none"))
    for line in notes:
        print("Note: " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
