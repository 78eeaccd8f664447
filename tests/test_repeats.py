"""Repeated segments: deterministic, laid out as documented, repeat_mask exact, clear errors."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from attnlib.data.repeats import RepeatedSegments, repeated_segments

SETTINGS = {"min_segment": 2, "max_segment": 6, "seed": 0}


def make(batch: int = 64, seq_len: int = 24, vocab_size: int = 10, **overrides):
    return repeated_segments(batch, seq_len, vocab_size, **{**SETTINGS, **overrides})


def rows(batch: RepeatedSegments):
    """(ids, first, second, length) of each row, as Python values."""
    fields = (batch.ids, batch.first.tolist(), batch.second.tolist(), batch.length.tolist())
    return zip(*fields, strict=True)


def test_same_seed_gives_the_same_batch():
    one, two = make(seed=7), make(seed=7)
    for field in ("ids", "repeat_mask", "first", "second", "length"):
        assert torch.equal(getattr(one, field), getattr(two, field)), field


def test_other_seed_gives_another_batch():
    assert not torch.equal(make(seed=7).ids, make(seed=8).ids)


def test_a_numpy_seed_is_the_same_as_an_int_seed():
    assert torch.equal(make(seed=np.int64(3)).ids, make(seed=3).ids)


def test_shapes_and_dtypes():
    batch = make(batch=5, seq_len=17)
    assert batch.ids.shape == batch.repeat_mask.shape == (5, 17)
    assert batch.ids.dtype == torch.long and batch.repeat_mask.dtype == torch.bool
    assert batch.first.shape == batch.second.shape == batch.length.shape == (5,)


@pytest.mark.parametrize("bos_id", [0, 3, 9])
def test_bos_opens_every_row_and_nowhere_else(bos_id):
    ids = make(bos_id=bos_id).ids
    assert (ids[:, 0] == bos_id).all()
    assert (ids[:, 1:] != bos_id).all()
    assert ((ids >= 0) & (ids < 10)).all()


def test_the_segment_appears_twice_inside_the_row_after_bos():
    batch = make()
    for row, first, second, length in rows(batch):
        assert 1 <= first and first + length <= second and second + length <= row.numel()
        assert torch.equal(row[first : first + length], row[second : second + length])


def test_lengths_cover_the_range_and_places_vary_per_row():
    batch = make(batch=400)
    assert set(batch.length.tolist()) == {2, 3, 4, 5, 6}
    assert len(set(batch.first.tolist())) > 5 and len(set(batch.second.tolist())) > 5


def test_repeat_mask_marks_the_second_copy_but_its_last_token():
    batch = make()
    for (row, first, second, length), mask in zip(rows(batch), batch.repeat_mask, strict=True):
        marked = mask.nonzero().flatten().tolist()
        assert marked == list(range(second, second + length - 1))
        for t in marked:  # the next token is the one that followed the same token earlier
            j = t - second
            assert row[t] == row[first + j] and row[t + 1] == row[first + j + 1]
    assert not batch.repeat_mask[:, -1].any()  # so repeat_mask[:, :-1] loses no position


def test_a_tight_fit_leaves_no_noise():
    batch = make(seq_len=1 + 2 * 4, min_segment=4, max_segment=4)
    assert (batch.first == 1).all() and (batch.second == 5).all()
    assert batch.repeat_mask.sum(dim=1).tolist() == [3] * 64


def test_every_split_of_the_noise_is_equally_likely():
    # seq_len 1 + 2*3 + 2: two noise tokens split (before, between, after) in 6 ways.
    batch = make(batch=6000, seq_len=9, min_segment=3, max_segment=3)
    before = batch.first - 1
    between = batch.second - batch.first - 3
    splits = Counter(zip(before.tolist(), between.tolist(), strict=True))
    assert set(splits) == {(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0)}
    assert all(abs(count / 6000 - 1 / 6) < 0.02 for count in splits.values())


@pytest.mark.parametrize("bos_id", [0, 4])
def test_tokens_are_uniform_over_the_vocabulary_less_bos(bos_id):
    ids = make(batch=2000, seq_len=32, vocab_size=8, bos_id=bos_id).ids[:, 1:]
    counts = torch.bincount(ids.flatten(), minlength=8).double() / ids.numel()
    assert counts[bos_id] == 0
    others = torch.cat([counts[:bos_id], counts[bos_id + 1 :]])
    assert torch.allclose(others, torch.full((7,), 1 / 7, dtype=torch.double), atol=0.005)


def test_unique_segments_have_distinct_tokens():
    batch = make(batch=200, vocab_size=8, unique=True)
    for row, first, _, length in rows(batch):
        assert len(set(row[first : first + length].tolist())) == length


def test_unique_segments_may_use_every_token():
    batch = make(vocab_size=7, unique=True, min_segment=6, max_segment=6, bos_id=2)
    for row, first, _, length in rows(batch):
        assert sorted(row[first : first + length].tolist()) == [0, 1, 3, 4, 5, 6]


def test_segments_without_unique_may_repeat_a_token():
    batch = make(batch=200, vocab_size=4)
    assert any(
        len(set(row[first : first + length].tolist())) < length
        for row, first, _, length in rows(batch)
    )


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        ({"batch": 0}, ValueError, "batch must be positive"),
        ({"seq_len": 2.0}, TypeError, "seq_len must be an int"),
        ({"vocab_size": 1}, ValueError, "vocab_size must be an int >= 2"),
        ({"min_segment": 1}, ValueError, "min_segment must be an int >= 2"),
        ({"min_segment": 4, "max_segment": 3}, ValueError, "max_segment must be an int >= 4"),
        ({"max_segment": 12}, ValueError, r"max_segment=12 does not fit twice in seq_len=24"),
        ({"seed": 1.5}, TypeError, "seed must be an int"),
        ({"seed": "0"}, TypeError, "seed must be an int"),
        ({"seed": -1}, ValueError, "seed must be an int >= 0"),
        ({"bos_id": 10}, ValueError, "bos_id must be below vocab_size=10"),
        ({"unique": 1}, TypeError, "unique must be True or False"),
        (
            {"unique": True, "vocab_size": 6, "max_segment": 6},
            ValueError,
            "vocab_size=6 is too small for unique segments of max_segment=6",
        ),
    ],
)
def test_bad_arguments_are_refused_by_name(overrides, error, message):
    arguments = {"batch": 4, "seq_len": 24, "vocab_size": 10, **SETTINGS, **overrides}
    batch, seq_len, vocab_size = (arguments.pop(k) for k in ("batch", "seq_len", "vocab_size"))
    with pytest.raises(error, match=message):
        repeated_segments(batch, seq_len, vocab_size, **arguments)
