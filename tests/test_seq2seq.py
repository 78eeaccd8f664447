"""Seq2seq models: shapes of every decoder, no weight on padding, decoding stops at </s>."""

from __future__ import annotations

import pytest
import torch

from attnlib import seed_everything
from attnlib.seq2seq import MODEL_KINDS, Encoder, LuongDecoder, build_model, exact_match

SOURCE_VOCAB, TARGET_VOCAB = 20, 15


@pytest.fixture
def batch():
    seed_everything(0)
    source = torch.randint(4, SOURCE_VOCAB, (3, 7))
    lengths = torch.tensor([7, 4, 2])
    source[1, 4:] = 0  # padding
    source[2, 2:] = 0
    target_in = torch.randint(4, TARGET_VOCAB, (3, 5))
    return source, lengths, target_in


def test_encoder_outputs_and_summary_shapes(batch):
    source, lengths, _ = batch
    outputs, summary = Encoder(SOURCE_VOCAB, 8, 16)(source, lengths)
    assert outputs.shape == (3, 7, 16)
    assert summary.shape == (3, 16)
    # Packed sequences leave padded positions at exactly zero.
    assert torch.count_nonzero(outputs[2, 2:]) == 0


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_teacher_forced_shapes(kind, batch):
    source, lengths, target_in = batch
    model = build_model(kind, SOURCE_VOCAB, TARGET_VOCAB, embedding_dim=8, hidden_size=16)
    logits, alignments = model(source, lengths, target_in)
    assert logits.shape == (3, 5, TARGET_VOCAB)
    if kind == "none":
        assert alignments is None
    else:
        assert alignments.shape == (3, 5, 7)


@pytest.mark.parametrize("kind", [k for k in MODEL_KINDS if k != "none"])
def test_padded_source_positions_get_exactly_zero_weight(kind, batch):
    source, lengths, target_in = batch
    model = build_model(kind, SOURCE_VOCAB, TARGET_VOCAB, embedding_dim=8, hidden_size=16)
    _, alignments = model(source, lengths, target_in)
    assert torch.all(alignments[1, :, 4:] == 0.0)
    assert torch.all(alignments[2, :, 2:] == 0.0)
    torch.testing.assert_close(alignments.sum(-1), torch.ones(3, 5))


def test_greedy_decoding_stops_once_every_row_ends():
    model = build_model("bahdanau", SOURCE_VOCAB, TARGET_VOCAB, embedding_dim=8, hidden_size=16)
    with torch.no_grad():  # make </s> (id 2) always the likeliest symbol
        model.decoder.output.weight.zero_()
        model.decoder.output.bias.zero_()
        model.decoder.output.bias[2] = 10.0
    source = torch.randint(4, SOURCE_VOCAB, (2, 6))
    decoded = model.greedy_decode(source, torch.tensor([6, 6]), max_steps=20)
    assert decoded.tokens.tolist() == [[2], [2]]
    assert decoded.alignments.shape == (2, 1, 6)


def test_greedy_decoding_pads_rows_that_already_ended():
    model = build_model("none", SOURCE_VOCAB, TARGET_VOCAB, embedding_dim=8, hidden_size=16)
    calls = {"n": 0}
    original = model.decoder.step

    def scripted_step(token, state, outputs, mask):
        logits, state, weights = original(token, state, outputs, mask)
        calls["n"] += 1
        scripted = torch.full_like(logits, -10.0)
        # Row 0 ends at step 1; row 1 emits symbol 5 twice and then ends.
        scripted[0, 2 if calls["n"] == 1 else 7] = 10.0
        scripted[1, 5 if calls["n"] < 3 else 2] = 10.0
        return scripted, state, weights

    model.decoder.step = scripted_step
    decoded = model.greedy_decode(torch.randint(4, SOURCE_VOCAB, (2, 5)), torch.tensor([5, 5]))
    assert decoded.tokens.tolist() == [[2, 0, 0], [5, 5, 2]]


def test_luong_rejects_unknown_score():
    with pytest.raises(ValueError, match="unknown Luong score 'cosine'"):
        LuongDecoder(10, 8, 16, score="cosine")


def test_build_model_rejects_unknown_kind():
    with pytest.raises(ValueError, match="unknown model kind 'transformer'"):
        build_model("transformer", 10, 10)


def test_exact_match_counts_identical_strings():
    assert exact_match(["2026-11-21", "2026-11-22"], ["2026-11-21", "2026-11-21"]) == 0.5
