"""convtune.torch on the CPU against a real convtuned: a small CNN (a ResNet
block, a depthwise and a grouped conv) forward and backward through convtune
matches torch's own convolution; a daemon restart mid-run falls back and
recovers; the fallback counter is right."""

import copy
import time
import unittest

import torch

import convtune
import convtune.nn
import convtune.torch as ct
from daemon import Daemon


class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.conv2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(c)
        self.bn2 = torch.nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


def small_cnn():
    torch.manual_seed(7)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2, padding=1),
        Block(16),
        torch.nn.Conv2d(16, 16, 3, padding=1, groups=16),  # depthwise
        torch.nn.Conv2d(16, 32, 1),
        torch.nn.Conv2d(32, 32, 3, padding=2, dilation=2, groups=4),  # grouped
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(32, 10))


CONVS = 6  # convolutions in small_cnn


def step(model, x):
    model.zero_grad()
    loss = model(x).square().sum()
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


class TorchTest(unittest.TestCase):
    def setUp(self):
        self.daemon = Daemon().start()
        ct.connect(self.daemon.socket)
        ct.set_mode("find")
        ct.reset_stats()

    def tearDown(self):
        ct.set_fallback(True)
        ct.set_deadlines()
        self.daemon.remove()

    def compare(self, memory_format):
        ref = small_cnn()
        ours = convtune.torch.patch(copy.deepcopy(ref))
        self.assertEqual(sum(isinstance(m, convtune.nn.Conv2d) for m in ours.modules()), CONVS)
        x = torch.randn(4, 3, 24, 24).contiguous(memory_format=memory_format)
        ct.set_fallback(False)  # every convolution must run on convtune
        loss, grads = step(ours, x)
        ref_loss, ref_grads = step(ref, x)
        torch.testing.assert_close(loss, ref_loss, rtol=1e-4, atol=1e-3)
        for g, r in zip(grads, ref_grads):
            torch.testing.assert_close(g, r, rtol=1e-3, atol=1e-3)
        s = ct.stats()
        self.assertEqual(s.get("convtune_F"), CONVS)
        self.assertEqual(s.get("convtune_W"), CONVS)
        # The first conv's input needs no gradient.
        self.assertEqual(s.get("convtune_B"), CONVS - 1)
        self.assertFalse([k for k in s if k.startswith("fallback")], s)

    def test_small_cnn_matches_torch(self):
        self.compare(torch.contiguous_format)

    def test_small_cnn_channels_last_matches_torch(self):
        self.compare(torch.channels_last)

    def test_functional_conv3d_with_bias(self):
        torch.manual_seed(3)
        x = torch.randn(2, 4, 5, 6, 7, requires_grad=True)
        w = torch.randn(8, 4, 3, 3, 3, requires_grad=True)
        b = torch.randn(8, requires_grad=True)
        ct.set_fallback(False)
        y = ct.conv3d(x, w, b, stride=(1, 2, 1), padding=1)
        ref = torch.nn.functional.conv3d(x, w, b, stride=(1, 2, 1), padding=1)
        torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4)
        dy = torch.randn_like(y)
        grads = torch.autograd.grad(y, (x, w, b), dy)
        ref_grads = torch.autograd.grad(ref, (x, w, b), dy)
        for g, r in zip(grads, ref_grads):
            torch.testing.assert_close(g, r, rtol=1e-3, atol=1e-3)

    def test_a_restart_mid_run_falls_back_and_recovers(self):
        model = convtune.torch.patch(small_cnn())
        x = torch.randn(2, 3, 16, 16)
        step(model, x)  # every shape chosen and its plan kept in-process
        self.assertFalse([k for k in ct.stats() if k.startswith("fallback")])
        self.daemon.stop()
        ct.reset_stats()
        # Shapes seen before still run on convtune with the daemon down.
        step(model, x)
        self.assertEqual(ct.stats().get("convtune_F"), CONVS)
        # A new shape falls back: forward, backward data and weights of
        # every convolution but the first's backward data.
        ct.reset_stats()
        y = torch.randn(2, 3, 20, 20)
        step(model, y)
        s = ct.stats()
        self.assertEqual(s.get("fallback_daemon_down"), 3 * CONVS - 1, s)
        self.assertNotIn("convtune_F", s)
        # Back again: the same new shape runs on convtune.
        self.daemon.start()
        time.sleep(ct.RETRY_S + 0.2)  # the pause after a failure
        ct.reset_stats()
        step(model, y)
        s = ct.stats()
        self.assertEqual(s.get("convtune_F"), CONVS, s)
        self.assertFalse([k for k in s if k.startswith("fallback")], s)

    def test_a_daemon_slow_past_the_deadline_falls_back_and_recovers(self):
        ct.set_deadlines(call=0.3, find=0.5)
        model = convtune.torch.patch(small_cnn())
        x = torch.randn(2, 3, 16, 16)
        step(model, x)  # connected; every shape chosen
        # A stopped daemon keeps its connection and answers nothing.
        self.daemon.pause()
        try:
            ct.reset_stats()
            start = time.monotonic()
            y = torch.randn(2, 3, 20, 20)
            step(model, y)
            waited = time.monotonic() - start
        finally:
            self.daemon.resume()
        s = ct.stats()
        self.assertEqual(s.get("fallback_daemon_slow"), 3 * CONVS - 1, s)
        self.assertNotIn("convtune_F", s)
        # One call waited for its deadline; the others went to torch at once.
        self.assertGreaterEqual(waited, 0.5)
        self.assertLess(waited, 0.5 + ct.RETRY_S, s)
        time.sleep(ct.RETRY_S + 0.2)
        ct.reset_stats()
        step(model, y)
        s = ct.stats()
        self.assertEqual(s.get("convtune_F"), CONVS, s)
        self.assertFalse([k for k in s if k.startswith("fallback")], s)

    def test_deadlines_out_of_range_name_the_argument(self):
        with self.assertRaisesRegex(ValueError, "^call: "):
            ct.set_deadlines(call=0)
        with self.assertRaisesRegex(ValueError, "^find: "):
            ct.set_deadlines(find=float("inf"))

    def test_operators_are_registered_with_meta_kernels(self):
        x = torch.empty(2, 3, 9, 9, device="meta")
        w = torch.empty(8, 3, 3, 3, device="meta")
        y = torch.ops.convtune.conv_forward(x, w, [2, 2], [1, 1], [1, 1], 1)
        self.assertEqual((y.shape, y.device.type), ((2, 8, 5, 5), "meta"))
        dy = torch.empty(2, 8, 5, 5, device="meta")
        dx = torch.ops.convtune.conv_backward_data(x, w, dy, [2, 2], [1, 1], [1, 1], 1)
        dw = torch.ops.convtune.conv_backward_weights(x, w, dy, [2, 2], [1, 1], [1, 1], 1)
        self.assertEqual((dx.shape, dw.shape), (x.shape, w.shape))

    def test_mismatched_tensors_are_torchs_to_refuse(self):
        x = torch.randn(1, 4, 6, 6)
        with self.assertRaises(RuntimeError):  # torch's own error
            ct.conv2d(x, torch.randn(8, 4, 3, 3, dtype=torch.float64))
        with self.assertRaises(RuntimeError):
            ct.conv2d(x, torch.randn(8, 3, 3, 3))  # 3 channels, not 4
        self.assertEqual(ct.stats().get("fallback_unsupported"), 2)
        self.assertNotIn("convtune_F", ct.stats())

    def test_fallback_off_raises(self):
        self.daemon.stop()
        ct.set_fallback(False)
        with self.assertRaises(RuntimeError) as e:
            ct.conv2d(torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3))
        self.assertIn("daemon_down", str(e.exception))


if __name__ == "__main__":
    unittest.main()
