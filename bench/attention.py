"""Benchmark: the NumPy reference attention against PyTorch, and online-softmax memory.

Run from the repository root:  .venv/bin/python bench/attention.py [--threads 1]

- Speed: ``solutions.soft_hard.attention`` (NumPy, float32) against PyTorch's fused
  ``scaled_dot_product_attention`` and against the naive PyTorch attention of d2l and
  minGPT, ``softmax(Q K^T / sqrt(d)) V`` as three ops, at B=8, h=8, n=512, d=64.
  The three run interleaved (one call of each per round), medians are compared as ratios.
- Memory: peak bytes allocated by ``online_softmax_attention`` (keys in blocks of 128)
  against the naive NumPy path (``attention``, which materialises the (n, n) weights), at
  n = 4096, 8192, 16384 with d=64 float32, measured with ``tracemalloc`` (NumPy reports
  its array buffers to it), as ratios.
- NumPy (OpenBLAS) and torch use the same number of threads, printed with the BLAS
  kernel threadpoolctl reports. OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, which force a
  slower kernel on this machine, are removed for this process only (by re-executing).
"""

import os
import sys

_FORCED_BLAS = [name for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if name in os.environ]
if _FORCED_BLAS and not os.environ.get("ATTENTION_BENCH_REEXEC"):
    env = {k: v for k, v in os.environ.items() if k not in _FORCED_BLAS}
    env["ATTENTION_BENCH_REEXEC"] = ",".join(f"{k}={os.environ[k]}" for k in _FORCED_BLAS)
    os.execve(sys.executable, [sys.executable] + sys.argv, env)

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402

from solutions.self_attention import online_softmax_attention, peak_memory  # noqa: E402
from solutions.soft_hard import attention  # noqa: E402


def naive_torch_attention(q, k, v):
    """softmax(Q K^T / sqrt(d)) V as three torch ops (d2l, minGPT)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, h, n, n)
    return torch.softmax(scores, dim=-1) @ v  # (B, h, n, d)


def time_interleaved(fns: dict, repeats: int) -> dict:
    """Median seconds per call; each round calls every function once, in turn."""
    for fn in fns.values():  # warm-up: allocator, BLAS threads, kernel selection
        fn()
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def bench_speed(batch, heads, n, d, repeats):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((batch, heads, n, d), dtype=np.float32) for _ in range(3))
    qt, kt, vt = torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v)
    fns = {
        "numpy attention": lambda: attention(q, k, v),
        "torch fused SDPA": lambda: F.scaled_dot_product_attention(qt, kt, vt),
        "torch naive (3 ops)": lambda: naive_torch_attention(qt, kt, vt),
    }
    with torch.inference_mode():
        ref = F.scaled_dot_product_attention(qt, kt, vt).numpy()
        out = attention(q, k, v)[0]
        assert out.dtype == np.float32, out.dtype
        np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-4)  # same answer, float32 rounding
        np.testing.assert_allclose(naive_torch_attention(qt, kt, vt).numpy(), ref, rtol=1e-3, atol=1e-4)
        medians = time_interleaved(fns, repeats)
    print(f"\n== speed: B={batch}, h={heads}, n={n}, d={d}, float32, median of {repeats} interleaved rounds ==")
    base = medians["numpy attention"]
    for name, seconds in medians.items():
        print(f"  {name:<22} {seconds * 1e3:8.1f} ms   numpy / this = {base / seconds:5.2f}")
    fused, naive = medians["torch fused SDPA"], medians["torch naive (3 ops)"]
    print(f"  numpy is {base / fused:.2f}x the fused kernel's time (target <= 3x) "
          f"and {base / naive:.2f}x the naive torch time (target < 1x)")
    return medians


def bench_memory(sizes, d, block_size):
    print(f"\n== peak memory (tracemalloc), one head, d={d}, float32, online block_size={block_size} ==")
    print(f"  {'n':>6} {'naive attention':>16} {'online softmax':>15} {'online / naive':>15}")
    rng = np.random.default_rng(1)
    ratios = {}
    for n in sizes:
        q, k, v = (rng.standard_normal((n, d), dtype=np.float32) for _ in range(3))
        online, peak_online = peak_memory(online_softmax_attention, q, k, v, block_size=block_size)
        del online
        (naive, _), peak_naive = peak_memory(attention, q, k, v)
        del naive
        ratios[n] = peak_online / peak_naive
        print(f"  {n:>6} {peak_naive / 2**20:>12.1f} MiB {peak_online / 2**20:>11.1f} MiB "
              f"{ratios[n]:>15.4f}  (1/{1 / ratios[n]:.0f})")
    return ratios


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="threads for both NumPy's BLAS and torch")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--sizes", type=int, nargs="*", default=[4096, 8192, 16384])
    parser.add_argument("--block-size", type=int, default=128)
    args = parser.parse_args()

    reexec = os.environ.get("ATTENTION_BENCH_REEXEC")
    if reexec:
        print(f"re-executed without {reexec} (for this process only)")
    torch.set_num_threads(args.threads)
    with threadpool_limits(limits=args.threads, user_api="blas"):
        blas = [i for i in threadpool_info() if i["user_api"] == "blas"]
        for info in blas:
            print(f"NumPy BLAS: {info['internal_api']} {info['version']}, kernel "
                  f"{info.get('architecture')}, {info['num_threads']} thread(s)")
        print(f"torch {torch.__version__}: {torch.get_num_threads()} thread(s); numpy {np.__version__}")
        bench_speed(batch=8, heads=8, n=512, d=64, repeats=args.repeats)
        if args.sizes:
            ratios = bench_memory(args.sizes, d=64, block_size=args.block_size)
            largest = max(ratios)
            print(f"  at n={largest}: online / naive = {ratios[largest]:.4f} (target <= 1/20 = 0.05)")


if __name__ == "__main__":
    main()
