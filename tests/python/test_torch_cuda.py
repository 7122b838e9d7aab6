"""convtune.torch on CUDA tensors against a real convtuned on the GPU: fp32 and
fp16, NCHW and channels_last, forward and backward of a small CNN against
torch's own (cuDNN); inside a CUDA graph; under torch.compile. Skips, saying
so, where there is no CUDA device."""

import copy
import os
import unittest

import torch

import convtune.torch as ct
from daemon import Daemon
from test_torch import CONVS, small_cnn, step

HAVE_CUDA = torch.cuda.is_available()


@unittest.skipUnless(HAVE_CUDA, "no CUDA device here: the CUDA path is tested on the GPU machine")
class CudaTorchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = Daemon(backend="cuda").start()
        ct.connect(cls.daemon.socket)
        ct.set_mode("find")

    @classmethod
    def tearDownClass(cls):
        cls.daemon.remove()

    def setUp(self):
        ct.reset_stats()
        ct.set_fallback(False)
        # torch's own convolutions, the reference, in full fp32.
        torch.backends.cudnn.allow_tf32 = False

    def tearDown(self):
        ct.set_fallback(True)

    def compare(self, dtype, memory_format, tol):
        ref = small_cnn().cuda().to(dtype)
        ours = ct.patch(copy.deepcopy(ref))
        x = torch.randn(4, 3, 24, 24, device="cuda", dtype=dtype)
        x = x.contiguous(memory_format=memory_format)
        loss, grads = step(ours, x)
        ref_loss, ref_grads = step(ref, x)
        torch.testing.assert_close(loss, ref_loss, rtol=tol, atol=tol * 10)
        for g, r in zip(grads, ref_grads):
            torch.testing.assert_close(g, r, rtol=tol, atol=tol * 10)
        s = ct.stats()
        self.assertEqual(s.get("convtune_F"), CONVS, s)
        self.assertEqual(s.get("convtune_W"), CONVS, s)

    def test_fp32(self):
        self.compare(torch.float32, torch.contiguous_format, 1e-3)

    def test_fp32_channels_last(self):
        self.compare(torch.float32, torch.channels_last, 1e-3)

    def test_fp16_channels_last(self):
        self.compare(torch.float16, torch.channels_last, 2e-2)

    def test_runs_on_the_current_stream(self):
        conv = ct.patch(torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1))).cuda()
        x = torch.randn(8, 16, 32, 32, device="cuda")
        want = torch.nn.functional.conv2d(x, conv[0].weight, conv[0].bias, padding=1)
        conv(x)  # chosen and loaded
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                y = conv(x)
        torch.cuda.current_stream().wait_stream(side)
        torch.testing.assert_close(y, want, rtol=1e-3, atol=1e-3)

    def test_cuda_graph(self):
        model = ct.patch(small_cnn()).cuda().eval()
        x = torch.randn(4, 3, 24, 24, device="cuda")
        with torch.no_grad():
            want = model(x)  # every shape chosen and loaded
            g = torch.cuda.CUDAGraph()
            static_x = x.clone()
            with torch.cuda.graph(g):
                static_y = model(static_x)
            static_x.copy_(torch.randn_like(x))
            g.replay()
            fresh = model(static_x)
        torch.cuda.synchronize()
        torch.testing.assert_close(static_y, fresh, rtol=1e-4, atol=1e-4)
        self.assertFalse(torch.equal(static_y, want))

    @unittest.skipUnless(hasattr(torch, "compile"), "torch.compile needs torch 2")
    def test_torch_compile(self):
        ref = small_cnn().cuda()
        ours = ct.patch(copy.deepcopy(ref))
        compiled = torch.compile(ours)
        x = torch.randn(4, 3, 24, 24, device="cuda")
        loss, grads = step(compiled, x)
        ref_loss, ref_grads = step(ref, x)
        torch.testing.assert_close(loss, ref_loss, rtol=1e-3, atol=1e-2)
        for g, r in zip(grads, ref_grads):
            torch.testing.assert_close(g, r, rtol=1e-3, atol=1e-2)
        self.assertGreaterEqual(ct.stats().get("convtune_F", 0), CONVS)


if __name__ == "__main__":
    unittest.main()
