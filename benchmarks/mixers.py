"""Generation with each mixer of chapter 19's harness: tokens a second and bytes kept, by length.

Every model is the harness's (``attnlib.tasks.recall.recall_config``: d_model 64, 4 heads, 2
layers, a short convolution), untrained, in eval mode under ``torch.inference_mode``. Each
generates greedily from a one-token prompt with its memory (``DecoderOnlyLM.generate``: one
position a step; softmax attention's KV cache, latent attention's cache of latents, or a linear
mixer's state) to each length. A round times every mixer at a length in turn, so that load from
elsewhere hits them alike; the table gives the median over rounds of tokens a second, its ratio
to softmax attention's in the same round, and the bytes the memory holds at the end, for one
sequence. No verdict: the ratios are the result.

    python benchmarks/mixers.py [--lengths 256,1024,4096] [--rounds 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from attnlib.lm import DecoderOnlyLM
from attnlib.mixers import MIXERS
from attnlib.tasks.recall import recall_config


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="256,1024,4096", help="tokens to generate")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--mixers", default=",".join(MIXERS))
    return parser.parse_args()


def generate(model: DecoderOnlyLM, length: int) -> tuple[float, int]:
    """Seconds to generate ``length`` tokens after a one-token prompt, and the memory's bytes."""
    prompt = torch.ones(1, 1, dtype=torch.long)
    start = time.perf_counter()
    generation = model.generate(prompt, length)
    seconds = time.perf_counter() - start
    return seconds, generation.cache.nbytes()


def main() -> None:
    args = arguments()
    torch.set_num_threads(args.threads)
    lengths = [int(part) for part in args.lengths.split(",")]
    mixers = args.mixers.split(",")
    torch.manual_seed(0)
    models = {name: DecoderOnlyLM(recall_config(name)).eval() for name in mixers}
    print(f"{args.threads} thread(s), {args.rounds} rounds; tokens/s is the median over rounds")
    print(f"{'mixer':8} {'length':>6} {'tokens/s':>9} {'x softmax':>9} {'bytes kept':>11}")
    with torch.inference_mode():
        for model in models.values():
            generate(model, 8)  # warm-up
        for length in lengths:
            speeds = {name: [] for name in mixers}
            kept = {}
            for _ in range(args.rounds):
                for name, model in models.items():
                    seconds, kept[name] = generate(model, length)
                    speeds[name].append(length / seconds)
            for name in mixers:
                rate = statistics.median(speeds[name])
                ratio = (
                    statistics.median(
                        mine / theirs
                        for mine, theirs in zip(speeds[name], speeds["softmax"], strict=True)
                    )
                    if "softmax" in speeds
                    else float("nan")
                )
                print(f"{name:8} {length:6} {rate:9.0f} {ratio:9.2f} {kept[name]:11,}")


if __name__ == "__main__":
    main()
