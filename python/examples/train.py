"""A training loop whose convolutions run through convtune: the model's
Conv2d modules are swapped by convtune.torch.patch, and each direction of
each layer uses the plan the node's convtuned chose for it.

    PYTHONPATH=build/python /usr/bin/python3 python/examples/train.py \\
        [--socket PATH] [--mode immediate|find] [--steps N] [--device cpu|cuda]
"""

import argparse
import time

import torch

import convtune.torch as ct


def model(classes=10):
    def block(cin, cout, stride):
        return torch.nn.Sequential(
            torch.nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
            torch.nn.BatchNorm2d(cout), torch.nn.ReLU(inplace=True),
            torch.nn.Conv2d(cout, cout, 3, padding=1, groups=cout, bias=False),
            torch.nn.Conv2d(cout, cout, 1, bias=False),
            torch.nn.BatchNorm2d(cout), torch.nn.ReLU(inplace=True))

    return torch.nn.Sequential(block(3, 32, 2), block(32, 64, 2),
                               block(64, 128, 2), torch.nn.AdaptiveAvgPool2d(1),
                               torch.nn.Flatten(), torch.nn.Linear(128, classes))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--socket", help="convtuned's socket (default: the default socket)")
    ap.add_argument("--mode", default="immediate", choices=("immediate", "find"))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    ct.connect(args.socket)
    ct.set_mode(args.mode)
    net = ct.patch(model()).to(args.device)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    torch.manual_seed(0)
    x = torch.randn(args.batch, 3, 32, 32, device=args.device)
    labels = torch.randint(0, 10, (args.batch,), device=args.device)
    for step in range(args.steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), labels)
        loss.backward()
        opt.step()
        print(f"step {step:3d}  loss {loss.item():.4f}  "
              f"{(time.perf_counter() - t0) * 1e3:7.1f} ms")
    print("convtune:", ct.stats())


if __name__ == "__main__":
    main()
