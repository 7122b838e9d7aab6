"""A ResNet-50 training step (SGD, AMP fp16, channels_last) with its
convolutions through convtune.torch, beside the same step with
torch.backends.cudnn.benchmark = True, in one process on one GPU. Prints the
first step (where both tune; convtune's with the daemon's FindDb empty, and
again as a new client once the daemon knows every shape) and the median of the
steady steps, the two models alternating in rounds.

    PYTHONPATH=build/python python3 tests/bench/torch_train_step.py --socket PATH \\
        [--batch 128] [--steps 10] [--rounds 3] [--mode find|immediate]
"""

import argparse
import contextlib
import copy
import statistics
import sys
import time

import torch

import convtune.torch as ct


def resnet50(classes=1000):
    def bottleneck(cin, width, stride):
        cout = width * 4
        body = torch.nn.Sequential(
            torch.nn.Conv2d(cin, width, 1, bias=False), torch.nn.BatchNorm2d(width),
            torch.nn.ReLU(inplace=True),
            torch.nn.Conv2d(width, width, 3, stride, 1, bias=False),
            torch.nn.BatchNorm2d(width), torch.nn.ReLU(inplace=True),
            torch.nn.Conv2d(width, cout, 1, bias=False), torch.nn.BatchNorm2d(cout))
        skip = None
        if stride != 1 or cin != cout:
            skip = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       torch.nn.BatchNorm2d(cout))
        return Residual(body, skip)

    layers = [torch.nn.Conv2d(3, 64, 7, 2, 3, bias=False), torch.nn.BatchNorm2d(64),
              torch.nn.ReLU(inplace=True), torch.nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(bottleneck(cin, width, stride if i == 0 else 1))
            cin = width * 4
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(cin, classes)]
    return torch.nn.Sequential(*layers)


class Residual(torch.nn.Module):
    def __init__(self, body, skip):
        super().__init__()
        self.body, self.skip = body, skip

    def forward(self, x):
        return torch.relu(self.body(x) + (x if self.skip is None else self.skip(x)))


def device_ms(run_step, steps=3):
    """Milliseconds of GPU kernels per step (every kernel of the process,
    through CUPTI: convtune's too), and the wall milliseconds per step."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        for _ in range(steps):
            run_step()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1e3 / steps
    total_us = sum(e.self_device_time_total for e in prof.key_averages()
                   if e.device_type == torch.autograd.DeviceType.CUDA)
    return total_us / 1e3 / steps, wall


class Trainer:
    """One model's training step (SGD, AMP fp16, channels_last) on a fixed
    batch."""

    def __init__(self, model, batch):
        self.model = model = model.cuda().to(memory_format=torch.channels_last)
        self.opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        self.scaler = torch.amp.GradScaler("cuda")
        self.x = torch.randn(batch, 3, 224, 224, device="cuda").contiguous(
            memory_format=torch.channels_last)
        self.labels = torch.randint(0, 1000, (batch,), device="cuda")

    def run_step(self):
        self.opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(self.model(self.x),
                                                     self.labels)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)
        self.scaler.update()

    def timed(self, steps=1):
        """Wall milliseconds of each of `steps` steps, each from an idle GPU
        to its end."""
        times = []
        for _ in range(steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            self.run_step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        return times

    def host_ms(self, steps=5):
        """Host milliseconds of a step: from an idle GPU to the last call
        queued (the median of `steps`)."""
        host = []
        for _ in range(steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            self.run_step()
            host.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
        return statistics.median(host)

    def device_ms(self, steps=3):
        return device_ms(self.run_step, steps)

    def host_profile(self, steps):
        """The top functions of `steps` steps under cProfile, to stderr."""
        import cProfile
        import pstats
        # Backward on this thread, where the profiler sees it.
        single = getattr(torch.autograd, "set_multithreading_enabled", None)
        prof = cProfile.Profile()
        with single(False) if single else contextlib.nullcontext():
            prof.enable()
            for _ in range(steps):
                self.run_step()
            torch.cuda.synchronize()
            prof.disable()
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(25)


def host_per_call(out):
    """Host microseconds of each convolution call of the step with the GPU
    idle: convtune's C API call, beside torch's aten call of the same
    direction; and convtune's GPU microseconds. One table row per call."""
    def median_us(fn, times=15):
        fn()
        runs = []
        for _ in range(times):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            runs.append((time.perf_counter() - t0) * 1e6)
        return statistics.median(runs)

    def gpu_us(fn, times=10):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(times):
            fn()
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop) * 1e3 / times

    print("| dir | x | w | stride | solver | C API host us | torch host us | "
          "GPU us |", file=out)
    print("|---|---|---|---|---|---|---|---|", file=out)
    totals = [0.0, 0.0, 0.0]
    stream = torch.cuda.current_stream().cuda_stream or 1
    for key, (p, desc, y_shape) in sorted(ct._calls.items(), key=str):
        direction, x_shape, w_shape, dtype = key[0], key[1], key[2], key[3]
        stride, padding, dilation, groups, fmt = key[7:12]
        choice = ct._choices.get(key)
        if choice is None:
            continue
        solution, ws = choice[0], choice[1]
        names = {sol.solution_id: sol.solver_name.decode()
                 for sol in desc.solutions(direction, 0, 32)}
        x = torch.randn(x_shape, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
        w = torch.randn(w_shape, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
        y = torch.randn(y_shape, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
        work = torch.empty(max(ws, 1), dtype=torch.uint8, device="cuda")
        ours = lambda: desc.run(direction, solution, x.data_ptr(), w.data_ptr(),
                                y.data_ptr(), work.data_ptr(), ws, 0, stream)
        mask = [direction == "B", direction == "W", False]
        theirs = ((lambda: torch.ops.aten.convolution(
            x, w, None, stride, padding, dilation, False, [0] * len(stride), groups))
            if direction == "F" else (lambda: torch.ops.aten.convolution_backward(
                y, x, w, None, stride, padding, dilation, False,
                [0] * len(stride), groups, mask)))
        row = (median_us(ours), median_us(theirs), gpu_us(ours))
        totals = [t + r for t, r in zip(totals, row)]
        print(f"| {direction} | {tuple(x_shape)} | {tuple(w_shape)} | {stride} | "
              f"{names.get(solution, solution)} | {row[0]:.1f} | {row[1]:.1f} | "
              f"{row[2]:.1f} |", file=out)
    print(f"| all | | | | | {totals[0]:.0f} | {totals[1]:.0f} | {totals[2]:.0f} |",
          file=out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10,
                    help="steady steps per round of each model")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of steady steps, the models alternating")
    ap.add_argument("--mode", default="find", choices=("find", "immediate"))
    ap.add_argument("--profile", type=int, default=0,
                    help="steps to profile for GPU kernel time (0: none)")
    ap.add_argument("--host-profile", type=int, default=0,
                    help="steps of convtune's model to run under cProfile, "
                    "its top functions printed to stderr (0: none)")
    ap.add_argument("--host-per-call", action="store_true",
                    help="then a table of each call's host time with the GPU idle")
    args = ap.parse_args()
    torch.manual_seed(0)
    base = resnet50()
    torch.backends.cudnn.benchmark = True
    theirs = Trainer(copy.deepcopy(base), args.batch)
    first_t = theirs.timed()[0]
    ct.connect(args.socket)
    ct.set_mode(args.mode)
    cold = Trainer(ct.patch(copy.deepcopy(base)), args.batch)
    first_c = cold.timed()[0]
    del cold
    # A new client of the same daemon, as a second job on the node: the
    # daemon's FindDb answers every shape.
    ct.connect(args.socket)
    ct.set_mode(args.mode)
    ours = Trainer(ct.patch(copy.deepcopy(base)), args.batch)
    first_w = ours.timed()[0]
    steady_t, steady_c = [], []
    for _ in range(args.rounds):  # alternated, so drift hits both
        steady_t += theirs.timed(args.steps)
        steady_c += ours.timed(args.steps)
    host_t, host_c = theirs.host_ms(), ours.host_ms()
    gpu_t = theirs.device_ms(args.profile) if args.profile else (0, 0)
    gpu_c = ours.device_ms(args.profile) if args.profile else (0, 0)
    if args.host_profile:
        ours.host_profile(args.host_profile)
    med_t, med_c = statistics.median(steady_t), statistics.median(steady_c)
    print(f"| step (batch {args.batch}, AMP fp16, channels_last) | first ms "
          f"(cold) | first ms (FindDb warm) | steady ms: median of "
          f"{len(steady_t)} (min, max) | host ms per step | GPU kernel ms per "
          "step | wall ms per profiled step |")
    print("|---|---|---|---|---|---|---|")
    print(f"| torch, cudnn.benchmark | {first_t:.0f} | | {med_t:.1f} "
          f"({min(steady_t):.1f}, {max(steady_t):.1f}) | {host_t:.1f} | "
          f"{gpu_t[0]:.1f} | {gpu_t[1]:.1f} |")
    print(f"| convtune.torch ({args.mode}) | {first_c:.0f} | {first_w:.0f} | "
          f"{med_c:.1f} ({min(steady_c):.1f}, {max(steady_c):.1f}) | "
          f"{host_c:.1f} | {gpu_c[0]:.1f} | {gpu_c[1]:.1f} |")
    print(f"steady ratio convtune / torch: {med_c / med_t:.3f}")
    print("convtune:", ct.stats())
    if args.host_per_call:
        host_per_call(sys.stdout)


if __name__ == "__main__":
    main()
