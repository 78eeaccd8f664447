"""Train chapter 18's language model of IMDB text and keep a checkpoint at every measurement.

The model (:func:`attnlib.tasks.sink_lm.new_model`) reads random windows of the train and
unlabelled reviews (those that repeat no test review), tokenised with chapter 11's IMDB
vocabulary; every ``--every`` steps it is measured on fixed windows of test reviews: its loss
and every head's first-token score, the attention-sink measure. Each measurement is printed and
kept, with the weights, in ``--out``: ``step-000500.pt`` and so on (``attnlib.checkpoints``:
checksummed, loadable with ``weights_only``), and ``reports.json``.

It runs on a CPU (20,000 steps at the default sizes take hours on 2 cores) or a GPU:

    python scripts/train_sink_lm.py --out runs/sink-lm --steps 20000
    python scripts/train_sink_lm.py --out runs/sink-lm-logit --sink learned

The IMDB reviews come from ``$ATTNLIB_DATA`` or the canonical download (``attnlib.data.imdb``).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

import torch

import attnlib
from attnlib.checkpoints import save_checkpoint
from attnlib.data.imdb import clean_review, load_imdb
from attnlib.data.subwords import imdb_tokenizer
from attnlib.tasks.sink_lm import SinkLMTask, new_model, review_stream, train

HELD_OUT_REVIEWS = 2_000  # test reviews the probe's windows are cut from


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for checkpoints")
    parser.add_argument("--steps", type=int, default=SinkLMTask.steps)
    parser.add_argument("--every", type=int, default=SinkLMTask.every)
    parser.add_argument("--seq-len", type=int, default=SinkLMTask.seq_len)
    parser.add_argument("--batch-size", type=int, default=SinkLMTask.batch_size)
    parser.add_argument("--lr", type=float, default=SinkLMTask.lr)
    parser.add_argument("--warmup", type=int, default=SinkLMTask.warmup)
    parser.add_argument("--weight-decay", type=float, default=SinkLMTask.weight_decay)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-ff", type=int, default=512)
    parser.add_argument("--sink", choices=["learned", "plus_one"], default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    return parser.parse_args()


def streams(tokenizer, data) -> tuple:
    """The training stream (train and unlabelled reviews) and the held-out one (test reviews)."""
    texts = data.train.texts + [data.unlabelled.texts[i] for i in data.unlabelled_outside_test()]
    encode = tokenizer.encode_batch
    training = review_stream(encode([clean_review(t) for t in texts]), tokenizer.sep_id)
    test = data.test.texts[:HELD_OUT_REVIEWS]
    held_out = review_stream(encode([clean_review(t) for t in test]), tokenizer.sep_id)
    return training, held_out


def main() -> None:
    args = arguments()
    attnlib.seed_everything(args.seed, threads=args.threads)
    task = SinkLMTask(
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        steps=args.steps,
        lr=args.lr,
        warmup=args.warmup,
        weight_decay=args.weight_decay,
        every=args.every,
    )
    data = load_imdb()
    tokenizer = imdb_tokenizer(data)
    started = time.perf_counter()
    training, held_out = streams(tokenizer, data)
    print(
        f"{len(training):,} training tokens, {len(held_out):,} held out "
        f"({time.perf_counter() - started:.0f} s to tokenise)",
        flush=True,
    )
    model = new_model(
        tokenizer.vocab_size, args.sink,
        d_model=args.d_model, num_heads=args.heads, num_layers=args.layers, d_ff=args.d_ff,
    )  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    kept = []

    def keep(report, trained) -> None:
        first = report.first_token
        kept.append({"step": report.step, "loss": report.loss, "first_token": first.tolist(),
                     "cpu_seconds": time.process_time()})  # fmt: skip
        save_checkpoint(args.out / f"step-{report.step:06d}.pt", trained,
                        config=trained.config.to_dict(), step=report.step, loss=report.loss,
                        first_token=first.clone())  # fmt: skip
        (args.out / "reports.json").write_text(json.dumps({"task": asdict(task), "reports": kept}))
        top = ", ".join(
            f"L{layer + 1}H{head + 1} {first[layer, head]:.2f}"
            for layer, head in _largest(first, 3)
        )
        print(f"step {report.step:6d}: probe loss {report.loss:.3f}; most weight on the first "
              f"token: {top}", flush=True)  # fmt: skip

    train(model, training, held_out, task, args.seed, progress=False, on_report=keep)


def _largest(scores: torch.Tensor, count: int) -> list[tuple[int, int]]:
    """The (layer, head) pairs of the ``count`` largest scores (layers, heads)."""
    order = scores.flatten().argsort(descending=True)[:count].tolist()
    return [divmod(index, scores.shape[1]) for index in order]


if __name__ == "__main__":
    main()
