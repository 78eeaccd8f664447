"""Chapter 11's explorer: bpe.js applies the merges as attnlib does, step by step.

attnlib/live/bpe.js runs in node (one process for every case) on the chapter's examples, random
strings from the toy alphabet, the reviews of ``tests.helpers.CORPUS``, non-ASCII text, empty
text and long words, under the toy merges and the real IMDB vocabulary. Its starting symbols,
every step (the merge's rank, its pair, the places it joined, the tokens after it) and its final
tokens must equal :func:`attnlib.reference.bpe_steps`, whose final tokens must in turn equal
:func:`attnlib.data.bpe.apply_merges` (toy) and ``SubwordTokenizer.tokens`` (real).
"""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path

import pytest
from tokenizers import Tokenizer

import attnlib.live
from attnlib import reference
from attnlib.data.bpe import ARTICLE_MERGES, apply_merges
from attnlib.data.subwords import SubwordTokenizer
from attnlib.live.bpe_explorer import (
    BPE_SCRIPTS,
    EXAMPLE,
    MAX_TEXT,
    bpe_live,
    compact_vocabulary,
    real_words,
    shipped_tokenizer,
)
from tests.helpers import (
    CORPUS,
    TOKENIZER_TEXTS,
    case_harness,
    data_attribute,
    fallback_snapshot,
    node_answers,
)

BPE_JS = Path(attnlib.live.__file__).with_name("bpe.js")

# stdin: {toy: merges, real: the packed vocabulary, cases: [{kind, ...}]}; stdout: one answer
# per case, {value} or {error}.
HARNESS = case_harness(
    """
const bpe = require(process.argv[1]);
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const cases = input.cases;
const vocabularies = { toy: bpe.toyVocabulary(input.toy), real: bpe.realVocabulary(input.real) };
const run = {
  steps: (c) => {
    const v = vocabularies[c.vocabulary];
    const result = bpe.mergeSteps(c.text, v);
    const n = result.steps.length;
    const at = c.full ? [...Array(n + 1).keys()] : [0, n];
    return {
      words: bpe.words(c.text, v),
      steps: result.steps.map((s) => [s.rank, s.pair, s.places]),
      tokens: at.map((k) => bpe.tokensAt(result, k).tokens),
      last: bpe.tokensAt(result, n).last,
      fresh: n ? bpe.tokensAt(result, n).fresh : [],
    };
  },
  encode: (c) => bpe.encode(c.text, vocabularies[c.vocabulary]),
  capped: (c) => {
    const result = bpe.mergeSteps(c.text, vocabularies[c.vocabulary]);
    const shown = bpe.tokensAt(result, c.step, c.limit);
    return { tokens: shown.tokens, total: shown.total };
  },
  sliced: (c) => {
    const job = bpe.mergeJob(c.text, vocabularies[c.vocabulary]);
    let slices = 1;
    while (!job.run(0)) slices += 1;
    return { slices, tokens: bpe.tokensAt(job.result, job.result.steps.length).tokens };
  },
  merges: (c) => ({ merges: vocabularies[c.vocabulary].merges,
                    size: vocabularies[c.vocabulary].size }),
  display: (c) => c.tokens.map(bpe.display),
  at: (c) => bpe.tokensAt(bpe.mergeSteps(c.text, vocabularies.toy), c.step),
  text: (c) => bpe.mergeSteps(c.text, vocabularies.toy),
  toy: (c) => bpe.toyVocabulary(c.merges).size,
  real: (c) => bpe.realVocabulary(c.compact).size,
};
"""
)

# --- the texts ---------------------------------------------------------------------------------

CHAPTER = [
    EXAMPLE,
    "lower newest widest low",
    "lowest newer wider slowest low renew zest",
    "love loved loving lovingly unlovable lovecraftian",
    "ponyo prot chupacabra rockne sosuke prue",
    "Loved it!!<br /><br />The CAFÉ scene... wasn't bad.",
]
# Every step of the real pipeline: <br />, accents and other marks, special tokens typed as
# text, punctuation runs, digits, scripts the vocabulary never saw, Python's and Unicode's
# whitespace (\x1c splits the toy's words, not the real ones; \x85 the reverse is not true).
UNICODE = [
    *TOKENIZER_TEXTS,
    "a<br\x85/>b a<br\ufeff/>b ka\u093e x\u20dd y\u0301 a\x1cb c\x85d e\ufeffg h\u200bi",
    "x_y a\u200dz 3²½ lo\u0301west ne\u0308wer",
    "a",
    "!",
    "   ",
    "",
    # every character Python's str.split() splits on, and U+FEFF, which it does not
    "lo".join(c for c in map(chr, range(0x3001)) if c.isspace()) + "\ufeffwest",
]
TOY_ALPHABET = "lowernstid"


def random_texts(count: int, seed: int = 11) -> list[str]:
    """Strings of the toy corpus's letters, spaces between some: words the merges can cut."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        chars = rng.choices(TOY_ALPHABET + "  ", k=rng.randint(1, 60))
        texts.append("".join(chars))
    return texts


def pasted_run(length: int) -> str:
    """``length`` letters with no space, as a paste from a broken page."""
    words = "supercalifragilisticexpialidociousandthenwonderfullyterribleactingbyeveryone"
    return (words * (length // len(words) + 1))[:length]


REVIEWS = sorted(set(CORPUS))
RANDOM = random_texts(40)
LONG = [pasted_run(3000), "a" * 3001, "lowest" * 500, "the newest " * 300]
TEXTS = CHAPTER + UNICODE + REVIEWS + RANDOM + LONG
HUGE = [pasted_run(200_000), "a" * 200_000]


def step_cases() -> list[dict]:
    cases = []
    for vocabulary in ("toy", "real"):
        for text in TEXTS:
            full = len(text) < 1000 or vocabulary == "toy"
            cases.append({"kind": "steps", "vocabulary": vocabulary, "text": text, "full": full})
    return cases


STEP_CASES = step_cases()
ERRORS = [
    ({"kind": "at", "text": "lowest", "step": 8}, "step must be an integer from 0 to 5, got 8"),
    ({"kind": "at", "text": "lowest", "step": -1}, "step must be an integer from 0 to 5, got -1"),
    ({"kind": "at", "text": "lowest", "step": 1.5}, "step must be an integer from 0 to 5, got 1.5"),
    ({"kind": "text", "text": 7}, "text must be a string, got number"),
    ({"kind": "text", "text": None}, "text must be a string, got null"),
    (
        {"kind": "toy", "merges": [["a", "b"], ["c"]]},
        'merges[1] must be a pair of non-empty strings, got ["c"]',
    ),
    (
        {"kind": "toy", "merges": [["", "b"]]},
        'merges[0] must be a pair of non-empty strings, got ["","b"]',
    ),
    ({"kind": "toy", "merges": "ab"}, "merges must be an array of pairs, got string"),
    (
        {"kind": "real", "compact": {"alphabet": "ab", "width": 3, "count": 2, "merges": "A"}},
        "the packed merges end early or hold a bad character at 1",
    ),
    (
        {"kind": "real", "compact": {"alphabet": "ab", "width": 4, "count": 1, "merges": "/w=="}},
        "merge 0 names a token that does not exist yet",
    ),
    (
        {"kind": "real", "compact": {"alphabet": "ab"}},
        "a real vocabulary needs alphabet, width, count and merges",
    ),
]


@cache
def node_results() -> tuple[dict, ...]:
    """Every case through bpe.js in one node process."""
    cases = STEP_CASES + [case for case, _ in ERRORS] + extra_cases()
    compact = compact_vocabulary(shipped_tokenizer())
    answers = node_answers(
        HARNESS, [BPE_JS], {"toy": ARTICLE_MERGES, "real": compact, "cases": cases}, timeout=300
    )
    return tuple(zip([json.dumps(case, sort_keys=True) for case in cases], answers, strict=True))


def extra_cases() -> list[dict]:
    return [
        {"kind": "merges", "vocabulary": "real"},
        {"kind": "merges", "vocabulary": "toy"},
        {"kind": "display", "tokens": ["est</w>", "</w>", "lo", "[UNK]", "a</w>"]},
        *({"kind": "encode", "vocabulary": "real", "text": text} for text in HUGE),
        {"kind": "encode", "vocabulary": "toy", "text": HUGE[0]},
        {"kind": "capped", "vocabulary": "real", "text": LONG[0], "step": 3, "limit": 50},
        {
            "kind": "sliced",
            "vocabulary": "real",
            "text": " ".join(REVIEWS) + " " + pasted_run(20_000),
        },
    ]


def answer(case: dict):
    """bpe.js's value for ``case`` (a failure names its error)."""
    key = json.dumps(case, sort_keys=True)
    found = [result for k, result in node_results() if k == key]
    assert found, case
    assert "value" in found[0], f"{case['kind']}: {found[0].get('error')}"
    return found[0]["value"]


def oracle_words(vocabulary: str, text: str) -> list[list[str]]:
    if vocabulary == "toy":
        return reference.bpe_words(text)
    return real_words(shipped_tokenizer(), text)


def oracle_merges(vocabulary: str) -> list[tuple[str, str]]:
    return ARTICLE_MERGES if vocabulary == "toy" else shipped_tokenizer().merges


def flat(words) -> list[str]:
    return [token for word in words for token in word]


# --- the oracle against attnlib -----------------------------------------------------------------


@pytest.mark.parametrize("text", CHAPTER + REVIEWS + RANDOM + LONG[:3])
def test_the_oracle_ends_where_apply_merges_ends(text: str):
    steps = reference.bpe_steps(reference.bpe_words(text), ARTICLE_MERGES)
    final = [list(word) for word in steps[-1].words] if steps else reference.bpe_words(text)
    assert final == [apply_merges(word, ARTICLE_MERGES) for word in text.split()]
    assert [step.rank for step in steps] == sorted({step.rank for step in steps})


@pytest.mark.parametrize("text", CHAPTER + UNICODE + REVIEWS + LONG)
def test_the_oracle_ends_where_the_real_tokenizer_ends(text: str):
    tokenizer = shipped_tokenizer()
    words = real_words(tokenizer, text)
    steps = reference.bpe_steps(words, tokenizer.merges)
    assert flat(steps[-1].words if steps else words) == tokenizer.tokens(text)


def test_the_oracle_on_the_chapters_word():
    """Section 4: *lowest* is cut low + est</w> by the article's merges, in five steps."""
    steps = reference.bpe_steps(reference.bpe_words("lowest"), ARTICLE_MERGES)
    assert [(s.rank, s.pair, s.places) for s in steps] == [
        (0, ("s", "t"), 1),
        (1, ("e", "st"), 1),
        (2, ("est", "</w>"), 1),
        (3, ("l", "o"), 1),
        (4, ("lo", "w"), 1),
    ]
    assert steps[-1].words == (("low", "est</w>"),)
    assert reference.bpe_steps([["a", "a", "a", "a", "a"]], [("a", "a")])[0].places == 2


# --- bpe.js against the oracle -----------------------------------------------------------------


@pytest.mark.parametrize("index", range(len(STEP_CASES)))
def test_every_step_matches_the_oracle(index: int):
    case = STEP_CASES[index]
    got = answer(case)
    words = oracle_words(case["vocabulary"], case["text"])
    assert got["words"] == words
    steps = reference.bpe_steps(words, oracle_merges(case["vocabulary"]))
    assert got["steps"] == [[s.rank, list(s.pair), s.places] for s in steps]
    states = [flat(words)] + [flat(s.words) for s in steps]
    if case["full"]:
        assert got["tokens"] == states
    else:
        assert got["tokens"] == [states[0], states[-1]]
    final = states[-1]
    ends = [
        i == len(word) - 1
        for word in (steps[-1].words if steps else words)
        for i in range(len(word))
    ]
    assert got["last"] == ends
    if steps:  # the last step's merge made exactly its places' tokens
        assert sum(got["fresh"]) == steps[-1].places
        made = "".join(steps[-1].pair)
        assert all(token == made for token, new in zip(final, got["fresh"], strict=True) if new)


def test_the_step_cases_cover_what_the_brief_asks():
    kinds = {case["vocabulary"] for case in STEP_CASES}
    assert kinds == {"toy", "real"} and len(STEP_CASES) == 2 * len(TEXTS) > 120
    steps = answer(STEP_CASES[TEXTS.index(LONG[0])])["steps"]
    assert len(steps) == 3  # s + t, n + e, i + d: the toy's merges found in a long pasted word
    real_long = answer(STEP_CASES[len(TEXTS) + TEXTS.index(LONG[0])])
    assert len(real_long["steps"]) > 40 and len(real_long["tokens"][0]) == 3000


def test_the_real_vocabulary_unpacks_to_the_tokenizers_merges():
    tokenizer = shipped_tokenizer()
    got = answer({"kind": "merges", "vocabulary": "real"})
    assert [tuple(pair) for pair in got["merges"]] == tokenizer.merges
    assert got["size"] == tokenizer.vocab_size == 8192
    toy = answer({"kind": "merges", "vocabulary": "toy"})
    assert [tuple(pair) for pair in toy["merges"]] == ARTICLE_MERGES


@pytest.mark.parametrize("index", range(len(HUGE)))
def test_a_200000_character_word_equals_the_real_tokenizer(index: int):
    text = HUGE[index]
    assert answer(
        {"kind": "encode", "vocabulary": "real", "text": text}
    ) == shipped_tokenizer().tokens(text)


def test_a_200000_character_word_under_the_toy_merges():
    text = HUGE[0]
    assert answer({"kind": "encode", "vocabulary": "toy", "text": text}) == apply_merges(
        text, ARTICLE_MERGES
    )


def test_capped_tokens_are_the_first_ones_and_the_count_is_all_of_them():
    tokenizer = shipped_tokenizer()
    third = reference.bpe_steps(real_words(tokenizer, LONG[0]), tokenizer.merges)[2]
    got = answer({"kind": "capped", "vocabulary": "real", "text": LONG[0], "step": 3, "limit": 50})
    assert got["tokens"] == flat(third.words)[:50]
    assert got["total"] == len(flat(third.words)) < 3000


def test_a_sliced_run_gives_the_same_tokens():
    text = " ".join(REVIEWS) + " " + pasted_run(20_000)
    got = answer({"kind": "sliced", "vocabulary": "real", "text": text})
    assert got["slices"] > 3, "a zero budget must stop and resume"
    assert got["tokens"] == shipped_tokenizer().tokens(text)


def test_chips_show_tokens_without_their_end_mark():
    got = answer({"kind": "display", "tokens": ["est</w>", "</w>", "lo", "[UNK]", "a</w>"]})
    assert got == [
        {"text": "est", "end": True},
        {"text": "</w>", "end": True},
        {"text": "lo", "end": False},
        {"text": "[UNK]", "end": False},
        {"text": "a", "end": True},
    ]


@pytest.mark.parametrize("index", range(len(ERRORS)))
def test_bpe_js_refuses_bad_input_by_name(index: int):
    case, message = ERRORS[index]
    key = json.dumps(case, sort_keys=True)
    assert [result for k, result in node_results() if k == key] == [{"error": message}]


# --- the HTML -----------------------------------------------------------------------------------


def test_bpe_live_html_is_self_contained_stable_and_compact():
    markup = bpe_live().data
    assert 'id="attnlib-live-bpe" data-explorer="bpe"' in markup
    for name in BPE_SCRIPTS:
        assert attnlib.live.script_source(name) in markup
    assert attnlib.live.script_source("encoder.js") not in markup
    assert markup.count("<script>") == markup.count("</script>") == 1 and "src=" not in markup
    assert bpe_live().data == markup, "the snippet must be the same every time"
    assert (data_attribute(markup, "vocabulary"), data_attribute(markup, "step")) == ("toy", "8")
    # 8,027 merges as 13-bit id pairs: 34,784 base64 characters, against 79,679 as text
    packed = compact_vocabulary(shipped_tokenizer())
    assert (packed["width"], packed["count"], len(packed["merges"])) == (13, 8027, 34_784)
    assert len(markup.encode()) < 100_000, f"the explorer's HTML is {len(markup.encode()):,} bytes"


def test_without_javascript_the_page_says_what_it_would_show():
    snapshot = fallback_snapshot(bpe_live().data)
    assert "the text \u201cthe lowest and the newest\u201d (25 characters)" in snapshot
    assert "after step 8 of 8: 15 tokens" in snapshot
    assert "The merge of this step is ne + west&lt;/w&gt; (merge 8 of the learned list)" in snapshot
    real = bpe_live("Loved it!!", "real", step=0).data.split("<script>")[0]
    assert "the real IMDB vocabulary, after step 0 of" in real and ": 9 tokens." in real
    assert 'title="!&lt;/w&gt;"' in real


def test_bpe_live_refusals_name_the_problem():
    with pytest.raises(TypeError, match="text must be a str, got int"):
        bpe_live(3)
    with pytest.raises(
        ValueError, match="text has 2,001 characters; the explorer starts from at most 2,000"
    ):
        bpe_live("a" * (MAX_TEXT + 1))
    with pytest.raises(ValueError, match=r"vocabulary must be one of \('toy', 'real'\), got 'bpe'"):
        bpe_live(vocabulary="bpe")
    with pytest.raises(
        ValueError,
        match=r"step must be an int from 0 to 8 \(the merges this text takes under the toy",
    ):
        bpe_live(step=9)
    with pytest.raises(ValueError, match="step must be an int from 0 to 8"):
        bpe_live(step=True)
    with pytest.raises(TypeError, match="toy_merges must be a list of"):
        bpe_live(toy_merges="s t")
    with pytest.raises(ValueError, match=r"toy_merges\[1\] must be a pair of non-empty symbols"):
        bpe_live(toy_merges=[("s", "t"), ("e s", "t")])
    with pytest.raises(TypeError, match="tokenizer must be a SubwordTokenizer, got dict"):
        bpe_live(tokenizer={})


def test_a_vocabulary_laid_out_otherwise_is_refused():
    spec = json.loads(shipped_tokenizer().tokenizer.to_str())
    vocab = spec["model"]["vocab"]
    vocab["th"], vocab["in"] = vocab["in"], vocab["th"]  # two merges' ids swapped
    shuffled = SubwordTokenizer(Tokenizer.from_str(json.dumps(spec)))
    with pytest.raises(ValueError, match="not laid out as SubwordTokenizer.train lays it out"):
        compact_vocabulary(shuffled)
