"""Chapter 14's browser Transformer translates as the PyTorch model does: one source of truth.

attnlib/live/transformer_translator.js runs in node on the weights that
:func:`attnlib.live.transformer_translator.packed_weights` ships, for a few hundred test dates
and three untrained models (the chapter's sizes; a pre-LN one with 3 layers and 2 heads, untied;
one with learned positions and 8 heads): the greedy tokens must be identical to
:func:`attnlib.generation.greedy_decode`'s, the probabilities and every cross-attention row equal
to 1e-5.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch

import attnlib
import attnlib.live
from attnlib.encoder import TransformerConfig
from attnlib.generation import EncoderDecoder
from attnlib.live.transformer_translator import (
    MAX_STEPS,
    browser_config,
    packed_weights,
    transformer_translator_live,
    translate_with_weights,
)
from attnlib.tasks.dates import DateTaskConfig, prepare
from attnlib.tasks.dates_transformer import TRANSFORMER, TransformerSizes, new_date_model
from tests.helpers import node_answers

JS = Path(attnlib.live.__file__).parent / "transformer_translator.js"
TOLERANCE = 1e-5
# stdin: [{config, manifest, weights, texts}]; stdout: per model, per text, {ids, unknown, steps:
# [{id, probabilities, cross}]} or {error: {name, message}}.
HARNESS = """
const fs = require("fs");
const live = require(process.argv[1]);
const models = JSON.parse(fs.readFileSync(0, "utf8"));
const out = models.map((m) => {
  const translator = new live.Translator(live.decodeWeights(m.weights, m.manifest), m.config);
  return m.texts.map((text) => {
    try {
      const r = translator.translate(text);
      return { ids: r.ids, unknown: r.unknown, output: r.output, steps: r.steps.map((s) => ({
        id: s.id, token: s.token, probabilities: s.probabilities,
        cross: s.cross.map((layer) => layer.map((head) => Array.from(head))) })) };
    } catch (error) {
      return { error: { name: error.name, message: error.message } };
    }
  });
});
process.stdout.write(JSON.stringify(out));
"""


@cache
def task():
    """The date task, small: 300 test dates; vocabularies from 2,000 training dates."""
    return prepare(DateTaskConfig(n_train=2000, n_valid=10, n_test=300))


@cache
def models() -> dict[str, EncoderDecoder]:
    """Three untrained models of different shapes, fixed seeds."""
    t = task()
    attnlib.seed_everything(0, threads=1)
    chapter = new_date_model(TRANSFORMER, t, TransformerSizes()).model.eval()
    attnlib.seed_everything(1, threads=1)
    sizes = TransformerSizes(
        d_model=24, num_heads=2, num_layers=3, d_ff=40, norm_first=True, tie_weights=False
    )
    pre_ln = new_date_model(TRANSFORMER, t, sizes).model.eval()
    attnlib.seed_everything(2, threads=1)
    config = TransformerConfig(
        vocab_size=len(t.source_vocab),
        d_model=16,
        num_heads=8,
        num_layers=1,
        d_ff=32,
        dropout=0.0,
        max_len=80,
        positions="learned",
        pad_id=t.source_vocab.pad_id,
    )
    learned = EncoderDecoder(config, len(t.target_vocab), t.target_vocab.pad_id).eval()
    return {"chapter": chapter, "pre-LN": pre_ln, "learned": learned}


def browser_answers(cases: dict[str, list[str]]) -> dict[str, list[dict]]:
    """Each model's texts translated by the JavaScript port in node."""
    t = task()
    payload = []
    for name, texts in cases.items():
        weights, manifest = packed_weights(models()[name])
        config = browser_config(models()[name], t.source_vocab, t.target_vocab)
        payload.append({"config": config, "manifest": manifest, "weights": weights, "texts": texts})
    answers = node_answers(HARNESS, [JS], payload)
    return dict(zip(cases, answers, strict=True))


@cache
def compared() -> dict[str, dict[str, float]]:
    """Per model: dates compared, token mismatches, largest probability and weight difference."""
    t = task()
    sources = [source for source, _ in t.splits.test]
    cases = {"chapter": sources, "pre-LN": sources[:100], "learned": sources[100:200]}
    found = {}
    for name, answers in browser_answers(cases).items():
        worst_p = worst_w = 0.0
        mismatches = 0
        for text, answer in zip(cases[name], answers, strict=True):
            ids, probabilities, cross = translate_with_weights(
                models()[name], text, t.source_vocab, t.target_vocab
            )
            if [step["id"] for step in answer["steps"]] != ids:
                mismatches += 1
                continue
            browser_p = np.array([step["probabilities"] for step in answer["steps"]])
            browser_w = np.array([step["cross"] for step in answer["steps"]]).transpose(1, 2, 0, 3)
            worst_p = max(worst_p, float(np.abs(browser_p - probabilities).max()))
            worst_w = max(worst_w, float(np.abs(browser_w - cross).max()))
        found[name] = {
            "dates": len(answers),
            "mismatches": mismatches,
            "probability": worst_p,
            "weights": worst_w,
        }
    print(found)
    return found


@pytest.mark.parametrize("name", ["chapter", "pre-LN", "learned"])
def test_browser_greedy_tokens_equal_pytorch(name):
    result = compared()[name]
    assert result["dates"] == (300 if name == "chapter" else 100)
    assert result["mismatches"] == 0


@pytest.mark.parametrize("name", ["chapter", "pre-LN", "learned"])
def test_browser_probabilities_and_cross_attention_equal_pytorch(name):
    result = compared()[name]
    assert result["probability"] < TOLERANCE
    assert result["weights"] < TOLERANCE


def test_tokenizer_reads_unknown_characters_as_unk_like_python():
    t = task()
    texts = ["25 AUGUST 1963", "1963-08-25 🙂", "ß"]
    (answers,) = browser_answers({"chapter": texts}).values()
    for text, answer in zip(texts, answers, strict=True):
        assert answer["ids"] == t.source_vocab.encode(text)
    assert [u["symbol"] for u in answers[0]["unknown"]] == list("AUGUST")
    assert answers[1]["unknown"] == [{"index": 11, "symbol": "🙂"}]  # one code point, as Python
    ids, _, _ = translate_with_weights(
        models()["chapter"], texts[0], t.source_vocab, t.target_vocab
    )
    assert [step["id"] for step in answers[0]["steps"]] == ids


def test_browser_refuses_empty_and_too_long_text():
    (answers,) = browser_answers({"learned": ["", "1" * 81, "1" * 80]}).values()
    assert answers[0]["error"]["message"] == "type a date to translate: the text is empty"
    assert answers[1]["error"]["name"] == "TranslatorInputError"
    assert "81 characters, but the model has positions for 80" in answers[1]["error"]["message"]
    assert len(answers[2]["steps"]) >= 1  # exactly max_len characters still translate


def test_browser_output_text_is_the_decoded_tokens():
    t = task()
    texts = [source for source, _ in t.splits.test[:20]]
    (answers,) = browser_answers({"chapter": texts}).values()
    for text, answer in zip(texts, answers, strict=True):
        ids, _, _ = translate_with_weights(
            models()["chapter"], text, t.source_vocab, t.target_vocab
        )
        assert answer["output"] == t.target_vocab.decode(ids)
        assert len(answer["steps"]) <= MAX_STEPS


def test_packed_weights_send_a_tied_matrix_once():
    weights, manifest = packed_weights(models()["chapter"])
    names = [name for name, _ in manifest]
    assert "output.weight" not in names and "decoder.embedding.weight" in names
    count = sum(int(np.prod(shape)) for _, shape in manifest)
    assert len(weights) == 4 * ((4 * count + 2) // 3)  # base64 of 4 bytes a number
    untied = [name for name, _ in packed_weights(models()["pre-LN"])[1]]
    assert "output.weight" in untied


def test_live_html_carries_model_and_snapshot():
    t = task()
    page = transformer_translator_live(models()["chapter"], t.source_vocab, t.target_vocab).data
    assert 'data-explorer="transformer-translator"' in page
    assert "This explorer runs the trained Transformer in your browser" in page
    assert "25 august 1963" in page and "data:image/png;base64," in page
    assert len(page) < 400_000  # 44,591 numbers as base64, the snapshot and the scripts
    steps = re.findall(r"<tr><td>(\d+)</td>", page)
    ids, _, _ = translate_with_weights(
        models()["chapter"], "25 august 1963", t.source_vocab, t.target_vocab
    )
    assert len(steps) == len(ids)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (
            {"model": torch.nn.Linear(2, 2)},
            TypeError,
            "model must be an EncoderDecoder or a DateTransformer, got Linear",
        ),
        ({"example": ""}, ValueError, "example must be a non-empty date"),
        (
            {"example": "25 AUGUST 1963"},
            ValueError,
            "example has characters outside the source vocabulary: ['A', 'G', 'S', 'T', 'U']",
        ),
        ({"example": "1" * 129}, ValueError, "example has 129 characters, more than max_len=128"),
        ({"source_vocab": "abc"}, TypeError, "source_vocab must be a CharVocab, got str"),
    ],
)
def test_live_refuses_bad_input(change, error, message):
    t = task()
    arguments = {
        "model": models()["chapter"],
        "source_vocab": t.source_vocab,
        "target_vocab": t.target_vocab,
        "example": "25 august 1963",
    } | change
    with pytest.raises(error) as raised:
        transformer_translator_live(**arguments)
    assert message in str(raised.value)


def tiny_model(t, target_pad_id: int | None = None, **options) -> EncoderDecoder:
    """An untrained 8-wide, one-layer model of the task's vocabularies, with ``options``."""
    sizes = dict(d_model=8, num_heads=2, num_layers=1, d_ff=8)
    config = TransformerConfig(vocab_size=len(t.source_vocab), **sizes, **options)
    return EncoderDecoder(config, len(t.target_vocab), target_pad_id)


def test_live_refuses_vocabulary_of_another_size_and_unported_options():
    t = task()
    with pytest.raises(ValueError, match="target_vocab has 42 symbols but the model's has 15"):
        transformer_translator_live(models()["chapter"], t.source_vocab, t.source_vocab)
    gelu = tiny_model(t, t.target_vocab.pad_id, activation="gelu")
    with pytest.raises(ValueError, match="relu feed-forwards only, got 'gelu'"):
        transformer_translator_live(gelu, t.source_vocab, t.target_vocab)
    grouped = tiny_model(t, num_kv_heads=1)
    with pytest.raises(ValueError, match="num_kv_heads=1 for num_heads=2"):
        transformer_translator_live(grouped, t.source_vocab, t.target_vocab)
