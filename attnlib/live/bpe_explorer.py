"""Chapter 11's explorer: type any text and watch byte-pair encoding apply its merges one by one.

:func:`bpe_live` returns the HTML of the explorer: a root element holding the text, the two
vocabularies (the article's toy merges, and the real IMDB vocabulary packed compactly) and where
the controls start in ``data-*`` attributes, with a snapshot in words for a page without
JavaScript; then an inline script with ``explorers.js`` (the DOM helpers), ``bpe.js`` (the
merges, a port of :mod:`attnlib.data.bpe` and of :class:`attnlib.data.subwords.SubwordTokenizer`)
and ``bpe_explorer.js`` (the controls). ``tests/test_live_bpe.py`` checks ``bpe.js`` step by
step against :func:`attnlib.reference.bpe_steps` and its tokens against attnlib's. It needs no
kernel, so it works in the published book.
"""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from IPython.display import HTML

from attnlib import reference
from attnlib.data.bpe import ARTICLE_MERGES, END_OF_WORD, Pair
from attnlib.data.subwords import SPECIAL_TOKENS, SubwordTokenizer
from attnlib.live import FALLBACK, _json, bundle, snippet

BPE_SCRIPTS = ("explorers.js", "bpe.js", "bpe_explorer.js")
VOCABULARIES = ("toy", "real")
EXAMPLE = "the lowest and the newest"
# Longer starting texts belong in the text box, not in the page: the snapshot lists them.
MAX_TEXT = 2000
SPECIAL_SPLIT = re.compile("(" + "|".join(map(re.escape, SPECIAL_TOKENS)) + ")")


@cache
def shipped_tokenizer() -> SubwordTokenizer:
    """The IMDB tokenizer that ships with chapter 13's model (the chapter's recipe makes it)."""
    from attnlib.tasks.imdb_train import SHIPPED_MODEL

    return SubwordTokenizer.load(Path(SHIPPED_MODEL) / "tokenizer.json")


def alphabet(tokenizer: SubwordTokenizer) -> list[str]:
    """The characters a word may start from: the vocabulary's one-character tokens, in id order."""
    vocab = tokenizer.tokenizer.get_vocab()
    singles = [token for token in vocab if len(token) == 1]
    return sorted(singles, key=vocab.__getitem__)


def compact_vocabulary(tokenizer: SubwordTokenizer) -> dict:
    """The vocabulary as bpe.js reads it: {alphabet, width, count, merges}, each merge two token
    ids of ``width`` bits packed into base64. Refuses a vocabulary not laid out as
    ``SubwordTokenizer.train`` lays it out (specials, characters with ``</w>``, characters,
    then one token per merge), since bpe.js rebuilds it from that layout."""
    chars = alphabet(tokenizer)
    merges = tokenizer.merges
    tokens = [*SPECIAL_TOKENS, *(c + END_OF_WORD for c in chars), *chars]
    tokens += [left + right for left, right in merges]
    vocab = tokenizer.tokenizer.get_vocab()
    if vocab != {token: index for index, token in enumerate(tokens)}:
        raise ValueError(
            "this tokenizer's vocabulary is not laid out as SubwordTokenizer.train lays it out "
            "(special tokens, each character with </w>, each character, then one token per "
            "merge): the explorer cannot ship it compactly"
        )
    ids = {token: index for index, token in enumerate(tokens)}
    width = max(1, (len(tokens) - 1).bit_length())
    bits = "".join(f"{ids[side]:0{width}b}" for pair in merges for side in pair)
    bits += "0" * (-len(bits) % 24)  # whole base64 quanta, so no '=' padding
    packed = int(bits, 2).to_bytes(len(bits) // 8, "big") if bits else b""
    return {
        "alphabet": "".join(chars),
        "width": width,
        "count": len(merges),
        "merges": base64.b64encode(packed).decode("ascii"),
    }


def real_words(tokenizer: SubwordTokenizer, text: str) -> list[list[str]]:
    """``text`` as the real vocabulary's starting symbols, one list per pre-token: the special
    tokens typed as text alone, then the tokenizer's own normaliser and pre-tokeniser, each
    pre-token's characters with ``</w>`` glued to the last, unknown characters as ``[UNK]``."""
    known = set(alphabet(tokenizer))
    normalizer = tokenizer.tokenizer.normalizer
    pre_tokenizer = tokenizer.tokenizer.pre_tokenizer
    words = []
    for index, part in enumerate(SPECIAL_SPLIT.split(text)):
        if index % 2:
            words.append([part])
            continue
        for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(part)):
            chars = list(word)
            words.append(
                [
                    (c + END_OF_WORD if i == len(chars) - 1 else c) if c in known else "[UNK]"
                    for i, c in enumerate(chars)
                ]
            )
    return words


def _check_merges(merges: object) -> list[Pair]:
    """A list of (str, str) pairs of non-empty symbols without whitespace."""
    if isinstance(merges, (str, bytes, dict)) or not isinstance(merges, Sequence):
        raise TypeError(
            f"toy_merges must be a list of (str, str) pairs, got {type(merges).__name__}"
        )
    checked = []
    for index, pair in enumerate(merges):
        if (
            not isinstance(pair, (tuple, list))
            or len(pair) != 2
            or not all(isinstance(s, str) and s and not any(c.isspace() for c in s) for s in pair)
        ):
            raise ValueError(
                f"toy_merges[{index}] must be a pair of non-empty symbols without spaces, "
                f"got {pair!r}"
            )
        checked.append((pair[0], pair[1]))
    return checked


def _chip(token: str, fresh: bool) -> str:
    """One token as a chip: its text, a faint end-of-word mark, a gap after a word's end."""
    text = token[: -len(END_OF_WORD)] if token.endswith(END_OF_WORD) else token
    mark = '<span class="al-eow">&lt;/w&gt;</span>' if token.endswith(END_OF_WORD) else ""
    classes = "al-token al-fresh" if fresh else "al-token"
    return f'<code class="{classes}" title="{html.escape(token)}">{html.escape(text)}{mark}</code>'


def snapshot(text: str, vocabulary: str, steps: list[reference.BpeStep], step: int, words) -> str:
    """What the explorer shows as it opens, in words: the page's text without JavaScript."""
    shown = steps[step - 1].words if step else words
    tokens = [token for word in shown for token in word]
    name = (
        f"the article's {len(ARTICLE_MERGES)} toy merges"
        if vocabulary == "toy"
        else "the real IMDB vocabulary"
    )
    if step:
        merge = steps[step - 1]
        latest = (
            f" The merge of this step is {html.escape(' + '.join(merge.pair))} (merge "
            f"{merge.rank + 1} of the learned list), applied in {merge.places} "
            f"place{'s' if merge.places != 1 else ''}."
        )
    else:
        latest = ""
    chips = " ".join("".join(_chip(token, False) for token in word) for word in shown)
    return (
        "<p>With JavaScript you can type any text and watch byte-pair encoding apply its "
        "merges one by one, with the toy merges of the article or the real IMDB vocabulary. "
        f"As it opens: the text \u201c{html.escape(text)}\u201d ({len(text)} characters) under "
        f"{name}, after step {step} of {len(steps)}: {len(tokens)} tokens.{latest}</p>"
        f"<p>{chips}</p>"
    )


def bpe_live(
    text: str = EXAMPLE,
    vocabulary: str = "toy",
    step: int | None = None,
    toy_merges: Sequence[Pair] = ARTICLE_MERGES,
    tokenizer: SubwordTokenizer | None = None,
) -> HTML:
    """Chapter 11's explorer, starting at ``text`` (at most 2,000 characters; the reader can
    type longer ones) under ``vocabulary`` (``"toy"``: ``toy_merges``, by default the article's;
    ``"real"``: ``tokenizer``, by default the IMDB tokenizer shipped with chapter 13), after
    ``step`` merges (default: all of them)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if len(text) > MAX_TEXT:
        raise ValueError(
            f"text has {len(text):,} characters; the explorer starts from at most {MAX_TEXT:,} "
            "(paste longer text into its box)"
        )
    if vocabulary not in VOCABULARIES:
        raise ValueError(f"vocabulary must be one of {VOCABULARIES}, got {vocabulary!r}")
    merges = _check_merges(toy_merges)
    real = shipped_tokenizer() if tokenizer is None else tokenizer
    if not isinstance(real, SubwordTokenizer):
        raise TypeError(f"tokenizer must be a SubwordTokenizer, got {type(real).__name__}")
    compact = compact_vocabulary(real)
    if vocabulary == "toy":
        words = reference.bpe_words(text)
        steps = reference.bpe_steps(words, merges)
    else:
        words = real_words(real, text)
        steps = reference.bpe_steps(words, real.merges)
    if step is None:
        step = len(steps)
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= len(steps):
        raise ValueError(
            f"step must be an int from 0 to {len(steps)} (the merges this text takes under the "
            f"{vocabulary} vocabulary), got {step!r}"
        )
    attributes = {
        "text": text,
        "vocabulary": vocabulary,
        "step": str(step),
        "toy": _json([list(pair) for pair in merges]),
        "real": json.dumps(compact, separators=(",", ":")),
    }
    fallback = f"<p>{FALLBACK}</p>" + snapshot(text, vocabulary, steps, step, words)
    return HTML(snippet("bpe", attributes, fallback, script=bundle(BPE_SCRIPTS)))
