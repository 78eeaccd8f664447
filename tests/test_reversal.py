"""Chapter 16's reversal task: the examples, their batches, the loss, and the runs it compares."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from attnlib.model_config import TransformerConfig
from attnlib.tasks.reversal import (
    END,
    PAD,
    START,
    VOCAB,
    batches_of,
    digits,
    reversal_data,
    reversal_loss,
    teacher_forced,
    train_on,
    train_reversal,
)

TINY = TransformerConfig(
    vocab_size=VOCAB, d_model=16, num_heads=2, num_layers=1, d_ff=32, dropout=0.0, max_len=16
)


def _data(count: int = 40, seed: int = 1):
    return reversal_data(count, torch.Generator().manual_seed(seed))


def test_an_example_is_the_digits_their_reversal_and_the_shifted_decoder_input():
    source, mask, decoder_in, target = _data()
    assert (source.shape, mask.shape, decoder_in.shape, target.shape) == (
        (40, 10),
        (40, 10),
        (40, 11),
        (40, 11),
    )
    lengths = mask.sum(dim=1)
    assert 4 <= lengths.min() and lengths.max() <= 10
    for row in range(40):
        n = int(lengths[row])
        assert digits(target[row]) == digits(source[row])[::-1]
        assert target[row, n] == END and (target[row, n + 1 :] == PAD).all()
        assert decoder_in[row, 0] == START
        assert torch.equal(decoder_in[row, 1 : n + 1], target[row, :n])
        assert (source[row, n:] == PAD).all() and (source[row, :n] >= 3).all()
    torch.testing.assert_close(_data()[0], source)  # the generator's seed fixes the examples


def test_digits_stops_at_padding_or_the_end_token():
    assert digits(torch.tensor([4, 3, 12, END, 5])) == "109"
    assert digits(torch.tensor([START, 5, PAD, 6])) == "<s>2"


@pytest.mark.parametrize(
    ("count", "low", "high", "message"),
    [
        (0, 4, 10, "count must be positive, got 0"),
        (5, 6, 4, "need 1 <= min_digits <= max_digits, got 6 and 4"),
        (5, 0, 4, "need 1 <= min_digits <= max_digits, got 0 and 4"),
    ],
)
def test_bad_sizes_are_named(count, low, high, message):
    with pytest.raises(ValueError, match=message):
        reversal_data(count, torch.Generator(), low, high)


def test_each_pass_over_the_data_is_a_fresh_seeded_order():
    data = _data(10)
    batches = batches_of(data, steps=5, batch_size=4, seed=3)  # 20 examples: two passes
    assert len(batches) == 5 and [b[0].shape for b in batches] == [(4, 10)] * 5
    seen = torch.cat([b[0] for b in batches])
    rows = [tuple(r.tolist()) for r in data[0]]
    first = sorted(rows.index(tuple(r.tolist())) for r in seen[:10])
    second = sorted(rows.index(tuple(r.tolist())) for r in seen[10:])
    assert first == second == list(range(10))  # every example once in each pass
    assert not torch.equal(seen[:10], seen[10:])
    again = batches_of(data, steps=5, batch_size=4, seed=3)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(batches, again, strict=True))


class _Oracle(nn.Module):
    """A stand-in model whose logits put 10 on the right next token: the target's."""

    def __init__(self, target: torch.Tensor):
        super().__init__()
        self.target = target

    def forward(self, source, decoder_in, source_key_mask, target_key_mask):
        return 10 * nn.functional.one_hot(self.target, VOCAB).float(), None


def test_teacher_forcing_counts_only_real_tokens():
    data = _data(8)
    oracle = _Oracle(target=data[3])
    accuracy, loss = teacher_forced(oracle, data)
    assert accuracy == 1.0
    expected = -math.log(math.exp(10) / (math.exp(10) + VOCAB - 1))
    assert loss == pytest.approx(expected, rel=1e-3)  # float32 logits
    assert reversal_loss(oracle, data).item() == pytest.approx(expected, rel=1e-3)


def test_a_run_is_fixed_by_its_seed_and_training_on_returns_the_accuracies():
    data, test = _data(64), _data(16, seed=2)
    first, again = (train_reversal(TINY, data, steps=3, seed=5) for _ in range(2))
    for a, b in zip(first.state_dict().values(), again.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    model, accuracies = train_on(first, data, test, seed=5, done=3, steps=4, every=2)
    assert model is first and len(accuracies) == 2
    assert all(0.0 <= a <= 1.0 for a in accuracies)
    assert accuracies[-1] == teacher_forced(model, test)[0]
