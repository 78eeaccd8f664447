"""Speed of chapter 13's encoder on the present device: pretraining and fine-tuning steps.

Prints tokens per second, milliseconds per step, the time one epoch over the IMDB reviews takes
at that speed, peak GPU memory, the model's FLOPs per token, and the achieved TFLOP/s set
against the device's dense bf16 peak (where the device is known). Synthetic token ids stand in
for reviews: the arithmetic does not depend on which ids they are, only on the shapes, and the
fine-tuning batches follow IMDB's length distribution (log-normal, cut at 512 subwords). Time to
90% test accuracy needs the whole recipe: it is read from the shipped model's results, which
chapter 13 records when it trains.

    python benchmarks/imdb.py            # the chapter's configuration (wants a GPU)
    python benchmarks/imdb.py --quick    # tiny sizes, a smoke test on a CPU
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from attnlib.config import choose_device, device_peak
from attnlib.encoder import MaskedLanguageModel, SequenceClassifier, flops_per_token
from attnlib.tasks.imdb import (
    ImdbConfig,
    adamw,
    classification_loss,
    length_buckets,
    mask_blocks,
    masked_lm_loss,
    pretraining_flops_per_token,
)

IMDB_PRETRAIN_REVIEWS = 74_000  # unlabelled + training reviews, less the held-out 1%
IMDB_FINETUNE_REVIEWS = 24_000
MODEL_DIR = Path(__file__).resolve().parents[1] / "attnlib" / "assets" / "imdb"


def imdb_like_lengths(count: int, max_len: int, seed: int = 0) -> np.ndarray:
    """Review lengths in subwords, log-normal like IMDB's (median about 230), cut at max_len."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(mean=5.45, sigma=0.6, size=count), 16, max_len).astype(int)


def timed_steps(step, warmup: int, steps: int, device: torch.device) -> float:
    """Seconds per call of ``step`` after ``warmup`` untimed calls (GPU work waited for)."""
    for _ in range(warmup):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / steps


def train_step(model, optimizer, loss_fn, batch, device: torch.device):
    """One optimizer step under bf16 autocast on a GPU; returns a function doing it."""

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            loss = loss_fn(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    return step


def pretraining_speed(config: ImdbConfig, device, compile_model: bool, steps: int) -> dict:
    """Tokens/s of masked-language-model steps on packed (batch, max_len) blocks."""
    torch.manual_seed(0)
    model = MaskedLanguageModel(config.transformer()).to(device)
    model.encoder.check_ids = False
    blocks = torch.randint(5, config.vocab_size, (config.pretrain_batch, config.max_len))
    batch = mask_blocks(blocks.to(device), config.mask_fraction, 4, config.vocab_size, 5)
    runner = torch.compile(model) if compile_model else model
    optimizer = adamw(model, 1e-4, 0.01)
    start = time.perf_counter()
    seconds = timed_steps(
        train_step(runner, optimizer, masked_lm_loss, batch, device), 3, steps, device
    )
    tokens = config.pretrain_batch * config.max_len
    return {
        "tokens_per_second": tokens / seconds,
        "ms_per_step": 1e3 * seconds,
        "flops_per_token": pretraining_flops_per_token(config),
        "first_steps_seconds": time.perf_counter() - start - steps * seconds,
    }


def finetuning_speed(config: ImdbConfig, device, steps: int) -> dict:
    """Real (unpadded) tokens/s of classifier steps on length-bucketed IMDB-like batches."""
    torch.manual_seed(0)
    model = SequenceClassifier(config.transformer()).to(device)
    model.encoder.check_ids = False
    lengths = imdb_like_lengths(config.finetune_batch * 64, config.max_len)
    rng = np.random.default_rng(1)
    reviews = [rng.integers(5, config.vocab_size, size=n).astype(np.int32) for n in lengths]
    labels = rng.integers(0, 2, size=len(reviews))
    batches = length_buckets(reviews, labels, config.finetune_batch, device)
    optimizer = adamw(model, 1e-4, 0.01)
    chosen = [batches[i] for i in np.linspace(0, len(batches) - 1, steps).astype(int)]
    real = sum(int(b.key_mask.sum()) for b in chosen)
    padded = sum(b.ids.numel() for b in chosen)
    # Visit every shape once first: a GPU prepares kernels per new shape, once per run.
    for batch in chosen:
        train_step(model, optimizer, classification_loss, batch, device)()
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for batch in chosen:
        train_step(model, optimizer, classification_loss, batch, device)()
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    mean_length = float(lengths.mean())
    flops = flops_per_token(config.transformer(), int(mean_length))
    return {
        "tokens_per_second": real / seconds,
        "ms_per_step": 1e3 * seconds / len(chosen),
        "padding_fraction": 1 - real / padded,
        "mean_length": mean_length,
        "flops_per_token": flops,
    }


def recorded_time_to_90() -> str:
    """Time to 90% test accuracy as the shipped model's training run recorded it."""
    path = MODEL_DIR / "results.json"
    if not path.is_file():
        return "no shipped model yet (chapter 13 records it when it trains)"
    results = json.loads(path.read_text())
    seconds = results.get("seconds_to_90")
    if seconds is None:
        return f"not reached in the shipped run on {results.get('device', '?')}"
    return f"{seconds:.0f} s, recorded by the shipped run on {results.get('device', '?')}"


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a CPU smoke test")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile run")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per measurement")
    args = parser.parse_args()
    device = choose_device()
    config = ImdbConfig()
    if args.quick:
        config = ImdbConfig(d_model=64, num_heads=2, num_layers=2, d_ff=128, max_len=128)
        config = ImdbConfig(**{**config.to_dict(), "pretrain_batch": 4, "finetune_batch": 4})
        args.steps = min(args.steps, 3)
    name, peak = device_peak(device)
    torch.set_float32_matmul_precision("high")
    print(
        f"device: {name}; model: d_model={config.d_model}, layers={config.num_layers}, "
        f"heads={config.num_heads}, d_ff={config.d_ff}, vocab={config.vocab_size}"
    )
    runs = [("pretraining, eager", False)]
    if device.type == "cuda" and not args.no_compile:
        runs.append(("pretraining, torch.compile", True))
    for label, compiled in runs:
        speed = pretraining_speed(config, device, compiled, args.steps)
        achieved = speed["tokens_per_second"] * speed["flops_per_token"] / 1e12
        epoch = IMDB_PRETRAIN_REVIEWS * 300 / speed["tokens_per_second"]
        share = (
            f", {100 * achieved / peak:.1f}% of the {peak:.0f} TFLOP/s bf16 peak" if peak else ""
        )
        print(
            f"{label}: {speed['tokens_per_second']:,.0f} tokens/s, "
            f"{speed['ms_per_step']:.1f} ms/step (batch {config.pretrain_batch} x "
            f"{config.max_len}), {speed['flops_per_token'] / 1e6:.1f} MFLOP/token, "
            f"{achieved:.1f} TFLOP/s{share}; one pass over ~{IMDB_PRETRAIN_REVIEWS:,} "
            f"reviews (~300 tokens each) ~{epoch:.0f} s; first steps (compile) "
            f"{speed['first_steps_seconds']:.1f} s"
        )
    speed = finetuning_speed(config, device, args.steps)
    achieved = speed["tokens_per_second"] * speed["flops_per_token"] / 1e12
    epoch = IMDB_FINETUNE_REVIEWS * speed["mean_length"] / speed["tokens_per_second"]
    share = f", {100 * achieved / peak:.1f}% of peak" if peak else ""
    print(
        f"fine-tuning, eager: {speed['tokens_per_second']:,.0f} real tokens/s, "
        f"{speed['ms_per_step']:.1f} ms/step (batch {config.finetune_batch}, padding "
        f"{100 * speed['padding_fraction']:.1f}%), {achieved:.1f} TFLOP/s{share}; "
        f"one epoch over {IMDB_FINETUNE_REVIEWS:,} reviews ~{epoch:.0f} s"
    )
    if device.type == "cuda":
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated(device) / 2**30:.2f} GiB")
    print(f"time to 90% test accuracy: {recorded_time_to_90()}")


if __name__ == "__main__":
    main()
