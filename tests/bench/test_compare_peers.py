"""compare_peers.py on small hand-made records: the joined ratios, and the
per-layer rates beside the floor."""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_peers  # noqa: E402

KEY = "64-56-56-3x3-64-56-56-128-1x1-1x1-1x1-1-NHWC-FP16-F"


def ours(line_no, key, own_ms):
    return {"list": "L.txt", "line_no": line_no, "direction": "F",
            "type": "fp16", "layout": "NHWC", "group": "dense",
            "problem_key": key, "find_ms": 0.1, "own_ms": own_ms,
            "cudnn_ms": 0.1, "own_solver": "gpu_tensor_core_wgmma [1]"}


def peer(line_no, torch_ms):
    return {"list": "L.txt", "line_no": line_no, "direction": "F",
            "type": "fp16", "layout": "NHWC", "n": 128, "c": 64, "k": 64,
            "groups": 1, "in": [56, 56], "filter": [3, 3],
            "torch_ms": torch_ms}


class ComparePeersTest(unittest.TestCase):
    def run_tool(self, our_records, peer_records, *flags):
        with tempfile.TemporaryDirectory() as d:
            a, b = os.path.join(d, "a.json"), os.path.join(d, "b.json")
            with open(a, "w") as f:
                json.dump(our_records, f)
            with open(b, "w") as f:
                json.dump(peer_records, f)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = compare_peers.main(["--ours", a, "--torch", b] +
                                        list(flags))
        self.assertEqual(rc, 0)
        return out.getvalue()

    def test_work_reads_the_problem_key(self):
        flop, nbytes = compare_peers.work({"problem_key": KEY})
        self.assertEqual(flop, 2.0 * 128 * 64 * 56 * 56 * 64 * 9)
        self.assertEqual(nbytes, (2 * 128 * 64 * 56 * 56 + 64 * 64 * 9) * 2)
        self.assertIsNone(compare_peers.work({"problem_key": "1-2-3"}))
        self.assertIsNone(compare_peers.work({}))

    def test_layers_give_each_rate_beside_the_floor(self):
        text = self.run_tool([ours(1, KEY, 0.1), ours(2, "bad-key", 0.2)],
                             [peer(1, 0.2), peer(2, 0.1)], "--layers",
                             "--markdown")
        rows = [l for l in text.splitlines()
                if l.startswith("| L.txt | F | fp16 | NHWC | ")]
        self.assertEqual(len(rows), 2, text)
        cells = [c.strip() for c in rows[0].strip("|").split("|")]
        # 29.6 GFLOP in 0.1 ms; 102.8 MB in 0.1 ms; the floor is the FLOP at
        # 788 TFLOP/s.
        self.assertEqual(cells[7:11], ["0.100", "296", "1.03", "0.038"])
        self.assertEqual(cells[13], "2.000")
        cells = [c.strip() for c in rows[1].strip("|").split("|")]
        self.assertEqual(cells[8:11], ["-", "-", "-"])
        self.assertEqual(cells[13], "0.500")

    def test_ceilings_set_the_floor(self):
        # 102.8 MB at 0.1 TB/s take 1.028 ms, more than the FLOP at 1000.
        text = self.run_tool([ours(1, KEY, 0.1)], [peer(1, 0.2)], "--layers",
                             "--markdown", "--ceilings", "1000", "0.1")
        row = [l for l in text.splitlines()
               if l.startswith("| L.txt | F | fp16 | NHWC | ")][0]
        cells = [c.strip() for c in row.strip("|").split("|")]
        self.assertEqual(cells[10], "1.028")

    def test_without_layers_there_is_no_layer_table(self):
        text = self.run_tool([ours(1, KEY, 0.1)], [peer(1, 0.2)])
        self.assertNotIn("Every layer", text)


if __name__ == "__main__":
    unittest.main()
