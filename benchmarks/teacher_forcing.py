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
from torch import nn

from attnlib import seed_everything
from attnlib.masks import padding_mask
from attnlib.seq2seq import MODEL_KINDS
from attnlib.tasks import copy as copying
from attnlib.tasks.dates import DateTaskConfig, new_model, prepare


class StepLoop(nn.Module):
    """A model whose teacher forcing calls ``decoder.step`` one step at a time, as a peer."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, source, lengths, target_in) -> tuple[torch.Tensor, None]:
        """Teacher-forced logits (batch, tgt_len, vocab) from ``decoder.step``; no alignments."""
        decoder = self.model.decoder
        outputs, summary = self.model.encoder(source, lengths)
        mask = padding_mask(lengths, source.shape[1])
        state = decoder.init_state(summary, outputs)
        logits = []
        for t in range(target_in.shape[1]):
            step_logits, state, _ = decoder.step(target_in[:, t], state, outputs, mask)
            logits.append(step_logits)
        return torch.stack(logits, 1), None


def time_ways(task, kind: str, steps: int) -> dict[str, float]:
    """Milliseconds per training step of each way, alternating them batch by batch."""
    seed_everything(0, threads=1)
    forward = new_model(kind, task)
    step_loop = new_model(kind, task)
    step_loop.load_state_dict(forward.state_dict())
    models = {"forward": forward, "step loop": StepLoop(step_loop)}
    optimizers = {name: torch.optim.Adam(m.parameters(), 1e-3) for name, m in models.items()}
    seconds = dict.fromkeys(models, 0.0)
    batches = task.train_batches(0)
    for index in range(steps + 2):  # the first two steps warm up and are not counted
        batch = batches[index % len(batches)]
        for name, model in models.items():
            start = time.perf_counter()
            loss = task.loss(model, batch)  # the task's teacher-forcing loss, either way
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
            ms = time_ways(task, kind, args.steps)
            saved = 1 - ms["forward"] / ms["step loop"]
            print(
                f"{task_name:<7}{kind:<16}{ms['step loop']:>14.1f}{ms['forward']:>12.1f}"
                f"{saved:>12.0%}",
                flush=True,
            )


if __name__ == "__main__":
    main()
