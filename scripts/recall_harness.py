"""Train the harness's model (``attnlib.tasks.recall``) around each mixer on MQAR or on chapter
14's dates, over pair counts, head counts and seeds, and print a table of recall, size and CPU time.

Every run is one line of ``--out`` (JSON lines), written as it finishes, so a long sweep can be
read while it runs. The head count sets what a linear mixer's state holds: per layer
heads x head_dim x head_dim = d_model² / heads numbers, so more heads is a smaller state.
"recall" is the share of probe positions right, "rows" the share of probe rows right at every
position (on dates: the whole ISO date).

    python scripts/recall_harness.py --out runs/recall.jsonl --pairs 4,12,20 --seeds 0-2
    python scripts/recall_harness.py --out runs/state.jsonl --mixers softmax,linear --heads 1,4,16
    python scripts/recall_harness.py --out runs/dates.jsonl --task dates --heads 2 --d-model 32 \\
        --batch-size 32 --steps 300 --seeds 0-7
    python scripts/recall_harness.py --out runs/mqa.jsonl --mixers softmax --heads 8 --kv-heads 1

The dates line is chapter 19's setting (its date section trains seeds 0-2 of it); the defaults,
batches of 64 for 1,000 steps, are larger.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

import attnlib
from attnlib.mixers import MIXERS
from attnlib.tasks.recall import (
    DateRecallTask,
    HarnessTask,
    RecallTask,
    date_seq_len,
    recall_config,
    train,
)


def numbers(text: str) -> list[int]:
    """'0-2' -> [0, 1, 2]; '4,12,20' -> [4, 12, 20]."""
    if "-" in text:
        low, high = (int(part) for part in text.split("-"))
        return list(range(low, high + 1))
    return [int(part) for part in text.split(",")]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON lines, one per run")
    parser.add_argument("--task", choices=("mqar", "dates"), default="mqar")
    parser.add_argument("--mixers", default=",".join(MIXERS))
    parser.add_argument("--pairs", type=numbers, default=[8], help="MQAR only; dates ignore it")
    parser.add_argument("--heads", type=numbers, default=[4])
    parser.add_argument(
        "--kv-heads",
        type=int,
        default=None,
        help="softmax only: key/value heads its query heads share (GQA; 1 is MQA)",
    )
    parser.add_argument("--seeds", type=numbers, default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=RecallTask.steps)
    parser.add_argument("--seconds", type=float, default=None, help="CPU seconds a run")
    parser.add_argument(
        "--seq-len",
        type=int,
        default=None,
        help=f"MQAR: {RecallTask.seq_len} if not given; dates: the smallest that holds every pair",
    )
    parser.add_argument(
        "--vocab-size",
        type=int,
        default=RecallTask.vocab_size,
        help="MQAR only; dates have their characters' vocabulary",
    )
    parser.add_argument("--batch-size", type=int, default=RecallTask.batch_size)
    parser.add_argument("--lr", type=float, default=RecallTask.lr)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    return parser.parse_args()


def tasks(args: argparse.Namespace) -> list[HarnessTask]:
    """One task for each pair count on MQAR; the one date task (which has no pairs)."""
    budget = dict(batch_size=args.batch_size, steps=args.steps, seconds=args.seconds, lr=args.lr)
    if args.task == "dates":
        seq_len = date_seq_len() if args.seq_len is None else args.seq_len
        return [DateRecallTask(seq_len=seq_len, **budget)]
    seq_len = RecallTask.seq_len if args.seq_len is None else args.seq_len
    return [
        RecallTask(num_pairs=pairs, seq_len=seq_len, vocab_size=args.vocab_size, **budget)
        for pairs in args.pairs
    ]


def main() -> None:
    args = arguments()
    mixers = args.mixers.split(",")
    unknown = [name for name in mixers if name not in MIXERS]
    if unknown:
        raise SystemExit(f"unknown mixers {unknown}; choose from {list(MIXERS)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    print(
        f"{'mixer':8} {'pairs':>5} {'heads':>5} {'seed':>4} {'params':>7} {'recall':>7} "
        f"{'rows':>6} {'s':>6}"
    )
    with args.out.open("a") as out:
        for task in tasks(args):
            pairs = getattr(task, "num_pairs", "-")  # the date task has none
            for heads in args.heads:
                for mixer in mixers:
                    kv_heads = args.kv_heads if mixer == "softmax" else None
                    config = recall_config(
                        mixer, task.vocab_size, args.d_model, heads, num_kv_heads=kv_heads
                    )
                    for seed in args.seeds:
                        attnlib.seed_everything(seed, threads=args.threads)
                        run = train(config, task, seed, progress=False)
                        line = {**asdict(run), "heads": heads, "kv_heads": kv_heads}
                        out.write(json.dumps(line) + "\n")
                        out.flush()
                        print(
                            f"{mixer:8} {pairs:>5} {heads:5} {seed:4} {run.parameters:7} "
                            f"{run.accuracy:7.3f} {run.rows_right:6.3f} {run.seconds:6.1f}",
                            flush=True,
                        )


if __name__ == "__main__":
    main()
