"""MQAR batches: pairs first, every key asked once later, its value the target there."""

from __future__ import annotations

import pytest
import torch

from attnlib.data.mqar import FILLER, IGNORE, mqar_batch


def test_every_key_comes_back_once_with_its_value_as_the_target():
    batch = mqar_batch(batch=16, seq_len=40, num_pairs=6, vocab_size=64, seed=3)
    assert batch.ids.shape == batch.targets.shape == (16, 40)
    for ids, targets, asked in zip(batch.ids, batch.targets, batch.queries, strict=True):
        keys, values = ids[0:12:2].tolist(), ids[1:12:2].tolist()
        assert len(set(keys)) == 6 and all(1 <= k < 32 for k in keys)
        assert all(32 <= v < 64 for v in values)
        pairs = dict(zip(keys, values, strict=True))
        places = asked.nonzero().flatten().tolist()
        assert len(places) == 6 and min(places) >= 12
        assert sorted(ids[places].tolist()) == sorted(keys)
        assert all(targets[p].item() == pairs[ids[p].item()] for p in places)
        rest = [p for p in range(12, 40) if p not in places]
        assert all(ids[p].item() == FILLER and targets[p].item() == IGNORE for p in rest)
        assert (targets[:12] == IGNORE).all()


def test_batches_are_fixed_by_the_seed():
    first = mqar_batch(4, 24, 4, 32, seed=0)
    again = mqar_batch(4, 24, 4, 32, seed=0)
    assert torch.equal(first.ids, again.ids) and torch.equal(first.targets, again.targets)
    assert not torch.equal(first.ids, mqar_batch(4, 24, 4, 32, seed=1).ids)


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ((2, 11, 4, 64, 0), ValueError, "seq_len=11 cannot hold 4 pairs"),
        ((2, 30, 8, 16, 0), ValueError, "has 7 key ids, fewer than num_pairs=8"),
        ((0, 30, 4, 64, 0), ValueError, "batch must be positive"),
        ((2, 30, 4, 64, -1), ValueError, "seed must be an int >= 0"),
        ((2, 30, 4.0, 64, 0), TypeError, "num_pairs must be an int"),
    ],
)
def test_mqar_says_what_is_wrong(arguments, error, message):
    with pytest.raises(error, match=message):
        mqar_batch(*arguments)
