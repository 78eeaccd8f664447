"""A toy byte-pair encoding (Sennrich et al., 2016): learn merges step by step, segment words.

Words are strings of space-separated symbols, such as ``'l o w e r </w>'``, where ``</w>`` marks
the end of a word. Each step counts every adjacent pair of symbols, weighted by word frequency,
and merges the most frequent pair everywhere. When several pairs share the top count, a tie rule
picks one:

- ``"first_seen"``: the tied pair met first when scanning the words in the dictionary's order,
  each word left to right (what ``max`` over a pair dictionary built in that order returns);
- ``"lexicographic"``: the smallest tied pair, comparing symbols as strings;
- a callable ``rule(step, tied) -> pair``, such as ``follow(ARTICLE_MERGES)``.

The merge sequence of the source article (seed 002) is reproduced by ``follow(ARTICLE_MERGES)``
only: at its first step ``(e, s)``, ``(s, t)`` and ``(t, </w>)`` occur in the same words with the
same counts, so no rule stated over the words can pick the middle one. Its dictionaries change
order from one printed step to the next, the mark of a Python (before 3.7) whose dictionaries had
no order: its ties were broken by string hashes. ``follow`` checks that each of the article's
choices is one of the tied pairs, so the article's run is a legal BPE run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from attnlib._checks import check_int

Pair = tuple[str, str]
TieRule = Callable[[int, list[Pair]], Pair]
END_OF_WORD = "</w>"

ARTICLE_CORPUS = {
    "l o w e r </w>": 2,
    "n e w e s t </w>": 6,
    "w i d e s t </w>": 3,
    "l o w </w>": 5,
}
ARTICLE_MERGES: list[Pair] = [
    ("s", "t"),
    ("e", "st"),
    ("est", "</w>"),
    ("l", "o"),
    ("lo", "w"),
    ("n", "e"),
    ("w", "est</w>"),
    ("ne", "west</w>"),
    ("low", "</w>"),
    ("i", "d"),
]


@dataclass(frozen=True)
class MergeStep:
    """One step: the merged pair, its count, every pair tied at that count, the words after."""

    pair: Pair
    count: int
    tied: tuple[Pair, ...]  # in first-seen order; includes ``pair``
    words: dict[str, int]


def word_counts(
    words: Iterable[str] | Mapping[str, int], separate_end: bool = True
) -> dict[str, int]:
    """Words (or word counts) as BPE's dictionary: ``'low'`` becomes ``'l o w </w>'``.

    With ``separate_end=False`` the end mark is glued to the last letter (``'l o w</w>'``), as
    Hugging Face ``tokenizers`` does with ``end_of_word_suffix``.
    """
    if isinstance(words, str) or not isinstance(words, Iterable):
        raise TypeError(
            f"words must be a list of words (one word goes in a list too) or a mapping "
            f"word -> count, got {type(words).__name__}"
        )
    counts = _checked_counts(words) if isinstance(words, Mapping) else {}
    if not isinstance(words, Mapping):
        for index, word in enumerate(words):
            _check_word(f"words[{index}]", word)
            counts[word] = counts.get(word, 0) + 1
    glue = " " if separate_end else ""
    return {" ".join(word) + glue + END_OF_WORD: count for word, count in counts.items()}


def _check_word(name: str, word: object) -> None:
    """Require one word as a str without whitespace: 'low', not 'l o w' nor 'new york'."""
    if not isinstance(word, str):
        raise TypeError(f"{name} must be a str, got {type(word).__name__} {word!r}")
    if any(char.isspace() for char in word):
        raise ValueError(f"{name} must be one word without spaces, got {word!r}")


def _checked_counts(words: Mapping) -> dict[str, int]:
    """The mapping as a dict, each key a str and each count an int >= 1."""
    for word, count in words.items():
        if not isinstance(word, str):
            raise TypeError(f"words must have str keys, got {type(word).__name__} {word!r}")
        check_int(f"the count of {word!r}", count, 1)
    return dict(words)


def pair_counts(words: Mapping[str, int]) -> dict[Pair, int]:
    """Each adjacent pair's count, weighted by word frequency, in first-seen order."""
    counts: dict[Pair, int] = {}
    for word, frequency in words.items():
        symbols = word.split()
        for pair in zip(symbols, symbols[1:], strict=False):
            counts[pair] = counts.get(pair, 0) + frequency
    return counts


def merge_pair(pair: Pair, words: Mapping[str, int]) -> dict[str, int]:
    """The words with every occurrence of ``pair`` joined into one symbol, left to right."""
    merged = {}
    for word, frequency in words.items():
        symbols = _merge_symbols(word.split(), pair)
        key = " ".join(symbols)
        merged[key] = merged.get(key, 0) + frequency
    return merged


def _merge_symbols(symbols: list[str], pair: Pair) -> list[str]:
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(symbols[i] + symbols[i + 1])
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def _check_merges(merges: object) -> list[Pair]:
    """Require a sequence of pairs (str, str), as learned; return them as tuples."""
    if isinstance(merges, (str, Mapping)) or not isinstance(merges, Iterable):
        raise TypeError(f"merges must be a list of (str, str) pairs, got {type(merges).__name__}")
    merges = list(merges)
    for index, pair in enumerate(merges):
        if (
            not isinstance(pair, (tuple, list))
            or len(pair) != 2
            or not all(isinstance(symbol, str) for symbol in pair)
        ):
            raise ValueError(f"merges[{index}] must be a pair of symbols (str, str), got {pair!r}")
    return [tuple(pair) for pair in merges]


def follow(merges: Sequence[Pair]) -> TieRule:
    """A tie rule that replays recorded choices, checking each is one of the tied pairs."""
    merges = _check_merges(merges)

    def rule(step: int, tied: list[Pair]) -> Pair:
        if step >= len(merges):
            raise ValueError(f"step {step + 1}: only {len(merges)} recorded merges to follow")
        if tuple(merges[step]) not in tied:
            raise ValueError(f"step {step + 1}: recorded {merges[step]} is not among tied {tied}")
        return tuple(merges[step])

    return rule


TIE_RULES: dict[str, TieRule] = {
    "first_seen": lambda step, tied: tied[0],
    "lexicographic": lambda step, tied: min(tied),
}


def learn_bpe(
    words: Mapping[str, int], num_merges: int, tie_break: str | TieRule = "first_seen"
) -> list[MergeStep]:
    """Learn up to ``num_merges`` merges from words of space-separated symbols, such as
    ``{'l o w </w>': 5}`` (:func:`word_counts` makes them); stops early when no pair is left."""
    if not isinstance(words, Mapping):
        raise TypeError(
            f"words must be a mapping word -> count such as word_counts() returns, got "
            f"{type(words).__name__}"
        )
    words = _checked_counts(words)
    if check_int("num_merges", num_merges) > 0 and words and not any(" " in w for w in words):
        example = next(iter(words))
        spaced = next(iter(word_counts([example.removesuffix(END_OF_WORD)])))
        raise ValueError(
            f"no word has two symbols to merge (the first is {example!r}): the toy BPE takes "
            f"words as space-separated symbols, such as {spaced!r}; word_counts(words) writes "
            "them so"
        )
    if isinstance(tie_break, str):
        if tie_break not in TIE_RULES:
            raise ValueError(f"tie_break must be one of {sorted(TIE_RULES)} or a callable")
        tie_break = TIE_RULES[tie_break]
    steps, current = [], dict(words)
    for step in range(num_merges):
        counts = pair_counts(current)
        if not counts:
            break
        best = max(counts.values())
        tied = [pair for pair, count in counts.items() if count == best]
        pair = tie_break(step, tied)
        current = merge_pair(pair, current)
        steps.append(MergeStep(pair, best, tuple(tied), current))
    return steps


def apply_merges(word: str, merges: Sequence[Pair], separate_end: bool = True) -> list[str]:
    """Segment one new word by applying the learned merges in the order they were learned."""
    _check_word("word", word)
    merges = _check_merges(merges)
    symbols = word_counts([word], separate_end).popitem()[0].split()
    rank = {tuple(pair): index for index, pair in enumerate(merges)}
    while len(symbols) > 1:
        # the earliest-learned merge present in the word goes first, as during learning
        pairs = [
            (rank.get(pair, len(rank)), pair) for pair in zip(symbols, symbols[1:], strict=False)
        ]
        best, pair = min(pairs)
        if best == len(rank):
            break
        symbols = _merge_symbols(symbols, pair)
    return symbols
