"""Time attnlib's multi-head attention against direct SDPA and torch.nn.MultiheadAttention.

Four ways to compute the same self-attention, in eval mode under ``torch.inference_mode``,
each timed as a whole forward pass, input checks included:

(a) ``MultiHeadAttention`` from scratch (``fused=False``): scores, masked softmax, weights @ V;
(b) ``MultiHeadAttention`` fused (``fused=True``): ``F.scaled_dot_product_attention`` inside;
(c) direct SDPA: the same projections with ``F.linear`` on the same weights, view/transpose,
    SDPA, merge, output projection, i.e. (b) without attnlib's checks and wrappers;
(d) ``torch.nn.MultiheadAttention`` holding the same weights.

A third table times a whole encoder layer, forward and backward in training mode (dropout 0):
attnlib's ``EncoderLayer`` on its fused path against ``torch.nn.TransformerEncoderLayer`` holding
the same weights, post-LN and pre-LN, with a padding mask; its verdict line says OK when ours is
within 1.3x of torch's at every size.

A second table prices the input checks of a whole from-scratch forward with a padding
``key_mask``: ``forward`` (checks once, then the kernels) and the pre-issue-8 chain, where
``attend``, the score and ``masked_softmax`` checked again (five more NaN scans, two more mask
checks, reproduced here with the library's own check functions), each over
``forward_prepared`` (no checks at all) on the same input.

One more table, printed after that one, times attention alone on ``(batch, heads, n,
head_dim)`` tensors at a few lengths, forward only: ``attnlib.flash.flash_attention`` (tiles of
64 in a Python loop, not causal), ``attend`` from scratch (the whole score matrix) and SDPA; it
gives ratios to SDPA and no verdict, since the Python loop shows the idea and is not meant to
be fast.

A decoding table times greedy decoding from an untrained ``EncoderDecoder`` (d_model 128, 4
heads, 2 layers each side; 16 sources of 16 tokens) at a few output lengths, with no end token so
that every run makes exactly that many tokens: with the KV cache (one new position a step) and
without it (the whole prefix again every step). It gives milliseconds per generated token and
the ratio uncached / cached, which grows with the length; no verdict. Its rounds are capped at
5, since the uncached runs at the longest length take a while.

Times are medians over rounds of ``torch.utils.benchmark.Timer`` samples (the timer
synchronises CUDA); the variants are interleaved within each round so that load from elsewhere
hits them alike, and each ratio is the median over rounds of that round's time over the
baseline's. The last line says OK when the fused path is within 1.2x of direct SDPA at every
size, else FAIL; the script exits 0 either way.

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

from attnlib._checks import check_mask, check_tensor
from attnlib.attention import MultiHeadAttention, attend
from attnlib.config import choose_device
from attnlib.encoder import TransformerConfig
from attnlib.flash import flash_attention
from attnlib.generation import EncoderDecoder, greedy_decode
from attnlib.masks import padding_mask
from attnlib.transformer import EncoderLayer

# (batch, seq, d_model, heads)
FULL_SIZES = [(8, 128, 256, 8), (4, 512, 512, 8), (2, 1024, 512, 8)]
QUICK_SIZES = [(4, 64, 128, 4), (2, 256, 256, 8)]
THRESHOLD = 1.2
VARIANTS = ("scratch", "fused", "direct", "torch")
CHECK_VARIANTS = ("prepared", "checked", "before")
LAYER_THRESHOLD = 1.3
LAYER_VARIANTS = ("ours", "torch")
# (batch, heads, n, head_dim): lengths that are not multiples of the 64-key tile
FULL_TILED_SIZES = [(2, 8, 500, 64), (2, 8, 1000, 64), (1, 8, 2000, 64)]
QUICK_TILED_SIZES = [(1, 4, 250, 64), (1, 4, 1000, 64)]
TILED_VARIANTS = ("tiled", "scratch", "sdpa")
# tokens generated per sequence, with and without the KV cache
FULL_DECODE_LENGTHS = [16, 64, 128]
QUICK_DECODE_LENGTHS = [8, 32]
DECODE_VARIANTS = ("cached", "uncached")
DECODE_ROUNDS = 5


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
    }
    reference = calls["direct"]()
    for name in ("scratch", "fused", "torch"):
        torch.testing.assert_close(calls[name](), reference, rtol=1e-4, atol=1e-4, msg=name)
    return calls


def build_checks(size: tuple[int, int, int, int], device: torch.device) -> dict[str, Callable]:
    """Whole from-scratch forwards with a padding key mask: unchecked, checked, checked as before.

    Before issue 8, ``forward`` checked its inputs and mask, then ``attend`` scanned the three
    head tensors, the score scanned queries and keys again, and ``attend`` and
    ``masked_softmax`` each checked the mask again. ``before`` adds exactly those checks,
    made with the library's check functions on tensors of the heads' shape, to ``forward``.
    """
    batch, seq, d_model, heads = size
    torch.manual_seed(0)
    ours = MultiHeadAttention(d_model, heads).to(device).eval()
    x = torch.randn(batch, seq, d_model, device=device)
    lengths = torch.randint(seq // 2, seq + 1, (batch,), device=device)
    key_mask = padding_mask(lengths, seq).squeeze(1)  # (batch, seq)
    prepared = ours.prepare_mask(None, key_mask, batch, seq, seq)  # (batch, 1, 1, seq)
    q = k = v = ours.split_heads(x)  # (batch, heads, seq, head_dim): the tensors attend scanned
    weights_shape = (batch, heads, seq, seq)

    def before() -> torch.Tensor:
        out = ours(x, key_mask=key_mask)[0]
        for name, tensor in (("queries", q), ("keys", k), ("values", v), ("queries", q)):
            check_tensor(name, tensor)
        check_tensor("keys", k)
        check_mask(prepared, weights_shape, "attention weights")
        check_mask(prepared.expand(weights_shape), weights_shape, "scores")
        return out

    calls = {
        "prepared": lambda: ours.forward_prepared(x, x, x, prepared)[0],
        "checked": lambda: ours(x, key_mask=key_mask)[0],
        "before": before,
    }
    torch.testing.assert_close(calls["checked"](), calls["prepared"](), rtol=0, atol=0)
    return calls


def build_layers(
    size: tuple[int, int, int, int], norm_first: bool, device: torch.device
) -> dict[str, Callable]:
    """Forward + backward of one encoder layer, ours (fused) and torch's, same weights and mask."""
    batch, seq, d_model, heads = size
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(
        d_model, heads, 4 * d_model, dropout=0.0, batch_first=True, norm_first=norm_first
    ).to(device)
    ours = EncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, norm_first=norm_first)
    ours = ours.to(device).load_from_torch(theirs)
    x = torch.randn(batch, seq, d_model, device=device, requires_grad=True)
    lengths = torch.randint(seq // 2, seq + 1, (batch,), device=device)
    key_mask = padding_mask(lengths, seq).squeeze(1)  # (batch, seq), True at real tokens
    mask4d = ours.attention.prepare_mask(None, key_mask, batch, seq, seq)

    def ours_step() -> torch.Tensor:
        out = ours(x, mask4d)[0]
        out.sum().backward()
        return out

    def torch_step() -> torch.Tensor:
        out = theirs(x, src_key_padding_mask=~key_mask)
        out.sum().backward()
        return out

    keep = key_mask.unsqueeze(-1)  # torch may leave padded rows as anything (nested tensors)
    torch.testing.assert_close(
        ours_step().detach() * keep, torch_step().detach() * keep, rtol=1e-4, atol=1e-4
    )
    return {"ours": ours_step, "torch": torch_step}


def build_tiled(size: tuple[int, int, int, int], device: torch.device) -> dict[str, Callable]:
    """Attention alone on one (batch, heads, n, head_dim) input: tiled, from scratch, SDPA."""
    batch, heads, n, head_dim = size
    torch.manual_seed(0)
    q, k, v = (torch.randn(batch, heads, n, head_dim, device=device) for _ in range(3))
    calls = {
        "tiled": lambda: flash_attention(q, k, v, block_size=64),
        "scratch": lambda: attend(q, k, v)[0],
        "sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
    }
    for name in ("tiled", "scratch"):
        torch.testing.assert_close(calls[name](), calls["sdpa"](), rtol=1e-4, atol=1e-4, msg=name)
    return calls


def print_tiled(sizes, device: torch.device, rounds: int, target_s: float) -> None:
    """The table of attention alone: the tiled Python loop against from-scratch and SDPA."""
    print("\nattention alone, forward: tiled (Python loop, 64 x 64 tiles) vs from scratch vs SDPA:")
    header = (
        f"{'batch':>5} {'heads':>5} {'n':>5} {'head_dim':>8} | "
        + " ".join(f"{name + ' ms':>10}" for name in TILED_VARIANTS)
        + " | "
        + " ".join(f"{name + '/sdpa':>12}" for name in TILED_VARIANTS if name != "sdpa")
    )
    print(header)
    print("-" * len(header))
    for size in sizes:
        ms, ratios = summarise(measure(build_tiled(size, device), rounds, target_s), "sdpa")
        print(
            " ".join(f"{n:>{w}}" for n, w in zip(size, (5, 5, 5, 8), strict=True))
            + " | "
            + " ".join(f"{ms[name]:>10.3f}" for name in TILED_VARIANTS)
            + " | "
            + " ".join(f"{ratios[name]:>11.2f}x" for name in TILED_VARIANTS if name != "sdpa")
        )


def build_decoding(length: int, device: torch.device) -> dict[str, Callable]:
    """Greedy decoding of ``length`` tokens, with and without the cache; checks equal tokens."""
    torch.manual_seed(0)
    config = TransformerConfig(
        vocab_size=64, d_model=128, num_heads=4, num_layers=2, d_ff=256, dropout=0.0
    )
    model = EncoderDecoder(config).to(device).eval()
    source = torch.randint(3, 64, (16, 16), device=device)
    options = {"start_id": 1, "end_id": None, "max_len": length, "need_weights": False}
    calls = {
        "cached": lambda: greedy_decode(model, source, use_cache=True, **options).tokens,
        "uncached": lambda: greedy_decode(model, source, use_cache=False, **options).tokens,
    }
    assert torch.equal(calls["cached"](), calls["uncached"]()), "the cache changed the tokens"
    return calls


def print_decoding(lengths, device: torch.device, rounds: int, target_s: float) -> None:
    """The table of greedy decoding with and without the KV cache, per generated token."""
    print("\ngreedy decoding, 16 sequences, d_model 128, 2 + 2 layers: with and without KV cache")
    header = (
        f"{'tokens':>6} | "
        + " ".join(f"{name + ' ms/token':>18}" for name in DECODE_VARIANTS)
        + f" | {'uncached/cached':>15}"
    )
    print(header)
    print("-" * len(header))
    for length in lengths:
        ms, ratios = summarise(measure(build_decoding(length, device), rounds, target_s), "cached")
        print(
            f"{length:>6} | "
            + " ".join(f"{ms[name] / length:>18.3f}" for name in DECODE_VARIANTS)
            + f" | {ratios['uncached']:>14.2f}x"
        )


def print_layers(sizes, device: torch.device, rounds: int, target_s: float) -> float:
    """The table of a whole encoder layer's forward + backward; returns the worst ratio."""
    print("\nencoder layer, forward + backward (train mode, dropout 0, padding mask):")
    header = (
        f"{'batch':>5} {'seq':>5} {'d_model':>7} {'heads':>5} {'norm':>5} | "
        + " ".join(f"{name + ' ms':>10}" for name in LAYER_VARIANTS)
        + f" | {'ours/torch':>10}"
    )
    print(header)
    print("-" * len(header))
    worst = 0.0
    for size in sizes:
        for norm_first in (False, True):
            calls = build_layers(size, norm_first, device)
            ms, ratios = summarise(measure(calls, rounds, target_s), "torch")
            worst = max(worst, ratios["ours"])
            print(
                _size_columns(size)
                + f" {'pre' if norm_first else 'post':>5} | "
                + " ".join(f"{ms[name]:>10.3f}" for name in LAYER_VARIANTS)
                + f" | {ratios['ours']:>9.2f}x"
            )
    return worst


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


def summarise(
    samples: dict[str, list[float]], baseline: str
) -> tuple[dict[str, float], dict[str, float]]:
    """Median ms per variant, and the median over rounds of each variant's time / baseline's."""
    ms = {name: 1e3 * statistics.median(values) for name, values in samples.items()}
    ratios = {
        name: statistics.median(
            mine / base for mine, base in zip(samples[name], samples[baseline], strict=True)
        )
        for name in samples
    }
    return ms, ratios


def _size_columns(size: tuple[int, int, int, int]) -> str:
    return " ".join(f"{n:>{w}}" for n, w in zip(size, (5, 5, 7, 5), strict=True))


def print_paths(sizes, device: torch.device, rounds: int, target_s: float) -> float:
    """The table of the four paths; returns the worst fused/direct ratio."""
    header = (
        f"{'batch':>5} {'seq':>5} {'d_model':>7} {'heads':>5} | "
        + " ".join(f"{name + ' ms':>10}" for name in VARIANTS)
        + " | "
        + " ".join(f"{name + '/dir':>11}" for name in VARIANTS if name != "direct")
    )
    print(header)
    print("-" * len(header))
    worst = 0.0
    for size in sizes:
        ms, ratios = summarise(measure(build(size, device), rounds, target_s), "direct")
        worst = max(worst, ratios["fused"])
        print(
            _size_columns(size)
            + " | "
            + " ".join(f"{ms[name]:>10.3f}" for name in VARIANTS)
            + " | "
            + " ".join(f"{ratios[name]:>10.2f}x" for name in VARIANTS if name != "direct")
        )
    return worst


def print_checks(sizes, device: torch.device, rounds: int, target_s: float) -> None:
    """The table of what input checks cost a whole from-scratch forward, now and before."""
    print("\ninput checks in a whole from-scratch forward with a padding key_mask:")
    print("  prepared = forward_prepared (no checks); checked = forward (checks once, now);")
    print("  before = forward + the checks the pre-issue-8 chain repeated (5 NaN scans, 2 masks)")
    header = (
        f"{'batch':>5} {'seq':>5} {'d_model':>7} {'heads':>5} | "
        + " ".join(f"{name + ' ms':>11}" for name in CHECK_VARIANTS)
        + f" | {'checked/prep':>12} {'before/prep':>11}"
    )
    print(header)
    print("-" * len(header))
    for size in sizes:
        ms, ratios = summarise(measure(build_checks(size, device), rounds, target_s), "prepared")
        print(
            _size_columns(size)
            + " | "
            + " ".join(f"{ms[name]:>11.3f}" for name in CHECK_VARIANTS)
            + f" | {ratios['checked']:>11.3f}x {ratios['before']:>10.3f}x"
        )


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
        + f" | rounds {args.repeats} | float32, eval, inference_mode, whole forward"
        + f" | load average {os.getloadavg()[0]:.2f}"
    )
    with torch.inference_mode():
        worst = print_paths(sizes, device, args.repeats, target_s)
        print_checks(sizes, device, args.repeats, target_s)
        tiled_sizes = QUICK_TILED_SIZES if args.quick else FULL_TILED_SIZES
        print_tiled(tiled_sizes, device, args.repeats, target_s)
        lengths = QUICK_DECODE_LENGTHS if args.quick else FULL_DECODE_LENGTHS
        print_decoding(lengths, device, min(args.repeats, DECODE_ROUNDS), target_s)
    worst_layer = print_layers(sizes, device, args.repeats, target_s)
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (CPU timings are noisy under load)")
    verdict = "OK" if worst <= THRESHOLD else "FAIL"
    print(
        f"{verdict}: fused path is {'within' if verdict == 'OK' else 'NOT within'} "
        f"{THRESHOLD}x of direct SDPA at every size (worst fused/direct = {worst:.2f}x)"
    )
    verdict = "OK" if worst_layer <= LAYER_THRESHOLD else "FAIL"
    print(
        f"{verdict}: attnlib's encoder layer is {'within' if verdict == 'OK' else 'NOT within'} "
        f"{LAYER_THRESHOLD}x of torch's at every size (worst = {worst_layer:.2f}x)"
    )


if __name__ == "__main__":
    main()
