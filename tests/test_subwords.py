"""The Hugging Face BPE tokenizer: special ids, normalisation, round trips, the cache, the toy."""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer, models

from attnlib.data import subwords
from attnlib.data.bpe import learn_bpe, word_counts
from attnlib.data.imdb import IMDB, Reviews, load_imdb
from attnlib.data.subwords import SubwordTokenizer, imdb_tokenizer
from attnlib.tasks.imdb_train import SHIPPED_MODEL

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
        "imdb-bpe2-150-0123456789abcdef.json"
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


# --- bad input ------------------------------------------------------------------------------

SMALL_TEXTS = ["the cat sat", "a dog ran"]  # 11 characters: the vocabulary needs 5 + 2 x 11


@pytest.mark.parametrize("vocab_size", [2, 10, 26])
def test_train_refuses_a_vocab_size_below_the_specials_and_alphabet(vocab_size):
    # Before: vocab_size=2 or 10 silently gave a larger vocabulary.
    message = (
        f"vocab_size={vocab_size} is smaller than the 27 tokens these texts need: 5 special "
        "tokens and 11 characters, each alone and word-final; ask for at least 27"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        SubwordTokenizer.train(SMALL_TEXTS, vocab_size=vocab_size, min_frequency=1)


def test_train_at_the_smallest_vocab_size_learns_no_merges():
    small = SubwordTokenizer.train(SMALL_TEXTS, vocab_size=27, min_frequency=1)
    assert small.vocab_size == 27 and small.merges == []


def test_train_refuses_no_texts():
    with pytest.raises(ValueError, match="train needs at least one text, got none"):
        SubwordTokenizer.train([])  # before: a vocabulary of the 5 special tokens


def test_train_refuses_one_str():
    with pytest.raises(TypeError, match=re.escape("train takes a list of texts, got one str")):
        SubwordTokenizer.train("a str")  # before: trained on its characters


def test_train_refuses_texts_that_are_not_strings():
    with pytest.raises(TypeError, match=re.escape("texts[1] must be a str, got bytes")):
        SubwordTokenizer.train(["a text", b"bytes"])


def test_train_refuses_an_alphabet_left_empty_by_min_char_texts():
    message = (
        "no character occurs in at least min_char_texts=1000 of the 2 texts: the alphabet "
        "would be empty and every character [UNK]"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        SubwordTokenizer.train(SMALL_TEXTS, min_char_texts=1000)


def test_train_refuses_a_float_vocab_size():
    with pytest.raises(TypeError, match="vocab_size must be an int, got float 1000.0"):
        SubwordTokenizer.train(SMALL_TEXTS, vocab_size=1000.0)


def test_train_takes_a_numpy_vocab_size():
    small = SubwordTokenizer.train(SMALL_TEXTS, vocab_size=np.int64(30), min_frequency=1)
    assert small.vocab_size == 30


def test_encode_batch_refuses_one_str(tokenizer):
    message = "encode_batch takes a list of texts, got one str"
    with pytest.raises(TypeError, match=re.escape(message)):
        tokenizer.encode_batch("good film")  # before: encoded character by character


def test_encode_refuses_a_text_that_is_not_a_str(tokenizer):
    with pytest.raises(TypeError, match="text must be a str, got list"):
        tokenizer.encode(["good film"])


def test_decode_refuses_an_id_outside_the_vocabulary(tokenizer):
    message = "id 99999 (ids[1]) is outside the vocabulary: ids run from 0 to 132 (vocab_size 133)"
    with pytest.raises(ValueError, match=re.escape(message)):
        tokenizer.decode([5, 99999])  # before: ''


def test_decode_refuses_a_negative_id(tokenizer):
    with pytest.raises(ValueError, match=re.escape("id -1 (ids[0]) is outside the vocabulary")):
        tokenizer.decode([-1])


def test_decode_refuses_a_float_id(tokenizer):
    with pytest.raises(TypeError, match=re.escape("ids[0] must be an int, got float")):
        tokenizer.decode([5.0])


def test_decode_takes_tensors_and_arrays_of_ids(tokenizer):
    ids = tokenizer.encode("the movie")
    assert tokenizer.decode(np.array(ids)) == tokenizer.decode(ids) == "the movie"


def test_id_to_token_refuses_an_id_outside_the_vocabulary(tokenizer):
    message = "index -1 is outside the vocabulary: ids run from 0 to 132 (vocab_size 133)"
    with pytest.raises(ValueError, match=re.escape(message)):
        tokenizer.id_to_token(-1)  # before: an OverflowError inside tokenizers
    with pytest.raises(ValueError, match="index 133 is outside the vocabulary"):
        tokenizer.id_to_token(133)


def test_id_to_token_takes_numpy_integers(tokenizer):
    assert tokenizer.id_to_token(np.int64(2)) == "[CLS]"


def test_load_names_a_missing_file(tmp_path):
    path = tmp_path / "missing.json"
    with pytest.raises(FileNotFoundError, match=f"no tokenizer file at {re.escape(str(path))}"):
        SubwordTokenizer.load(path)


@pytest.mark.parametrize("kind", ["not JSON", "truncated"])
def test_load_names_a_file_it_cannot_read(tmp_path, tokenizer, kind):
    path = tmp_path / "tokenizer.json"
    tokenizer.save(path)
    whole = path.read_text()
    path.write_text("{not json" if kind == "not JSON" else whole[: len(whole) // 2])
    message = f"cannot read the tokenizer file {re.escape(str(path))}: "
    with pytest.raises(ValueError, match=message):
        SubwordTokenizer.load(path)  # before: a bare Exception without the path


def test_unlabelled_reviews_that_repeat_a_test_review_are_left_out(tmp_path):
    data = small_imdb()
    leaked = Reviews(
        [*data.unlabelled.texts, "zyzzyva zyzzyva zyzzyva"],
        np.full(11, -1, np.int8),
        np.zeros(11, np.int8),
        [f"u/{i}_0" for i in range(11)],
    )
    data = IMDB(data.train, data.test, leaked, digest=data.digest)
    assert data.unlabelled_outside_test() == list(range(10))
    tokenizer = imdb_tokenizer(data, vocab_size=150, cache_dir=tmp_path)
    assert tokenizer.token_to_id("zyzzyva</w>") is None


@pytest.mark.skipif(not REAL or not Path(REAL).exists(), reason="ATTNLIB_DATA is not set")
def test_the_shipped_tokenizer_is_what_the_recipe_trains(tmp_path):
    fresh = imdb_tokenizer(load_imdb(REAL, progress=False), cache_dir=tmp_path)
    shipped = SubwordTokenizer.load(SHIPPED_MODEL / "tokenizer.json")
    assert fresh.merges == shipped.merges
