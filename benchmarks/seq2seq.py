"""Training throughput and time to 99% validation accuracy of each Part II model, in one run.

    python benchmarks/seq2seq.py            # default configuration of chapters 03-05
    python benchmarks/seq2seq.py --quick    # a smaller run, for a smoke test

Every model trains on the same data in the same process, one after another, on one CPU
thread by default (as the notebooks do), evaluating on the validation split after every
``--chunk`` training examples. Time to 99% counts training and those evaluations.
"""

from __future__ import annotations

import argparse
import platform
import time

import torch

from attnlib import seed_everything
from attnlib.data.text import make_batches
from attnlib.seq2seq import MODEL_KINDS, count_parameters
from attnlib.tasks.dates import DateTaskConfig, exact_match, new_model, predict, prepare
from attnlib.training import fit

KINDS = MODEL_KINDS


def chunked_batches(task, chunk: int):
    """Training batches cut into chunks of ``chunk`` examples: one chunk per 'epoch' of fit."""
    per_chunk = max(1, chunk // task.config.batch_size)

    def batches(index: int):
        epoch, part = divmod(index * per_chunk, len(task.splits.train) // task.config.batch_size)
        ordered = make_batches(
            task.splits.train,
            task.source_vocab,
            task.target_vocab,
            task.config.batch_size,
            shuffle=True,
            seed=epoch,
        )
        return ordered[part : part + per_chunk]

    return batches


def run(kind: str, task, chunk: int, max_examples: int, target: float) -> dict[str, float]:
    """Train one kind until ``target`` validation accuracy or ``max_examples``; time it."""
    seed_everything(0)
    model = new_model(kind, task)
    valid_targets = [t for _, t in task.splits.valid]
    evaluation_seconds = [0.0]

    def evaluate(trained):
        start = time.perf_counter()
        predictions = predict(trained, task.valid_batches, task.target_vocab)
        evaluation_seconds[0] += time.perf_counter() - start
        return {"valid_exact": exact_match(predictions, valid_targets)}

    history = fit(
        model,
        chunked_batches(task, chunk),
        task.loss,
        epochs=max(1, max_examples // chunk),
        lr=task.config.lr,
        evaluate=evaluate,
        stop_when=lambda metrics: metrics["valid_exact"] >= target,
        device="cpu",
        progress=False,
    )
    accuracies = history.metrics["valid_exact"]
    reached = next((i for i, a in enumerate(accuracies) if a >= target), None)
    examples = history.steps * task.config.batch_size
    training_seconds = history.seconds[-1] - evaluation_seconds[0]
    return {
        "parameters": count_parameters(model),
        "examples_per_second": examples / training_seconds,
        "time_to_target": history.seconds[reached] if reached is not None else float("nan"),
        "examples_to_target": (reached + 1) * chunk if reached is not None else float("nan"),
        "final_accuracy": accuracies[-1],
    }


def main() -> None:
    """Parse options, train every kind, print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller data and budget")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--chunk", type=int, default=2_560, help="examples between evaluations")
    parser.add_argument("--target", type=float, default=0.99)
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = DateTaskConfig(n_train=3_000, epochs=2) if args.quick else DateTaskConfig()
    max_examples = config.n_train * (config.epochs + 3)
    task = prepare(config)
    print(
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} thread(s); {config.n_train} training dates, batch "
        f"{config.batch_size}, hidden {config.hidden_size}; budget {max_examples} examples"
    )
    header = f"{'model':<14}{'params':>9}{'examples/s':>12}{'time to ' + str(args.target):>16}"
    print(header + f"{'examples to it':>16}{'final valid':>13}")
    for kind in args.kinds:
        r = run(kind, task, args.chunk, max_examples, args.target)
        reached = r["time_to_target"] == r["time_to_target"]  # NaN when never reached
        seconds = f"{r['time_to_target']:.1f}s" if reached else "not reached"
        examples = f"{r['examples_to_target']:,.0f}" if reached else "-"
        print(
            f"{kind:<14}{r['parameters']:>9,}{r['examples_per_second']:>12.0f}"
            f"{seconds:>16}{examples:>16}{r['final_accuracy']:>13.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
