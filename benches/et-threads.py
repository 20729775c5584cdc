#!/usr/bin/env python3
"""Times ExecuTorch 1.5.1's own runtime (pybindings, XNNPACK) on one .pte at 1 and N threads.

The counterpart of `cargo xtask bench run MODEL.pte --threads N` for docs/benchmarks.md:
same file, same inputs (MODEL.in*.npy next to it), median of ITERS forwards after a warm-up,
XNNPACK's thread pool reset to each thread count. Needs the fixture venv (executorch, numpy);
not run by CI.

usage: et-threads.py MODEL.pte [--threads 1,2] [--iters 5]
"""
import argparse
import glob
import statistics
import time

import numpy as np
import torch
from executorch.extension.pybindings import portable_lib as rt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--iters", type=int, default=5)
    args = ap.parse_args()
    stem = args.model[: -len(".pte")]
    inputs = [torch.from_numpy(np.load(p)) for p in sorted(glob.glob(stem + ".in*.npy"))]
    for n in [int(t) for t in args.threads.split(",")]:
        rt._unsafe_reset_threadpool(n)
        got = rt._threadpool_get_thread_count()
        # Loaded after the reset: the XNNPACK runtime takes the thread pool at load.
        module = rt._load_for_executorch(args.model)
        module.forward(inputs)  # warm-up
        times = []
        for _ in range(args.iters):
            t0 = time.perf_counter()
            module.forward(inputs)
            times.append(time.perf_counter() - t0)
        print(
            f"{args.model}: ExecuTorch, {got} thread(s): median {statistics.median(times):.4f} s"
            f" over {len(times)} run(s) (min {min(times):.4f}, max {max(times):.4f})"
        )


if __name__ == "__main__":
    main()
