"""Seq2seq models: shapes of every decoder, no weight on padding, decoding stops at </s>."""

from __future__ import annotations

import pytest
import torch

from attnlib import seed_everything
from attnlib.data.text import CharVocab
from attnlib.masks import padding_mask
from attnlib.seq2seq import MODEL_KINDS, GRUEncoder, LuongDecoder, build_model

# 4 special symbols + 16 and + 11 characters: vocabularies of 20 and 15 symbols.
SOURCE, TARGET = CharVocab("abcdefghijklmnop"), CharVocab("abcdefghijk")
SOURCE_VOCAB, TARGET_VOCAB = len(SOURCE), len(TARGET)


@pytest.fixture
def batch():
    seed_everything(0)
    source = torch.randint(4, SOURCE_VOCAB, (3, 7))
    lengths = torch.tensor([7, 4, 2])
    source[1, 4:] = SOURCE.pad_id
    source[2, 2:] = SOURCE.pad_id
    target_in = torch.randint(4, TARGET_VOCAB, (3, 5))
    return source, lengths, target_in


def test_encoder_outputs_and_summary_shapes(batch):
    source, lengths, _ = batch
    outputs, summary = GRUEncoder(SOURCE_VOCAB, 8, 16, pad_id=SOURCE.pad_id)(source, lengths)
    assert outputs.shape == (3, 7, 16)
    assert summary.shape == (3, 16)
    # Packed sequences leave padded positions at exactly zero.
    assert torch.count_nonzero(outputs[2, 2:]) == 0


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_teacher_forced_shapes(kind, batch):
    source, lengths, target_in = batch
    model = build_model(kind, SOURCE, TARGET, embedding_dim=8, hidden_size=16)
    logits, alignments = model(source, lengths, target_in)
    assert logits.shape == (3, 5, TARGET_VOCAB)
    if kind == "none":
        assert alignments is None
    else:
        assert alignments.shape == (3, 5, 7)


@pytest.mark.parametrize("kind", [k for k in MODEL_KINDS if k != "none"])
def test_padded_source_positions_get_exactly_zero_weight(kind, batch):
    source, lengths, target_in = batch
    model = build_model(kind, SOURCE, TARGET, embedding_dim=8, hidden_size=16)
    _, alignments = model(source, lengths, target_in)
    assert torch.all(alignments[1, :, 4:] == 0.0)
    assert torch.all(alignments[2, :, 2:] == 0.0)
    torch.testing.assert_close(alignments.sum(-1), torch.ones(3, 5))


@pytest.mark.parametrize("kind", MODEL_KINDS)
def test_teacher_forcing_equals_calling_step_in_a_loop(kind, batch):
    # forward embeds all symbols and applies the output layer once; step does one at a time.
    source, lengths, target_in = batch
    model = build_model(kind, SOURCE, TARGET, embedding_dim=8, hidden_size=16).eval()
    logits, alignments = model(source, lengths, target_in)
    outputs, summary = model.encoder(source, lengths)
    mask = padding_mask(lengths, source.shape[1])
    state = model.decoder.init_state(summary, outputs)
    for t in range(target_in.shape[1]):
        step_logits, state, weights = model.decoder.step(target_in[:, t], state, outputs, mask)
        torch.testing.assert_close(logits[:, t], step_logits, rtol=1e-6, atol=1e-6)
        if kind != "none":
            torch.testing.assert_close(alignments[:, t], weights, rtol=0, atol=0)


@pytest.mark.parametrize("kind", [k for k in MODEL_KINDS if k != "none"])
def test_the_decoder_prepares_the_keys_as_its_score_would(kind, batch):
    source, lengths, _ = batch
    model = build_model(kind, SOURCE, TARGET, embedding_dim=8, hidden_size=16)
    outputs, summary = model.encoder(source, lengths)
    memory = model.decoder.remember(outputs, padding_mask(lengths, source.shape[1]))
    query = summary.unsqueeze(1)  # (batch, 1, hidden)
    prepared = model.decoder.score.score_prepared(query, memory.keys)
    torch.testing.assert_close(prepared, model.decoder.score(query, outputs), rtol=0, atol=0)


def test_greedy_decoding_stops_once_every_row_ends():
    model = build_model("bahdanau", SOURCE, TARGET, embedding_dim=8, hidden_size=16)
    with torch.no_grad():  # make </s> always the likeliest symbol
        model.decoder.output.weight.zero_()
        model.decoder.output.bias.zero_()
        model.decoder.output.bias[TARGET.eos_id] = 10.0
    source = torch.randint(4, SOURCE_VOCAB, (2, 6))
    decoded = model.greedy_decode(source, torch.tensor([6, 6]), max_steps=20)
    assert decoded.tokens.tolist() == [[TARGET.eos_id], [TARGET.eos_id]]
    assert decoded.alignments.shape == (2, 1, 6)


def test_greedy_decoding_pads_rows_that_already_ended():
    model = build_model("none", SOURCE, TARGET, embedding_dim=8, hidden_size=16)
    calls = {"n": 0}

    def scripted_output(module, inputs, logits):
        # A forward hook's return value replaces the output layer's logits.
        calls["n"] += 1
        scripted = torch.full_like(logits, -10.0)
        # Row 0 ends at step 1; row 1 emits symbol 5 twice and then ends.
        scripted[0, end if calls["n"] == 1 else 7] = 10.0
        scripted[1, 5 if calls["n"] < 3 else end] = 10.0
        return scripted

    end, pad = TARGET.eos_id, TARGET.pad_id
    model.decoder.output.register_forward_hook(scripted_output)
    decoded = model.greedy_decode(torch.randint(4, SOURCE_VOCAB, (2, 5)), torch.tensor([5, 5]))
    assert decoded.tokens.tolist() == [[end, pad, pad], [5, 5, end]]


def test_luong_rejects_unknown_score():
    message = "unknown Luong score 'concat'; choose one of dot, general, additive"
    with pytest.raises(ValueError, match=message):
        LuongDecoder(10, 8, 16, score="concat")


@pytest.mark.parametrize(("name", "parameters"), [("dot", 0), ("general", 256), ("additive", 544)])
def test_luong_scores_come_from_the_registry(name, parameters):
    score = LuongDecoder(10, 8, 16, score=name, attention_size=16).score
    assert type(score).__name__ == {"dot": "DotScore"}.get(name, f"{name.title()}Score")
    assert sum(p.numel() for p in score.parameters()) == parameters


def test_model_kinds_are_named_by_the_score_registry():
    assert MODEL_KINDS == ("none", "bahdanau", "luong-dot", "luong-general", "luong-additive")


def test_special_ids_come_from_the_vocabularies():
    model = build_model("none", SOURCE, TARGET, embedding_dim=8, hidden_size=16)
    ids = (model.pad_id, model.sos_id, model.eos_id)
    assert ids == (TARGET.pad_id, TARGET.sos_id, TARGET.eos_id)
    assert model.encoder.embedding.padding_idx == SOURCE.pad_id


def test_build_model_rejects_unknown_kind():
    with pytest.raises(ValueError, match="unknown model kind 'transformer'"):
        build_model("transformer", SOURCE, TARGET)
