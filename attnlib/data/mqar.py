"""Multi-query associative recall (MQAR; Arora et al. 2023, "Zoology"): recall needs attention.

A row opens with ``num_pairs`` key–value pairs, ``k1 v1 k2 v2 ...``; then, among filler tokens
(id 0), each key comes back once, at a random place and in a random order. At the position of a
key that comes back the model must say its value: ``targets`` holds it there and ``IGNORE``
everywhere else, the next-token loss's ignore index. Keys are distinct within a row and drawn from
ids 1 to ``vocab_size // 2 - 1``, values from the upper half, with repeats. A model that keeps a
fixed-size state must store every pair in it; softmax attention looks the key up.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlib._checks import check_count, check_int

FILLER = 0
IGNORE = -100  # torch.nn.functional.cross_entropy's ignore_index


@dataclass(frozen=True)
class MQARBatch:
    """Token ids (batch, seq_len) and targets (batch, seq_len): a key's value where it comes
    back, ``IGNORE`` elsewhere.

    Chapter 19's date rows (:mod:`attnlib.data.date_rows`) use it too, with the next target
    character as the target: any rows whose loss reads some positions only."""

    ids: torch.Tensor
    targets: torch.Tensor

    @property
    def queries(self) -> torch.Tensor:
        """(batch, seq_len) bool, True at the positions whose target is a value to recall."""
        return self.targets != IGNORE


def mqar_batch(batch: int, seq_len: int, num_pairs: int, vocab_size: int, seed: int) -> MQARBatch:
    """``batch`` rows of MQAR, fixed by ``seed``."""
    check_count("batch", batch)
    check_count("num_pairs", num_pairs)
    check_int("seed", seed)
    if check_count("seq_len", seq_len) < 3 * num_pairs:
        raise ValueError(
            f"seq_len={seq_len} cannot hold {num_pairs} pairs and their {num_pairs} queries "
            f"(at least {3 * num_pairs} positions)"
        )
    key_ids = check_count("vocab_size", vocab_size) // 2 - 1  # keys are 1 .. vocab_size // 2 - 1
    if key_ids < num_pairs:
        raise ValueError(
            f"vocab_size={vocab_size} has {max(key_ids, 0)} key ids, fewer than num_pairs="
            f"{num_pairs} distinct keys"
        )
    generator = torch.Generator().manual_seed(seed)
    ids = torch.full((batch, seq_len), FILLER, dtype=torch.long)
    targets = torch.full((batch, seq_len), IGNORE, dtype=torch.long)
    context = 2 * num_pairs
    for row in range(batch):
        keys = torch.randperm(key_ids, generator=generator)[:num_pairs] + 1
        values = torch.randint(vocab_size // 2, vocab_size, (num_pairs,), generator=generator)
        ids[row, 0:context:2], ids[row, 1:context:2] = keys, values
        places = context + torch.randperm(seq_len - context, generator=generator)[:num_pairs]
        ids[row, places], targets[row, places] = keys, values
    return MQARBatch(ids, targets)
