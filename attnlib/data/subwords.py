"""A real subword tokenizer: byte-pair encoding trained with Hugging Face ``tokenizers``.

The pipeline has four standard steps, so that it can be rewritten in a few lines of JavaScript:

1. normalise: ``<br />`` tags become spaces (so raw IMDB reviews need no cleaning first), then
   NFD, accents stripped (combining marks, Unicode category Mn), lowercase;
2. pre-tokenise: split into runs of word characters and runs of other non-space characters
   (the regex ``\\w+|[^\\w\\s]+``), so ``"don't!!"`` gives ``don``, ``'``, ``t``, ``!!``;
3. BPE: each pre-token starts as characters, the last one carrying the end-of-word mark
   ``</w>`` (the toy of ``attnlib.data.bpe`` with ``separate_end=False``), and the merges are
   applied in the order they were learned; a character never seen in training is ``[UNK]``;
4. decode: tokens are joined and each ``</w>`` becomes a space.

Special tokens have fixed ids: ``[PAD]`` 0, ``[UNK]`` 1, ``[CLS]`` 2, ``[SEP]`` 3, ``[MASK]`` 4.
``encode`` adds none of them: the caller adds ``[CLS]`` where its model wants one.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from attnlib._checks import check_count, is_int
from attnlib.data.bpe import END_OF_WORD, Pair
from attnlib.data.imdb import BR_TAG, IMDB, cache_directory

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
PIPELINE_VERSION = 2  # part of the cache key: bump it when the pipeline changes (2: no test text)


def _alphabet(texts: list[str], normalizer: normalizers.Normalizer, min_texts: int) -> list[str]:
    """The normalised characters found in at least ``min_texts`` texts, sorted; no spaces."""
    found: Counter[str] = Counter()
    for text in texts:
        found.update(set(text))
    chars: Counter[str] = Counter()
    for char, count in found.items():
        for normalised in normalizer.normalize_str(char):
            chars[normalised] += count
    return sorted(
        char for char, count in chars.items() if count >= min_texts and not char.isspace()
    )


def _pipeline(model: models.Model) -> Tokenizer:
    """A tokenizer with this module's normaliser, pre-tokeniser and decoder around ``model``."""
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.Sequence(
        [
            normalizers.Replace(Regex(BR_TAG.pattern), " "),
            normalizers.NFD(),
            normalizers.StripAccents(),
            normalizers.Lowercase(),
        ]
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.decoder = decoders.BPEDecoder(suffix=END_OF_WORD)
    return tokenizer


class SubwordTokenizer:
    """A trained BPE tokenizer: text to subword ids and back."""

    def __init__(self, tokenizer: Tokenizer):
        for expected, token in enumerate(SPECIAL_TOKENS):
            found = tokenizer.token_to_id(token)
            if found != expected:
                raise ValueError(f"special token {token} has id {found}, expected {expected}")
        self.tokenizer = tokenizer
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = range(5)

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int = 8192,
        min_frequency: int = 2,
        min_char_texts: int = 1,
    ) -> SubwordTokenizer:
        """Learn merges from ``texts`` until the vocabulary holds ``vocab_size`` tokens.

        A merge needs ``min_frequency`` occurrences; a character enters the alphabet if it
        occurs in at least ``min_char_texts`` texts (rarer ones become ``[UNK]``). The
        vocabulary holds at least the special tokens and each character twice (alone and
        word-final): a smaller ``vocab_size`` is refused, naming that minimum.
        """
        texts = _checked_texts(texts)
        check_count("vocab_size", vocab_size)
        check_count("min_frequency", min_frequency)
        check_count("min_char_texts", min_char_texts)
        tokenizer = _pipeline(models.BPE(unk_token="[UNK]", end_of_word_suffix=END_OF_WORD))
        alphabet = _alphabet(texts, tokenizer.normalizer, min_char_texts)
        if not alphabet:
            raise ValueError(
                f"no character occurs in at least min_char_texts={min_char_texts} of the "
                f"{len(texts)} texts: the alphabet would be empty and every character [UNK]"
            )
        least = len(SPECIAL_TOKENS) + 2 * len(alphabet)
        if vocab_size < least:
            raise ValueError(
                f"vocab_size={vocab_size} is smaller than the {least} tokens these texts need: "
                f"{len(SPECIAL_TOKENS)} special tokens and {len(alphabet)} characters, each alone "
                f"and word-final; ask for at least {least}"
            )
        # tokenizers breaks ties between equally frequent pairs by token id, and gives the
        # "x</w>" tokens their ids in hash-map order, different in every process: listing them
        # up front as (temporary) special tokens makes every id, and so every merge, repeatable.
        ends = [char + END_OF_WORD for char in alphabet]
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=[*SPECIAL_TOKENS, *ends],
            initial_alphabet=alphabet,
            limit_alphabet=len(alphabet),  # exactly the alphabet above, whatever the counts
            end_of_word_suffix=END_OF_WORD,
            show_progress=False,
        )
        tokenizer.train_from_iterator(texts, trainer=trainer, length=len(texts))
        spec = json.loads(tokenizer.to_str())
        spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] in SPECIAL_TOKENS]
        return cls(Tokenizer.from_str(json.dumps(spec)))

    @classmethod
    def load(cls, path: str | os.PathLike) -> SubwordTokenizer:
        """A tokenizer saved by ``save`` (the ``tokenizers`` JSON format)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no tokenizer file at {path}")
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as error:  # tokenizers raises plain Exceptions, without the path
            raise ValueError(f"cannot read the tokenizer file {path}: {error}") from None
        return cls(tokenizer)

    def save(self, path: str | os.PathLike) -> None:
        """Write the tokenizer as ``tokenizers`` JSON, atomically."""
        path = Path(path)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        os.close(handle)
        try:
            self.tokenizer.save(temporary)
            os.chmod(temporary, 0o644)  # mkstemp makes it private
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    @property
    def vocab_size(self) -> int:
        """Number of tokens, special tokens included."""
        return self.tokenizer.get_vocab_size()

    @property
    def merges(self) -> list[Pair]:
        """The learned merges, in the order they were learned (most frequent first)."""
        model = json.loads(self.tokenizer.to_str())["model"]
        return [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]

    def encode(self, text: str) -> list[int]:
        """Token ids of one text, without special tokens."""
        _check_text("text", text)
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of many texts, encoded in parallel threads."""
        encodings = self.tokenizer.encode_batch_fast(
            _checked_texts(texts, "encode_batch"), add_special_tokens=False
        )
        return [encoding.ids for encoding in encodings]

    def tokens(self, text: str) -> list[str]:
        """The subword strings of one text."""
        _check_text("text", text)
        return self.tokenizer.encode(text, add_special_tokens=False).tokens

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, special tokens left out; punctuation comes back space-separated."""
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
            raise TypeError(f"ids must be a sequence of token ids, got {type(ids).__name__}")
        ids = ids.tolist() if hasattr(ids, "tolist") else list(ids)  # tensors and arrays too
        size = self.vocab_size
        for position, index in enumerate(ids):
            if not is_int(index):
                raise TypeError(f"ids[{position}] must be an int, got {type(index).__name__}")
            if not 0 <= index < size:
                raise ValueError(
                    f"id {index} (ids[{position}]) is outside the vocabulary: ids run from 0 to "
                    f"{size - 1} (vocab_size {size})"
                )
        return self.tokenizer.decode([int(index) for index in ids], skip_special_tokens=True)

    def id_to_token(self, index: int) -> str:
        """The token string of one id, 0 <= index < vocab_size."""
        if not is_int(index):
            raise TypeError(f"index must be an int, got {type(index).__name__} {index!r}")
        if not 0 <= index < self.vocab_size:
            raise ValueError(
                f"index {index} is outside the vocabulary: ids run from 0 to "
                f"{self.vocab_size - 1} (vocab_size {self.vocab_size})"
            )
        return self.tokenizer.id_to_token(int(index))

    def token_to_id(self, token: str) -> int | None:
        """The id of one token string, or None."""
        return self.tokenizer.token_to_id(token)

    def __repr__(self) -> str:
        return f"SubwordTokenizer(vocab_size={self.vocab_size}, merges={len(self.merges)})"


def _check_text(name: str, text: object) -> None:
    """Require one text as a str of characters that UTF-8 can encode (no lone surrogate)."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    if text.isascii():
        return  # the common case, without a copy
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(
            f"{name} holds a lone surrogate {text[error.start]!r} at index {error.start}: "
            "half of a UTF-16 pair, not a character, which the tokenizer cannot read; it comes "
            "from decoding bytes with errors='surrogateescape' or from a broken pair, so "
            "decode with errors='replace' or drop it"
        ) from None


def _checked_texts(texts: object, caller: str = "train") -> list[str]:
    """Texts as a list of str; one str is refused (it would be read character by character)."""
    if isinstance(texts, str):
        raise TypeError(
            f"{caller} takes a list of texts, got one str (it would be read character by "
            "character): wrap it as [text]"
        )
    if not isinstance(texts, Iterable):
        raise TypeError(f"texts must be an iterable of str, got {type(texts).__name__}")
    texts = list(texts)
    if not texts and caller == "train":
        raise ValueError("train needs at least one text, got none")
    for index, text in enumerate(texts):
        _check_text(f"texts[{index}]", text)
    return texts


def imdb_tokenizer(
    data: IMDB, vocab_size: int = 8192, cache_dir: str | os.PathLike | None = None
) -> SubwordTokenizer:
    """The IMDB tokenizer, trained on train + unlabelled reviews only, cached beside the data.

    Unlabelled reviews that repeat a test review word for word are left out
    (:meth:`IMDB.unlabelled_outside_test`), so the vocabulary owes nothing to the test split.
    """
    name = f"imdb-bpe{PIPELINE_VERSION}-{vocab_size}-{data.digest[:16]}.json"
    path = cache_directory(cache_dir) / name
    if path.exists():
        try:
            return SubwordTokenizer.load(path)
        except Exception as error:  # tokenizers raises plain Exceptions for bad JSON
            warnings.warn(
                f"ignoring the tokenizer cache {path} and retraining: {error}", stacklevel=2
            )
    # Never the test reviews: the test split must stay unseen, its vocabulary included.
    texts = data.train.texts + [data.unlabelled.texts[i] for i in data.unlabelled_outside_test()]
    tokenizer = SubwordTokenizer.train(texts, vocab_size=vocab_size, min_char_texts=MIN_CHAR_TEXTS)
    tokenizer.save(path)
    return tokenizer


# Characters found in fewer reviews (hundreds of them, mostly in one review each) would take
# vocabulary slots from useful merges; they become [UNK].
MIN_CHAR_TEXTS = 20
