"""What ``Seq2Seq.forward`` saves over calling ``decoder.step`` in a loop, per training step.

    python benchmarks/teacher_forcing.py            # 30 steps per model and way, dates and copy
    python benchmarks/teacher_forcing.py --steps 5  # a smoke test

Both ways compute the same logits (``tests/test_seq2seq.py`` checks it). ``forward`` embeds every
target symbol and applies the output layer to every step in one call each, and prepares the keys
once per source; the loop does all three once per step, as a decoder step on its own must. Each
training step (forward, backward, Adam) alternates between the two ways on the same batches, on
one thread, so the ratio in the last column comes from one run under the same conditions.
"""

from __future__ import annotations

import argparse
import platform
import time

import torch
import torch.nn.functional as F

from attnlib import seed_everything
from attnlib.masks import padding_mask
from attnlib.seq2seq import MODEL_KINDS
from attnlib.tasks import copy as copying
from attnlib.tasks.dates import DateTaskConfig, new_model, prepare


def step_loop_logits(model, batch) -> torch.Tensor:
    """Teacher-forced logits (batch, tgt_len, vocab) from ``decoder.step``, one step at a time."""
    outputs, summary = model.encoder(batch.source, batch.source_lengths)
    mask = padding_mask(batch.source_lengths, batch.source.shape[1])
    state = model.decoder.init_state(summary, outputs)
    logits = []
    for t in range(batch.target_in.shape[1]):
        step_logits, state, _ = model.decoder.step(batch.target_in[:, t], state, outputs, mask)
        logits.append(step_logits)
    return torch.stack(logits, 1)


def forward_logits(model, batch) -> torch.Tensor:
    """Teacher-forced logits (batch, tgt_len, vocab) from ``Seq2Seq.forward``."""
    return model(batch.source, batch.source_lengths, batch.target_in)[0]


def time_ways(task, kind: str, steps: int, pad_id: int) -> dict[str, float]:
    """Milliseconds per training step of each way, alternating them batch by batch."""
    seed_everything(0, threads=1)
    models = {"forward": new_model(kind, task), "step loop": new_model(kind, task)}
    models["step loop"].load_state_dict(models["forward"].state_dict())
    ways = {"forward": forward_logits, "step loop": step_loop_logits}
    optimizers = {name: torch.optim.Adam(m.parameters(), 1e-3) for name, m in models.items()}
    seconds = dict.fromkeys(ways, 0.0)
    batches = task.train_batches(0)
    for index in range(steps + 2):  # the first two steps warm up and are not counted
        batch = batches[index % len(batches)]
        for name, logits_of in ways.items():
            start = time.perf_counter()
            logits = logits_of(models[name], batch)
            loss = F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]),
                batch.target_out.reshape(-1),
                ignore_index=pad_id,
            )
            optimizers[name].zero_grad()
            loss.backward()
            optimizers[name].step()
            if index >= 2:
                seconds[name] += time.perf_counter() - start
    return {name: 1_000 * total / steps for name, total in seconds.items()}


def main() -> None:
    """Time both ways for every model kind on the date task and the copy task; print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="timed training steps per way")
    args = parser.parse_args()
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    torch.set_num_threads(1)
    tasks = {
        "dates": (prepare(DateTaskConfig()), MODEL_KINDS),
        "copy": (copying.prepare(copying.CopyTaskConfig()), ("none", "bahdanau")),
    }
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, 1 thread")
    print(f"{'task':<7}{'model':<16}{'step loop ms':>14}{'forward ms':>12}{'time saved':>12}")
    for task_name, (task, kinds) in tasks.items():
        for kind in kinds:
            ms = time_ways(task, kind, args.steps, task.target_vocab.pad_id)
            saved = 1 - ms["forward"] / ms["step loop"]
            print(
                f"{task_name:<7}{kind:<16}{ms['step loop']:>14.1f}{ms['forward']:>12.1f}"
                f"{saved:>12.0%}",
                flush=True,
            )


if __name__ == "__main__":
    main()
