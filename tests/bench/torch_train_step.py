"""A ResNet-50 training step (SGD, AMP fp16, channels_last) with its
convolutions through convtune.torch, beside the same step with
torch.backends.cudnn.benchmark = True, in one process on one GPU. Prints the
first iteration (where both tune) and the median of the steady ones.

    PYTHONPATH=build/python python3 tests/bench/torch_train_step.py --socket PATH \\
        [--batch 128] [--steps 10] [--mode find|immediate]
"""

import argparse
import copy
import statistics
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


def train(model, batch, steps, profile_steps=0):
    model = model.cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    x = torch.randn(batch, 3, 224, 224, device="cuda").contiguous(
        memory_format=torch.channels_last)
    labels = torch.randint(0, 1000, (batch,), device="cuda")
    def run_step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(x), labels)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    times = []
    for _ in range(steps + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        run_step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    gpu = device_ms(run_step, profile_steps) if profile_steps else (0, 0)
    return times[0], statistics.median(times[2:]), gpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--mode", default="find", choices=("find", "immediate"))
    ap.add_argument("--profile", type=int, default=0,
                    help="steps to profile for GPU kernel time (0: none)")
    args = ap.parse_args()
    torch.manual_seed(0)
    base = resnet50()
    torch.backends.cudnn.benchmark = True
    first_t, steady_t, gpu_t = train(copy.deepcopy(base), args.batch,
                                     args.steps, args.profile)
    ct.connect(args.socket)
    ct.set_mode(args.mode)
    first_c, steady_c, gpu_c = train(ct.patch(copy.deepcopy(base)), args.batch,
                                     args.steps, args.profile)
    print(f"| step (batch {args.batch}, AMP fp16, channels_last) | first ms | "
          f"steady ms (median of {args.steps - 1}) | GPU kernel ms per step | "
          "wall ms per profiled step |")
    print("|---|---|---|---|---|")
    print(f"| torch, cudnn.benchmark | {first_t:.0f} | {steady_t:.1f} | "
          f"{gpu_t[0]:.1f} | {gpu_t[1]:.1f} |")
    print(f"| convtune.torch ({args.mode}) | {first_c:.0f} | {steady_c:.1f} | "
          f"{gpu_c[0]:.1f} | {gpu_c[1]:.1f} |")
    print(f"steady ratio convtune / torch: {steady_c / steady_t:.3f}")
    print("convtune:", ct.stats())


if __name__ == "__main__":
    main()
