"""Head measurements against hand-built inputs whose answers are known."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlib.data.repeats import repeated_segments
from attnlib.heads import (
    InContextLoss,
    copying_score,
    first_token_score,
    in_context_gain,
    ov_circuit,
    prefix_matching_score,
    previous_token_score,
    uniform_first_token_score,
)


def previous_token_pattern(seq: int) -> torch.Tensor:
    """(seq, seq): each position attends to the one before it, position 0 to itself."""
    pattern = torch.zeros(seq, seq)
    pattern[0, 0] = 1.0
    pattern[torch.arange(1, seq), torch.arange(seq - 1)] = 1.0
    return pattern


def uniform_causal(seq: int) -> torch.Tensor:
    """(seq, seq): each position attends equally to itself and every earlier one."""
    causal = torch.ones(seq, seq).tril()
    return causal / causal.sum(dim=1, keepdim=True)


def heads(*patterns: torch.Tensor, batch: int = 1) -> torch.Tensor:
    """(batch, 1 layer, len(patterns) heads, seq, seq) from (seq, seq) patterns."""
    return torch.stack(patterns)[None, None].expand(batch, -1, -1, -1, -1).clone()


# --- first-token (attention sink) score -------------------------------------------------------


def sink_pattern(seq: int) -> torch.Tensor:
    """(seq, seq): every position puts all its weight on position 0."""
    pattern = torch.zeros(seq, seq)
    pattern[:, 0] = 1.0
    return pattern


def test_first_token_scores_a_sink_one_and_uniform_attention_its_mean():
    weights = heads(sink_pattern(6), uniform_causal(6), previous_token_pattern(6), batch=2)
    score = first_token_score(weights)
    assert score.shape == (1, 3)
    uniform = sum(1 / (t + 1) for t in range(1, 6)) / 5
    assert score[0, 0].item() == 1.0 and score[0, 2].item() == pytest.approx(1 / 5)
    assert score[0, 1].item() == pytest.approx(uniform)
    assert uniform_first_token_score(6) == pytest.approx(uniform)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: first_token_score(torch.ones(1, 1, 1, 1, 1)), "seq >= 2"),
        (lambda: first_token_score(torch.ones(1, 1, 3, 3)), "at least 5 dimensions"),
        (lambda: uniform_first_token_score(1), "seq must be an int >= 2, got 1"),
        (lambda: uniform_first_token_score(True), "seq must be an int >= 2"),
    ],
)
def test_first_token_score_says_what_is_wrong(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()


# --- previous-token score -----------------------------------------------------------------------


def test_attending_exactly_to_the_previous_token_scores_one():
    score = previous_token_score(heads(previous_token_pattern(6), batch=3))
    assert score.shape == (1, 1) and score.item() == 1.0


def test_previous_token_scores_per_layer_and_head():
    weights = torch.stack(
        [
            torch.stack([previous_token_pattern(5), torch.eye(5)]),
            torch.stack([uniform_causal(5), previous_token_pattern(5)]),
        ]
    )[None]  # (1 batch, 2 layers, 2 heads, 5, 5)
    uniform = sum(1 / (t + 1) for t in range(1, 5)) / 4
    expected = torch.tensor([[1.0, 0.0], [uniform, 1.0]])
    assert torch.allclose(previous_token_score(weights), expected)


def test_previous_token_score_averages_over_the_batch():
    weights = torch.stack([heads(previous_token_pattern(4))[0], heads(torch.eye(4))[0]])
    assert previous_token_score(weights).item() == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("weights", "error", "message"),
    [
        (torch.zeros(1, 2, 4, 4), ValueError, r"at least 5 dimensions"),
        (torch.zeros(1, 1, 1, 4, 3), ValueError, r"\(batch, layers, heads, seq, seq\)"),
        (torch.zeros(1, 1, 1, 1, 1), ValueError, "seq >= 2"),
        (torch.full((1, 1, 1, 2, 2), math.nan), ValueError, "weights contains NaN"),
        (torch.zeros(1, 1, 1, 2, 2, dtype=torch.long), TypeError, "floating-point"),
    ],
)
def test_previous_token_score_refuses_bad_weights(weights, error, message):
    with pytest.raises(error, match=message):
        previous_token_score(weights)


# --- prefix-matching score ----------------------------------------------------------------------

REPEATED = torch.tensor([[7, 8, 9, 7, 8, 9]])  # queries 3, 4, 5 each saw their token once


def induction_pattern() -> torch.Tensor:
    """(6, 6) for REPEATED: queries 3, 4, 5 attend to 1, 2, 3, the token after their copy."""
    pattern = torch.zeros(6, 6)
    pattern[:3, 0] = 1.0  # no earlier copy: these rows do not count, wherever they look
    pattern[torch.tensor([3, 4, 5]), torch.tensor([1, 2, 3])] = 1.0
    return pattern


def test_an_induction_pattern_scores_one():
    score = prefix_matching_score(heads(induction_pattern()), REPEATED)
    assert score.shape == (1, 1) and score.item() == 1.0


def test_uniform_attention_scores_the_share_of_its_keys_that_match():
    expected = (1 / 4 + 1 / 5 + 1 / 6) / 3  # query t spreads 1 / (t + 1) over t + 1 keys
    score = prefix_matching_score(heads(uniform_causal(6)), REPEATED)
    assert score.item() == pytest.approx(expected)


def test_a_previous_token_head_scores_zero_on_a_repeat():
    weights = heads(previous_token_pattern(6), induction_pattern())
    assert torch.allclose(prefix_matching_score(weights, REPEATED), torch.tensor([[0.0, 1.0]]))


def test_queries_without_an_earlier_copy_do_not_count():
    pattern = induction_pattern()
    pattern[:3] = uniform_causal(6)[:3]  # rows 0-2 change; their tokens never occurred before
    assert prefix_matching_score(heads(pattern), REPEATED).item() == 1.0


def test_the_weight_after_every_earlier_copy_is_summed():
    # Query 1's copy is at 0 (key 1); query 2's copies are at 0 and 1 (keys 1 and 2).
    ids = torch.tensor([[5, 5, 5]])
    expected = (1 / 2 + 2 / 3) / 2
    assert prefix_matching_score(heads(uniform_causal(3)), ids).item() == pytest.approx(expected)


def test_prefix_matching_averages_over_all_queries_of_the_batch():
    # Row 0 has three queries scoring 1, row 1 one query scoring 0: the mean is over queries.
    ids = torch.tensor([[7, 8, 9, 7, 8, 9], [1, 2, 3, 4, 5, 1]])
    weights = torch.stack([heads(induction_pattern())[0], heads(torch.eye(6))[0]])
    assert prefix_matching_score(weights, ids).item() == pytest.approx(3 / 4)


@pytest.mark.parametrize(
    ("ids", "error", "message"),
    [
        (torch.tensor([[1, 2, 3, 4, 5, 6]]), ValueError, "ids repeat no token"),
        (torch.tensor([[7, 8, 9, 7, 8]]), ValueError, r"ids must be \(batch, seq\) = \(1, 6\)"),
        (REPEATED.float(), TypeError, "ids must be integers"),
        (REPEATED.tolist(), TypeError, "ids must be a torch.Tensor"),
    ],
)
def test_prefix_matching_refuses_bad_ids(ids, error, message):
    with pytest.raises(error, match=message):
        prefix_matching_score(heads(uniform_causal(6)), ids)


def test_the_measures_take_repeated_segments_and_their_weights_as_they_come():
    batch = repeated_segments(4, 20, 8, min_segment=3, max_segment=6, seed=0)
    weights = torch.softmax(
        torch.randn(4, 2, 3, 20, 20, generator=torch.Generator().manual_seed(0)), -1
    )
    assert prefix_matching_score(weights, batch.ids).shape == (2, 3)
    assert previous_token_score(weights).shape == (2, 3)


# --- OV circuit and copying score ---------------------------------------------------------------


def identity_circuit(n: int = 4) -> tuple[torch.Tensor, ...]:
    """embedding, w_v, w_o, unembedding, all the (n, n) identity."""
    return tuple(torch.eye(n) for _ in range(4))


def test_the_identity_ov_circuit_copies():
    assert copying_score(*identity_circuit()) == pytest.approx(1.0)


def test_the_negated_ov_circuit_scores_minus_one():
    embedding, w_v, w_o, unembedding = identity_circuit()
    assert copying_score(embedding, w_v, -w_o, unembedding) == pytest.approx(-1.0)


def test_a_quarter_turn_neither_copies_nor_suppresses():
    embedding, w_v, _, unembedding = identity_circuit(2)
    quarter_turn = torch.tensor([[0.0, 1.0], [-1.0, 0.0]])  # eigenvalues ±i
    assert copying_score(embedding, w_v, quarter_turn, unembedding) == pytest.approx(0.0, abs=1e-12)


def test_the_copying_score_is_the_eigenvalue_ratio():
    embedding, w_v, _, unembedding = identity_circuit()
    w_o = torch.diag(torch.tensor([3.0, 1.0, -2.0, 2.0]))
    assert copying_score(embedding, w_v, w_o, unembedding) == pytest.approx((3 + 1 - 2 + 2) / 8)


def test_the_copying_score_ignores_scale():
    embedding, w_v, w_o, unembedding = (
        torch.randn(6, 6, generator=torch.Generator().manual_seed(i)) for i in range(4)
    )
    assert copying_score(embedding, w_v, 5 * w_o, unembedding) == pytest.approx(
        copying_score(embedding, w_v, w_o, unembedding)
    )


def test_the_small_product_gives_the_full_circuits_eigenvalues():
    generator = torch.Generator().manual_seed(0)
    vocab, d_model, d_head = 12, 8, 3
    embedding = torch.randn(vocab, d_model, generator=generator, dtype=torch.double)
    w_v = torch.randn(d_model, d_head, generator=generator, dtype=torch.double)
    w_o = torch.randn(d_head, d_model, generator=generator, dtype=torch.double)
    unembedding = torch.randn(vocab, d_model, generator=generator, dtype=torch.double)
    eigenvalues = np.linalg.eigvals(ov_circuit(embedding, w_v, w_o, unembedding).numpy())
    expected = eigenvalues.real.sum() / np.abs(eigenvalues).sum()
    assert copying_score(embedding, w_v, w_o, unembedding) == pytest.approx(expected, abs=1e-9)


def test_ov_circuit_rows_are_the_logits_of_the_token_attended_to():
    embedding, w_v, _, unembedding = identity_circuit()
    shift = torch.eye(4).roll(1, dims=1)  # token i -> token i + 1
    circuit = ov_circuit(embedding, w_v, shift, unembedding)
    assert circuit.shape == (4, 4)
    assert circuit.argmax(dim=1).tolist() == [1, 2, 3, 0]


def test_the_copying_score_refuses_mismatched_shapes():
    embedding, w_v, w_o, unembedding = identity_circuit()
    with pytest.raises(ValueError, match=r"w_o must be \(4, 4\) to chain with the others"):
        copying_score(embedding, w_v, torch.eye(3), unembedding)
    with pytest.raises(ValueError, match=r"unembedding must be \(4, 4\)"):
        copying_score(embedding, w_v, w_o, torch.eye(5, 4))
    with pytest.raises(ValueError, match="embedding must be a matrix"):
        copying_score(embedding[None], w_v, w_o, unembedding)


def test_a_zero_ov_circuit_has_no_copying_score():
    embedding, w_v, w_o, unembedding = identity_circuit()
    with pytest.raises(ValueError, match="the OV circuit is zero"):
        copying_score(embedding, w_v, 0 * w_o, unembedding)


# --- loss on repeated positions -----------------------------------------------------------------


def test_in_context_gain_splits_the_mean_loss():
    losses = torch.tensor([[4.0, 2.0, 1.0], [2.5, 0.5, 2.0]])
    mask = torch.tensor([[False, True, False], [False, True, True]])
    result = in_context_gain(losses, mask)
    assert result == InContextLoss(repeated=1.5, other=2.5)
    assert result.gain == pytest.approx(1.0)


def test_in_context_gain_lines_up_with_next_token_losses():
    batch = repeated_segments(3, 16, 6, min_segment=2, max_segment=5, seed=1)
    losses = torch.ones(3, 15)  # one loss per prediction of ids[:, 1:]
    losses[batch.repeat_mask[:, :-1]] = 0.0  # a model that copies perfectly
    assert in_context_gain(losses, batch.repeat_mask[:, :-1]) == InContextLoss(0.0, 1.0)


@pytest.mark.parametrize(
    ("losses", "mask", "error", "message"),
    [
        (
            torch.ones(2, 4),
            torch.ones(2, 3, dtype=torch.bool),
            ValueError,
            r"repeat_mask\[:, :-1\]",
        ),
        (torch.ones(2, 3), torch.ones(2, 3), TypeError, "repeat_mask must be a boolean tensor"),
        (torch.ones(2, 3), torch.ones(2, 3, dtype=torch.bool), ValueError, "both repeated"),
        (torch.ones(2, 3), torch.zeros(2, 3, dtype=torch.bool), ValueError, "both repeated"),
        (torch.full((2, 3), math.inf), torch.eye(2, 3).bool(), ValueError, "losses contains ±inf"),
    ],
)
def test_in_context_gain_refuses_bad_inputs(losses, mask, error, message):
    with pytest.raises(error, match=message):
        in_context_gain(losses, mask)
