"""The Hugging Face BPE tokenizer: special ids, normalisation, round trips, the cache, the toy."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer, models

from attnlib.data import subwords
from attnlib.data.bpe import learn_bpe, word_counts
from attnlib.data.imdb import IMDB, Reviews, load_imdb
from attnlib.data.subwords import SubwordTokenizer, imdb_tokenizer

# A corpus on which no two pairs ever tie for the top count in its first 14 merges.
TIE_FREE = {
    "low": 13,
    "lower": 22,
    "lowest": 11,
    "newer": 12,
    "newest": 15,
    "wider": 1,
    "widest": 1,
    "slow": 18,
    "slower": 29,
    "new": 30,
    "wide": 6,
}
TEXTS = [
    "This movie was GREAT!! I loved it.<br /><br />The acting, the music: all great.",
    "A terrible film; I hated every minute of it. Don't watch it.",
    "The café scene was lovely, the ending was not.",
] * 20


@pytest.fixture(scope="module")
def tokenizer() -> SubwordTokenizer:
    return SubwordTokenizer.train(TEXTS, vocab_size=1000, min_frequency=2)


def test_special_tokens_have_fixed_ids(tokenizer):
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id) == (0, 1, 2)
    assert (tokenizer.sep_id, tokenizer.mask_id) == (3, 4)
    tokens = [tokenizer.id_to_token(i) for i in range(5)]
    assert tokens == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert tokenizer.vocab_size == 133  # every word became one token


def test_encode_adds_no_special_tokens_and_marks_word_ends(tokenizer):
    assert tokenizer.tokens("the movie") == ["the</w>", "movie</w>"]
    assert not {0, 2, 3, 4} & set(tokenizer.encode(TEXTS[0]))


def test_normaliser_lowercases_strips_accents_and_line_breaks(tokenizer):
    assert tokenizer.encode("The CAFÉ<br />scene") == tokenizer.encode("the cafe scene")
    assert tokenizer.tokens("Don't!!") == ["don</w>", "'</w>", "t</w>", "!!</w>"]


def test_unseen_character_is_unknown(tokenizer):
    ids = tokenizer.encode("great \u2603")
    assert ids[-1] == tokenizer.unk_id and tokenizer.tokens("great")[0] == "great</w>"


def test_round_trip(tokenizer):
    text = "I loved the movie, the acting was great."
    assert tokenizer.decode(tokenizer.encode(text)) == "i loved the movie , the acting was great ."
    words = "the ending was terrible"
    assert tokenizer.decode([tokenizer.cls_id, *tokenizer.encode(words), tokenizer.pad_id]) == words


def test_training_is_repeatable(tokenizer):
    again = SubwordTokenizer.train(TEXTS, vocab_size=1000, min_frequency=2)
    assert again.tokenizer.to_str() == tokenizer.tokenizer.to_str()


def test_characters_in_too_few_texts_are_left_out():
    texts = ["a fine film", "a fine fish", "a fjord in fog"]
    tokenizer = SubwordTokenizer.train(texts, vocab_size=100, min_frequency=1, min_char_texts=2)
    assert tokenizer.token_to_id("j") is None and tokenizer.token_to_id("h</w>") is None
    assert tokenizer.tokens("fjord") == ["f", "[UNK]", "[UNK]", "[UNK]", "[UNK]"]
    assert tokenizer.tokens("fine") == ["fine</w>"]
    assert subwords.MIN_CHAR_TEXTS == 20


def test_encode_batch_equals_encode(tokenizer):
    assert tokenizer.encode_batch(TEXTS[:3]) == [tokenizer.encode(text) for text in TEXTS[:3]]


def test_save_and_load(tokenizer, tmp_path):
    tokenizer.save(tmp_path / "tokenizer.json")
    loaded = SubwordTokenizer.load(tmp_path / "tokenizer.json")
    assert loaded.vocab_size == 133 and loaded.merges == tokenizer.merges
    assert loaded.encode(TEXTS[1]) == tokenizer.encode(TEXTS[1])
    assert [path.name for path in tmp_path.iterdir()] == ["tokenizer.json"]


def test_a_tokenizer_without_the_special_ids_is_refused():
    bare = Tokenizer(models.BPE(unk_token="[UNK]"))
    with pytest.raises(ValueError, match=r"special token \[PAD\] has id None, expected 0"):
        SubwordTokenizer(bare)


def test_toy_bpe_and_tokenizers_learn_the_same_merges_without_ties():
    steps = learn_bpe(word_counts(TIE_FREE, separate_end=False), 14)
    assert all(len(step.tied) == 1 for step in steps)
    text = " ".join(word for word, count in TIE_FREE.items() for _ in range(count))
    real = SubwordTokenizer.train([text], vocab_size=1000, min_frequency=1)
    assert real.merges[:14] == [step.pair for step in steps]
    assert real.merges[:3] == [("l", "o"), ("w", "e"), ("we", "r</w>")]


def small_imdb() -> IMDB:
    """A tiny dataset whose test reviews hold a word found nowhere else."""

    def reviews(texts: list[str], label: int) -> Reviews:
        n = len(texts)
        ids = [f"x/{i}_0" for i in range(n)]
        return Reviews(texts, np.full(n, label, np.int8), np.zeros(n, np.int8), ids)

    return IMDB(
        train=reviews(TEXTS, 1),
        test=reviews(["zyzzyva zyzzyva zyzzyva"] * 50, 0),
        unlabelled=reviews(["an unlabelled review about a movie"] * 10, -1),
        digest="0123456789abcdef" * 4,
    )


def test_imdb_tokenizer_never_sees_the_test_reviews(tmp_path):
    tokenizer = imdb_tokenizer(small_imdb(), vocab_size=150, cache_dir=tmp_path)
    assert tokenizer.token_to_id("unlabelled</w>") is not None
    assert tokenizer.token_to_id("zyzzyva</w>") is None
    assert tokenizer.tokens("zyzzyva")[0] != "zyzzyva</w>"


def test_imdb_tokenizer_is_cached_by_vocab_size_and_content(tmp_path, monkeypatch):
    first = imdb_tokenizer(small_imdb(), vocab_size=150, cache_dir=tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "imdb-bpe1-150-0123456789abcdef.json"
    ]
    monkeypatch.setattr(SubwordTokenizer, "train", lambda *a, **k: pytest.fail("trained again"))
    again = imdb_tokenizer(small_imdb(), vocab_size=150, cache_dir=tmp_path)
    assert again.merges == first.merges
    monkeypatch.undo()
    other = imdb_tokenizer(small_imdb(), vocab_size=140, cache_dir=tmp_path)
    assert other.vocab_size == 140 and len(list(tmp_path.iterdir())) == 2


def test_corrupt_tokenizer_cache_is_retrained_with_a_warning(tmp_path):
    first = imdb_tokenizer(small_imdb(), vocab_size=150, cache_dir=tmp_path)
    (path,) = tmp_path.iterdir()
    path.write_text("{not json")
    with pytest.warns(UserWarning, match="ignoring the tokenizer cache .* and retraining"):
        again = imdb_tokenizer(small_imdb(), vocab_size=150, cache_dir=tmp_path)
    assert again.merges == first.merges
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        imdb_tokenizer(small_imdb(), vocab_size=150, cache_dir=tmp_path)


REAL = os.environ.get("ATTNLIB_DATA", "")


@pytest.mark.skipif(not REAL or not Path(REAL).exists(), reason="ATTNLIB_DATA is not set")
def test_real_tokenizer_at_a_small_vocabulary(tmp_path):
    data = load_imdb(REAL, progress=False)
    n = 2000  # a slice keeps the test fast; the pipeline is the one of the full vocabulary

    def head(reviews: Reviews) -> Reviews:
        return Reviews(reviews.texts[:n], reviews.labels[:n], reviews.ratings[:n], reviews.ids[:n])

    subset = IMDB(head(data.train), data.test, head(data.unlabelled), digest=data.digest)
    tokenizer = imdb_tokenizer(subset, vocab_size=1000, cache_dir=tmp_path)
    assert tokenizer.vocab_size == 1000 and tokenizer.pad_id == 0
    assert tokenizer.tokens("This movie was great.") == [
        "this</w>",
        "movie</w>",
        "was</w>",
        "great</w>",
        ".</w>",
    ]
    ids = tokenizer.encode_batch(data.test.texts[:500])
    unknown = sum(row.count(tokenizer.unk_id) for row in ids) / sum(map(len, ids))
    assert unknown < 0.001
