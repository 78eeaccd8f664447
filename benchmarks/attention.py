"""Time attnlib's multi-head attention against direct SDPA and torch.nn.MultiheadAttention.

Four ways to compute the same self-attention, in eval mode under ``torch.inference_mode``:

(a) ``MultiHeadAttention`` from scratch (``fused=False``): scores, masked softmax, weights @ V;
(b) ``MultiHeadAttention`` fused (``fused=True``): ``F.scaled_dot_product_attention`` inside;
(c) direct SDPA: the same projections with ``F.linear`` on the same weights, view/transpose,
    SDPA, merge, output projection, i.e. (b) without attnlib's checks and wrappers;
(d) ``torch.nn.MultiheadAttention`` holding the same weights.

Times are medians over rounds of ``torch.utils.benchmark.Timer`` samples (the timer
synchronises CUDA); the variants are interleaved within each round so that load from elsewhere
hits them alike, and each ratio is the median over rounds of that round's time over (c)'s.
"checks ms" is attnlib's input checks alone (``_check_inputs``); "isnan ms" one NaN scan.
The last line says OK when the fused path is within 1.2x of direct SDPA at every size, else
FAIL; the script exits 0 either way.

    python benchmarks/attention.py [--device cpu] [--repeats 15] [--threads N] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils import benchmark

from attnlib.attention import MultiHeadAttention
from attnlib.config import choose_device

# (batch, seq, d_model, heads)
FULL_SIZES = [(8, 128, 256, 8), (4, 512, 512, 8), (2, 1024, 512, 8)]
QUICK_SIZES = [(4, 64, 128, 4), (2, 256, 256, 8)]
THRESHOLD = 1.2
VARIANTS = ("scratch", "fused", "direct", "torch")


def direct_sdpa(mha: MultiHeadAttention) -> Callable[[torch.Tensor], torch.Tensor]:
    """The fused path written inline, on the same weights, with no checks."""
    heads, head_dim, d_model = mha.num_heads, mha.head_dim, mha.d_model
    wq, bq = mha.query_projection.weight, mha.query_projection.bias
    wk, bk = mha.key_projection.weight, mha.key_projection.bias
    wv, bv = mha.value_projection.weight, mha.value_projection.bias
    wo, bo = mha.output_projection.weight, mha.output_projection.bias

    def run(x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        q = F.linear(x, wq, bq).view(batch, seq, heads, head_dim).transpose(1, 2)
        k = F.linear(x, wk, bk).view(batch, seq, heads, head_dim).transpose(1, 2)
        v = F.linear(x, wv, bv).view(batch, seq, heads, head_dim).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v)
        return F.linear(out.transpose(1, 2).reshape(batch, seq, d_model), wo, bo)

    return run


def build(size: tuple[int, int, int, int], device: torch.device) -> dict[str, Callable]:
    """The four callables for one size, on one shared input; checks that they agree."""
    batch, seq, d_model, heads = size
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(d_model, heads, batch_first=True).to(device).eval()
    ours = MultiHeadAttention(d_model, heads).to(device).eval().load_from_torch(theirs)
    x = torch.randn(batch, seq, d_model, device=device)
    direct = direct_sdpa(ours)
    calls = {
        "scratch": lambda: ours(x, fused=False)[0],
        "fused": lambda: ours(x, fused=True)[0],
        "direct": lambda: direct(x),
        "torch": lambda: theirs(x, x, x, need_weights=False)[0],
        "checks": lambda: ours._check_inputs(x, x, x),
        "isnan": lambda: bool(torch.isnan(x).any()),
    }
    reference = calls["direct"]()
    for name in ("scratch", "fused", "torch"):
        torch.testing.assert_close(calls[name](), reference, rtol=1e-4, atol=1e-4, msg=name)
    return calls


def measure(calls: dict[str, Callable], rounds: int, target_s: float) -> dict[str, list[float]]:
    """Seconds per call of each variant, one sample per round, variants interleaved.

    Each sample times enough calls to last about ``target_s``; the order of the variants
    rotates from round to round, so a burst of load from elsewhere hits them alike and the
    per-round ratios stay comparable.
    """
    threads = torch.get_num_threads()
    timers = {
        name: benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
        for name, fn in calls.items()
    }
    numbers = {}
    for name, timer in timers.items():
        timer.timeit(3)  # warm-up: allocator, kernels, lazy initialisation
        numbers[name] = max(1, round(target_s / timer.timeit(3).median))
    names = list(timers)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(timers[name].timeit(numbers[name]).median)
    return samples


def summarise(samples: dict[str, list[float]]) -> tuple[dict[str, float], dict[str, float]]:
    """Median ms per variant, and the median over rounds of each variant's time / direct's."""
    ms = {name: 1e3 * statistics.median(values) for name, values in samples.items()}
    ratios = {
        name: statistics.median(
            mine / direct for mine, direct in zip(samples[name], samples["direct"], strict=True)
        )
        for name in samples
    }
    return ms, ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cpu, cuda, mps (default: best present)")
    parser.add_argument("--repeats", type=int, default=15, help="interleaved rounds per size")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, shorter runs")
    args = parser.parse_args()

    device = choose_device(args.device)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    target_s = 0.01 if args.quick else 0.05
    print(
        f"device: {device}"
        + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else "")
        + f" | torch {torch.__version__} | threads {torch.get_num_threads()}"
        + f" | rounds {args.repeats} | float32, eval, inference_mode, no mask"
        + f" | load average {os.getloadavg()[0]:.2f}"
    )
    header = (
        f"{'batch':>5} {'seq':>5} {'d_model':>7} {'heads':>5} | "
        + " ".join(f"{name + ' ms':>10}" for name in VARIANTS)
        + " | "
        + " ".join(f"{name + '/dir':>11}" for name in VARIANTS if name != "direct")
        + f" | {'checks ms':>9} {'isnan ms':>8}"
    )
    print(header)
    print("-" * len(header))
    worst = 0.0
    with torch.inference_mode():
        for size in sizes:
            ms, ratios = summarise(measure(build(size, device), args.repeats, target_s))
            worst = max(worst, ratios["fused"])
            print(
                " ".join(f"{n:>{w}}" for n, w in zip(size, (5, 5, 7, 5), strict=True))
                + " | "
                + " ".join(f"{ms[name]:>10.3f}" for name in VARIANTS)
                + " | "
                + " ".join(f"{ratios[name]:>10.2f}x" for name in VARIANTS if name != "direct")
                + f" | {ms['checks']:>9.3f} {ms['isnan']:>8.3f}"
            )
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (CPU timings are noisy under load)")
    verdict = "OK" if worst <= THRESHOLD else "FAIL"
    print(
        f"{verdict}: fused path is {'within' if verdict == 'OK' else 'NOT within'} "
        f"{THRESHOLD}x of direct SDPA at every size (worst fused/direct = {worst:.2f}x)"
    )


if __name__ == "__main__":
    main()
