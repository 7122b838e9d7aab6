"""The Python client against a real convtuned on the CPU: find, immediate mode,
workspace sizes, compile, status; errors carry the gRPC code and the field;
a problem asked twice costs one RPC."""

import unittest

import grpc

import convtune
from daemon import Daemon

LINE = "conv -n 2 -c 8 -H 10 -W 10 -k 16 -y 3 -x 3 -p 1 -q 1 -F 1"


class ProblemTest(unittest.TestCase):
    def test_driver_line_fields(self):
        (p,) = convtune.from_driver_line(
            "./bin/MIOpenDriver convfp16 -n 4 -c 32 -H 14 -W 15 -k 64 -y 3 -x 1 "
            "-p 1 -q 0 -u 2 -v 1 -l 1 -j 1 -g 2 --in_layout NHWC -F 2")
        self.assertEqual((p.n, p.c, p.k, p.in_size, p.filter), (4, 32, 64, (14, 15), (3, 1)))
        self.assertEqual((p.pad, p.stride, p.groups), ((1, 0), (2, 1), 2))
        self.assertEqual((p.layout, p.dtype, p.direction), ("NHWC", "fp16", "B"))
        self.assertEqual(len(convtune.from_driver_line(LINE.replace("-F 1", "-F 0"))), 3)
        (q,) = convtune.from_driver_line(
            "conv --spatial_dim 3 -n 1 -c 4 -! 5 -H 6 -W 7 -k 8 -@ 3 -y 3 -x 3 -F 4")
        self.assertEqual((q.in_size, q.filter, q.direction), ((5, 6, 7), (3, 3, 3), "W"))

    def test_driver_line_errors_name_the_flag(self):
        for line, flag in (("conv -n x", "-n"), ("conv -Q 1", "-Q"),
                           ("conv --in_layout NCWH", "--in_layout"),
                           ("deconv -n 1", "command"), ("conv -n", "-n")):
            with self.assertRaises(ValueError) as e:
                convtune.from_driver_line(line)
            self.assertIn(flag, str(e.exception))

    def test_keyword_problem(self):
        p = convtune.problem(n=1, c=3, k=8, in_size=(9, 9), filter=(3, 3), stride=2)
        self.assertEqual(p.out_size(), (4, 4))
        with self.assertRaises(ValueError) as e:
            convtune.problem(n=1, c=3, k=8, in_size=(9, 9), filter=(3, 3), layout="CHWN")
        self.assertIn("layout", str(e.exception))


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon().start()

    @classmethod
    def tearDownClass(cls):
        cls.daemon.remove()

    def test_find_then_the_cache(self):
        with convtune.Client(self.daemon.socket) as c:
            r = c.find(LINE, mode="normal")
            self.assertGreaterEqual(len(r.results), 2)
            self.assertTrue(r.device_key.startswith("cpu-"))
            times = [x.time_ms for x in r.results]
            self.assertEqual(times, sorted(times))
            rpcs = c.rpcs
            again = c.find(LINE, mode="normal")
            self.assertEqual(c.rpcs, rpcs)
            self.assertEqual(again, r)
            # Another client asks the daemon, which answers from its FindDb.
            with convtune.Client(self.daemon.socket) as other:
                hit = other.find(LINE, mode="hybrid")
            self.assertTrue(hit.from_db)
            self.assertEqual(hit.results[0].solver_name, r.results[0].solver_name)

    def test_immediate_workspace_compile_status(self):
        with convtune.Client(self.daemon.socket) as c:
            c.find(LINE, mode="hybrid")
            best = c.immediate(LINE)
            self.assertTrue(best.measured)
            self.assertEqual(best.provenance, "measured")
            s = c.solutions(LINE, max_count=4)
            self.assertEqual(s.solutions[0], best)
            self.assertGreaterEqual(c.workspace_size(LINE), best.workspace_bytes)
            self.assertEqual(c.workspace_size(LINE, best.solution_id), best.workspace_bytes)
            self.assertEqual(c.compile(LINE, best.solution_id), 0)  # CPU: nothing to compile
            st = c.status()
            self.assertEqual(st.role, "admin")  # the daemon's own user
            self.assertGreaterEqual(st.counters["finds"], 1)

    def test_errors_carry_the_code_and_the_field(self):
        with convtune.Client(self.daemon.socket) as c:
            bad = convtune.problem(n=1, c=0, k=8, in_size=(9, 9), filter=(3, 3))
            with self.assertRaises(convtune.ConvtuneError) as e:
                c.find(bad)
            self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("problem.c", e.exception.details)

    def test_no_daemon_is_unavailable(self):
        with convtune.Client(self.daemon.dir + "/absent.sock", timeout_s=5) as c:
            with self.assertRaises(convtune.ConvtuneError) as e:
                c.status()
            self.assertEqual(e.exception.code, grpc.StatusCode.UNAVAILABLE)


if __name__ == "__main__":
    unittest.main()
