"""Host cost of a convtune.torch call: a tiny convolution (so the kernel is
almost free) through convtune.torch.conv2d and through torch's own conv2d,
forward only and forward + backward, medians of repeated batches of calls.

    PYTHONPATH=build/python /usr/bin/python3 tests/bench/python_overhead.py --socket PATH
"""

import argparse
import statistics
import time

import torch

import convtune.torch as ct


def per_call_us(fn, calls=200, repeats=9):
    fn()  # the first call of a shape asks the daemon
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        runs.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    ct.connect(args.socket)
    ct.set_mode("find")
    ct.set_fallback(False)
    x = torch.randn(1, 4, 4, 4, device=args.device, requires_grad=True)
    w = torch.randn(4, 4, 1, 1, device=args.device, requires_grad=True)
    ours_f = per_call_us(lambda: ct.conv2d(x, w))
    torch_f = per_call_us(lambda: torch.nn.functional.conv2d(x, w))
    ours_fb = per_call_us(lambda: ct.conv2d(x, w).sum().backward())
    torch_fb = per_call_us(lambda: torch.nn.functional.conv2d(x, w).sum().backward())
    print("| call | convtune.torch us | torch us | convtune's extra us |")
    print("|---|---|---|---|")
    print(f"| forward | {ours_f:.1f} | {torch_f:.1f} | {ours_f - torch_f:.1f} |")
    print(f"| forward + backward | {ours_fb:.1f} | {torch_fb:.1f} | {ours_fb - torch_fb:.1f} |")
    # The C API call alone (the forward's plan on the same tensors).
    (key, (p, desc, y_shape)), = [(k, v) for k, v in ct._calls.items() if k[0] == "F"]
    solution, ws, _, _, _ = ct._choices[key]
    y = torch.empty(y_shape, device=args.device)
    device = x.device.index if x.is_cuda else None
    stream = torch.cuda.current_stream().cuda_stream if x.is_cuda else None
    xd, wd = x.detach(), w.detach()
    capi = per_call_us(lambda: desc.run("F", solution, xd.data_ptr(), wd.data_ptr(),
                                        y.data_ptr(), None, 0, device, stream))
    print(f"| the C API call alone (forward) | {capi:.1f} | | |")
    print("convtune:", ct.stats())


if __name__ == "__main__":
    main()
