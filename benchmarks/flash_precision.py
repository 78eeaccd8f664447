"""flash_attention in half precision: its error against SDPA's, and what float32 state costs.

The accuracy table runs ``attnlib.flash.flash_attention``, SDPA and ``attend`` on the same
float16 and bfloat16 inputs ``(1, 2, n, 64)`` (queries, keys and values each ``scale`` times a
standard normal), causal and not, and gives each one's largest error against float64 SDPA on
those inputs, for the output and for the gradients of ``(output * d_out).sum()``.

The timing compares ``flash_attention`` on the CPU in float32, forward and backward, with an
earlier ``flash.py`` given by ``--baseline`` (for issue 38, the one before the float32 state:
``git show <commit>:attnlib/flash.py > /tmp/flash_before.py``), on the same inputs; the two are
interleaved round by round, and the ratio is the median over rounds of new / baseline. The last
line says OK when that ratio is at most 1.10, else FAIL; the script exits 0 either way.

    python benchmarks/flash_precision.py [--n 256] [--baseline FILE] [--repeats 15]
        [--threads N]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F
from torch.utils import benchmark

from attnlib.attention import attend
from attnlib.flash import flash_attention
from attnlib.masks import causal_mask

DTYPES = (torch.bfloat16, torch.float16)
SCALES = (1, 30, 300)
THRESHOLD = 1.10
# (batch, heads, n, head_dim) of the float32 timing
TIMED_SIZE = (2, 4, 512, 64)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """attnlib's from-scratch attention, with the causal mask when asked: (..., n, d_v)."""
    n_q, n_k = q.shape[-2], k.shape[-2]
    return attend(q, k, v, causal_mask(n_q, n_k) if causal else None)[0]


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """torch's fused attention: (..., n, d_v)."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """attnlib's tiled attention, tiles of 64: (..., n, d_v)."""
    return flash_attention(q, k, v, causal=causal)


def outputs_and_grads(attention: Callable, inputs: tuple, d_out: torch.Tensor) -> tuple:
    """attention(q, k, v) and the gradients of (output * d_out).sum() for q, k and v."""
    q, k, v = (t.detach().clone().requires_grad_(True) for t in inputs)
    output = attention(q, k, v)
    return (output, *torch.autograd.grad(output, (q, k, v), d_out.to(output.dtype)))


def errors(dtype: torch.dtype, scale: float, causal: bool, n: int) -> dict[str, list[float]]:
    """Per path, the largest error of output, dq, dk and dv against float64 SDPA."""
    generator = torch.Generator().manual_seed(0)
    inputs = tuple(
        (scale * torch.randn(1, 2, n, 64, generator=generator)).to(dtype) for _ in range(3)
    )
    d_out = torch.randn(1, 2, n, 64, generator=generator)
    wide = tuple(t.double() for t in inputs)
    exact = outputs_and_grads(lambda *qkv: _sdpa(*qkv, causal), wide, d_out.double())
    found = {}
    for name, path in (("flash", _flash), ("sdpa", _sdpa), ("attend", _attend)):
        results = outputs_and_grads(lambda *qkv, path=path: path(*qkv, causal), inputs, d_out)
        found[name] = [
            (mine.double() - ref).abs().max().item()
            for mine, ref in zip(results, exact, strict=True)
        ]
    return found


def print_errors(n: int) -> None:
    """The accuracy table: flash, SDPA and attend, each against float64 SDPA."""
    print(f"largest error against float64 SDPA, inputs (1, 2, {n}, 64) x scale:")
    quantities = ("out", "dq", "dk", "dv")
    header = f"{'dtype':>8} {'scale':>5} {'causal':>6} | " + " | ".join(
        f"{what + ' flash':>10} {'sdpa':>9} {'attend':>9}" for what in quantities
    )
    print(header)
    print("-" * len(header))
    for dtype in DTYPES:
        for scale in SCALES:
            for causal in (False, True):
                found = errors(dtype, scale, causal, n)
                flash, sdpa, ours = found["flash"], found["sdpa"], found["attend"]
                columns = " | ".join(
                    f"{flash[i]:>10.3g} {sdpa[i]:>9.3g} {ours[i]:>9.3g}"
                    for i in range(len(quantities))
                )
                print(f"{str(dtype)[6:]:>8} {scale:>5} {causal!s:>6} | {columns}")


def load_flash(path: Path) -> ModuleType:
    """Another version of attnlib/flash.py, imported from ``path`` as its own module."""
    spec = importlib.util.spec_from_file_location("flash_baseline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it is executed
    spec.loader.exec_module(module)
    return module


def training_step(attention: Callable, size: tuple[int, int, int, int]) -> Callable[[], None]:
    """Forward and backward of ``attention`` on float32 CPU inputs of ``size``, causal."""
    generator = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(*size, generator=generator, requires_grad=True) for _ in range(3))

    def step() -> None:
        attention(q, k, v, causal=True).sum().backward()

    return step


def time_ratio(baseline: ModuleType, rounds: int) -> tuple[float, float, float]:
    """Median ms of the new and the baseline step, and the median of the per-round ratios."""
    calls = {
        "new": training_step(flash_attention, TIMED_SIZE),
        "baseline": training_step(baseline.flash_attention, TIMED_SIZE),
    }
    threads = torch.get_num_threads()
    timers = {
        name: benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
        for name, fn in calls.items()
    }
    for timer in timers.values():
        timer.timeit(2)  # warm-up: allocator, lazy initialisation
    samples: dict[str, list[float]] = {name: [] for name in timers}
    names = list(timers)
    for index in range(rounds):
        # The order alternates, so load from elsewhere hits both alike.
        for name in names if index % 2 == 0 else names[::-1]:
            samples[name].append(timers[name].timeit(3).median)
    ratio = statistics.median(
        new / old for new, old in zip(samples["new"], samples["baseline"], strict=True)
    )
    medians = [1e3 * statistics.median(samples[name]) for name in names]
    return medians[0], medians[1], ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256, help="sequence length of the error table")
    parser.add_argument("--baseline", type=Path, default=None, help="an earlier flash.py")
    parser.add_argument("--repeats", type=int, default=15, help="interleaved timing rounds")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(
        f"torch {torch.__version__} | threads {torch.get_num_threads()}"
        f" | load average {os.getloadavg()[0]:.2f}"
    )
    print_errors(args.n)
    if args.baseline is None:
        print("no --baseline: timing skipped")
        return
    new_ms, old_ms, ratio = time_ratio(load_flash(args.baseline), args.repeats)
    print(
        f"\nfloat32 CPU, forward + backward, causal, {TIMED_SIZE}: new {new_ms:.1f} ms, "
        f"baseline {old_ms:.1f} ms, new/baseline {ratio:.3f}x (median of {args.repeats} rounds)"
    )
    verdict = "OK" if ratio <= THRESHOLD else "FAIL"
    print(f"{verdict}: the float32 path costs {ratio:.3f}x the baseline (limit {THRESHOLD}x)")


if __name__ == "__main__":
    main()
