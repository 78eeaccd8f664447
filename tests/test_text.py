"""Character vocabularies and batching."""

from __future__ import annotations

import pytest
import torch

from attnlib.data.text import CharVocab, embed_words, make_batches, pad_sequences


def test_vocab_round_trips_text():
    vocab = CharVocab.from_texts(["21 nov 2026", "2026-11-21"])
    assert vocab.decode(vocab.encode("21 nov 2026", add_sos=True, add_eos=True)) == "21 nov 2026"


def test_vocab_reserves_special_ids_and_maps_unknown():
    vocab = CharVocab.from_texts(["ab"])
    assert vocab.itos[:4] == ["<pad>", "<s>", "</s>", "<unk>"]
    assert len(vocab) == 6
    assert vocab.encode("az") == [vocab.stoi["a"], vocab.unk_id]


def test_decode_stops_at_end_symbol():
    vocab = CharVocab.from_texts(["abc"])
    ids = vocab.encode("ab", add_eos=True) + vocab.encode("c")
    assert vocab.decode(ids) == "ab"


def test_pad_sequences_pads_right_and_reports_lengths():
    padded, lengths = pad_sequences([[5, 6, 7], [8]], pad_id=0)
    assert padded.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert lengths.tolist() == [3, 1]


def test_batches_shift_targets_by_one():
    source_vocab = CharVocab.from_texts(["1 jan 2000", "2 feb 99"])
    target_vocab = CharVocab.from_texts(["2000-01-01", "1999-02-02"])
    pairs = [("1 jan 2000", "2000-01-01"), ("2 feb 99", "1999-02-02")]
    (batch,) = make_batches(pairs, source_vocab, target_vocab, batch_size=4)
    assert batch.source.shape == (2, 10)
    assert batch.source_lengths.tolist() == [10, 8]
    assert batch.target_in.shape == batch.target_out.shape == (2, 11)
    assert batch.target_in[0, 0].item() == target_vocab.sos_id
    assert batch.target_out[0, -1].item() == target_vocab.eos_id
    assert torch.equal(batch.target_in[:, 1:], batch.target_out[:, :-1])


def test_shuffled_batches_are_deterministic_per_seed():
    vocab = CharVocab.from_texts(["abcdef"])
    pairs = [(c, c) for c in "abcdef"]
    first = make_batches(pairs, vocab, vocab, 2, shuffle=True, seed=1)
    again = make_batches(pairs, vocab, vocab, 2, shuffle=True, seed=1)
    assert [b.sources for b in first] == [b.sources for b in again]
    assert len(first) == 3


def test_bad_batch_size_is_refused():
    vocab = CharVocab.from_texts(["a"])
    with pytest.raises(ValueError, match="batch_size must be positive, got 0"):
        make_batches([("a", "a")], vocab, vocab, 0)


def test_embed_words_stacks_one_row_per_word():
    table = {"dog": torch.tensor([1.0, 0.0]), "man": torch.tensor([0.0, 2.0])}
    x = embed_words(table, ["man", "man", "dog"])
    assert x.shape == (3, 2)
    assert x.tolist() == [[0.0, 2.0], [0.0, 2.0], [1.0, 0.0]]


def test_embed_words_names_an_unknown_word():
    with pytest.raises(KeyError, match="no vector for the word 'bites' in the table"):
        embed_words({"dog": torch.zeros(2)}, ["dog", "bites"])


def test_embed_words_refuses_no_words():
    with pytest.raises(ValueError, match="no words to embed"):
        embed_words({"dog": torch.zeros(2)}, [])
