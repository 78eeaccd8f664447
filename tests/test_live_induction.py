"""Chapter 17's browser language model runs as the PyTorch one does, heads on and off.

attnlib/live/induction_lm.js runs in node on the weights that
:func:`attnlib.live.transformer_translator.packed_weights` ships, for sequences of chapter 17's
probe batch and shorter ones, each with a set of heads switched off, on two untrained models
(the chapter's shape with sharpened queries; a post-LN one with feed-forwards, sinusoidal
positions and an untied output): the logits must equal :func:`run_with_weights`' to 1e-4, every
attention weight to 1e-5, and the likeliest next tokens must be the same.
"""

from __future__ import annotations

import json
import random
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch

import attnlib
import attnlib.live
from attnlib.live.induction_explorer import (
    SCRIPTS,
    browser_config,
    induction_live,
    page_model,
    run_with_weights,
)
from attnlib.live.transformer_translator import packed_weights
from attnlib.lm import DecoderOnlyLM
from attnlib.model_config import TransformerConfig
from attnlib.tasks.induction import InductionTask
from tests.helpers import data_attribute, node_answers, stored_explorer

JS = Path(attnlib.live.__file__).parent / "induction_lm.js"
CHAPTER = Path(__file__).parents[1] / "notebooks" / "17_induction_heads.ipynb"
LOGIT_TOLERANCE, WEIGHT_TOLERANCE = 1e-4, 1e-5
# stdin: [{config, manifest, weights, cases: [{ids, off}]}]; stdout: per model, per case,
# {logits, weights, predicted} or {error: {name, message}}.
HARNESS = """
const fs = require("fs");
const lm = require(process.argv[1]);
const models = JSON.parse(fs.readFileSync(0, "utf8"));
const out = models.map((m) => {
  const model = new lm.LanguageModel(lm.decodeWeights(m.weights, m.manifest), m.config);
  return m.cases.map((c) => {
    try {
      const r = model.run(c.ids, c.off);
      return { logits: Array.from(r.logits), predicted: r.predicted,
               weights: r.weights.map((layer) => layer.map((head) => Array.from(head))) };
    } catch (error) {
      return { error: { name: error.name, message: error.message } };
    }
  });
});
process.stdout.write(JSON.stringify(out));
"""
# stdin: [[text, vocab, maxTokens], ...]; stdout: the ids or {error: {name, message}} of each.
PARSE_HARNESS = """
const fs = require("fs");
const lm = require(process.argv[1]);
const cases = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(cases.map((c) => {
  try {
    return lm.parseTokens(c[0], c[1], c[2]);
  } catch (error) {
    return { error: { name: error.name, message: error.message } };
  }
})));
"""


@cache
def models() -> dict[str, DecoderOnlyLM]:
    """Two untrained models, fixed seeds: the chapter's shape, and a post-LN one."""
    attnlib.seed_everything(0, threads=1)
    chapter = DecoderOnlyLM(InductionTask().model_config()).eval()
    with torch.no_grad():  # sharper attention than an untrained model's near-uniform weights
        for layer in chapter.layers:
            layer.attention.query_projection.weight.mul_(4.0)
    attnlib.seed_everything(1, threads=1)
    config = TransformerConfig(
        vocab_size=40,
        d_model=32,
        num_heads=2,
        num_layers=3,
        d_ff=48,
        dropout=0.0,
        max_len=30,
        positions="sinusoidal",
        norm_first=False,
    )
    post_ln = DecoderOnlyLM(config, tie_weights=False).eval()
    return {"chapter": chapter, "post-LN": post_ln}


def cases_for(name: str) -> list[dict]:
    """Sequences (the probe's, and shorter random ones) with random sets of heads off."""
    model = models()[name]
    layers, heads = len(model.layers), model.config.num_heads
    pairs = [(layer, head) for layer in range(layers) for head in range(heads)]
    draw = random.Random(name)
    if name == "chapter":
        rows = InductionTask().probe().ids[:24].tolist()
    else:
        rows = [
            [0] + [draw.randrange(1, 40) for _ in range(draw.randrange(1, 30))] for _ in range(16)
        ]
    cases = []
    for index, ids in enumerate(rows):
        off = [] if index % 4 == 0 else draw.sample(pairs, draw.randrange(1, len(pairs) + 1))
        cases.append({"ids": ids, "off": [list(pair) for pair in off]})
    return cases


def browser_answers(cases: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """Each model's cases run by the JavaScript port in node."""
    payload = []
    for name, model_cases in cases.items():
        weights, manifest = packed_weights(models()[name])
        config = browser_config(models()[name])
        payload.append(
            {"config": config, "manifest": manifest, "weights": weights, "cases": model_cases}
        )
    return dict(zip(cases, node_answers(HARNESS, [JS], payload), strict=True))


@cache
def compared() -> dict[str, dict[str, float]]:
    """Per model: cases compared, prediction mismatches, largest logit and weight difference."""
    cases = {name: cases_for(name) for name in models()}
    found = {}
    for name, answers in browser_answers(cases).items():
        worst_logit = worst_weight = 0.0
        mismatches = 0
        for case, answer in zip(cases[name], answers, strict=True):
            logits, weights = run_with_weights(
                models()[name], case["ids"], [tuple(pair) for pair in case["off"]]
            )
            n, vocab = logits.shape
            theirs = np.array(answer["logits"]).reshape(n, vocab)
            worst_logit = max(worst_logit, float(np.abs(theirs - logits).max()))
            worst_weight = max(
                worst_weight,
                float(np.abs(np.array(answer["weights"]).reshape(weights.shape) - weights).max()),
            )
            mismatches += int((np.array(answer["predicted"]) != logits.argmax(-1)).sum())
        found[name] = {
            "cases": len(answers),
            "mismatches": mismatches,
            "logit": worst_logit,
            "weight": worst_weight,
        }
    return found


@pytest.mark.parametrize("name", ["chapter", "post-LN"])
def test_browser_model_matches_pytorch(name: str) -> None:
    result = compared()[name]
    assert result["cases"] == (24 if name == "chapter" else 16)
    assert result["mismatches"] == 0, result
    assert result["logit"] <= LOGIT_TOLERANCE, result
    assert result["weight"] <= WEIGHT_TOLERANCE, result


def test_switching_heads_off_changes_the_logits_as_pytorch_does() -> None:
    """A head switched off moves the browser's logits exactly as DecoderOnlyLM.ablated does."""
    ids = InductionTask().probe().ids[0].tolist()
    cases = {"chapter": [{"ids": ids, "off": []}, {"ids": ids, "off": [[1, 2]]}]}
    on, off = browser_answers(cases)["chapter"]
    moved = np.abs(np.array(on["logits"]) - np.array(off["logits"])).max()
    expected_on, _ = run_with_weights(models()["chapter"], ids)
    expected_off, _ = run_with_weights(models()["chapter"], ids, [(1, 2)])
    assert moved == pytest.approx(float(np.abs(expected_on - expected_off).max()), abs=1e-4)
    assert moved > 0.01


def test_the_browser_refuses_tokens_outside_the_vocabulary() -> None:
    cases = {"chapter": [{"ids": [0, 64], "off": []}, {"ids": [0, 3], "off": [[2, 0]]}]}
    vocab, layer = browser_answers(cases)["chapter"]
    assert vocab["error"] == {
        "name": "InductionInputError",
        "message": "token 64 at position 1 is outside the vocabulary 0..63",
    }
    assert layer["error"]["message"] == "layer 2 is outside 0..1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5 17, 3", [5, 17, 3]),
        ("  9\n", [9]),
        ("", "type some tokens: numbers from 1 to 63, spaced"),
        ("5 0", '"0" is not a token: tokens are whole numbers from 1 to 63 (0 is the start token)'),
        (
            "5 64",
            '"64" is not a token: tokens are whole numbers from 1 to 63 (0 is the start token)',
        ),
        (
            "2.5",
            '"2.5" is not a token: tokens are whole numbers from 1 to 63 (0 is the start token)',
        ),
        (
            " ".join(["1"] * 48),
            "48 tokens, but the model has room for 47 after the start token: remove 1",
        ),
    ],
)
def test_typed_tokens_are_read_or_refused_with_a_reason(text: str, expected: object) -> None:
    (answer,) = node_answers(PARSE_HARNESS, [JS], [[text, 64, 47]])
    if isinstance(expected, list):
        assert answer == expected
    else:
        assert answer["error"] == {"name": "InductionInputError", "message": expected}


def test_the_page_carries_the_model_the_examples_and_a_snapshot() -> None:
    model = models()["chapter"]
    probe = InductionTask().probe()
    scores = {"previous token": torch.zeros(2, 4), "prefix matching": torch.ones(2, 4)}
    page = induction_live(model, probe.ids[:3], scores).data
    assert 'data-explorer="induction"' in page
    assert data_attribute(page, "examples").startswith("[[0,")
    assert '"prefix matching":[[1.0,1.0,1.0,1.0]' in data_attribute(page, "scores")
    logits, _ = run_with_weights(model, probe.ids[0].tolist())
    guesses = " ".join(map(str, logits.argmax(-1).tolist()))
    assert f"The likeliest next token after each: <code>{guesses}</code>" in page
    assert "<script>" in page and "src=" not in page and page.count("</script>") == 1
    for name in SCRIPTS:
        assert attnlib.live.script_source(name) in page
    assert induction_live(model, probe.ids[:3], scores).data == page, "the same every time"


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"model": torch.nn.Linear(2, 2)}, TypeError, "model must be a DecoderOnlyLM, got Linear"),
        ({"examples": torch.zeros(2, 5)}, TypeError, "examples must hold integer token ids"),
        ({"examples": torch.ones(2, 5, dtype=torch.long)}, ValueError, "must start with the start"),
        ({"examples": torch.zeros(2, 49, dtype=torch.long)}, ValueError, "more than max_len=48"),
        ({"examples": torch.zeros(13, 5, dtype=torch.long)}, ValueError, "1 <= k <= 12"),
        ({"examples": torch.tensor([[0, 64]])}, ValueError, "tokens must be 1..63"),
        ({"scores": {"x": torch.zeros(3)}}, ValueError, "score 'x' must be (layers, heads)"),
        ({"scores": {"x": torch.full((2, 4), float("nan"))}}, ValueError, "must be finite"),
    ],
)
def test_induction_live_refuses_what_it_cannot_show(
    change: dict, error: type, message: str
) -> None:
    arguments = {
        "model": models()["chapter"],
        "examples": torch.tensor([[0, 5, 6]]),
        "scores": None,
    }
    arguments.update(change)
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        induction_live(**arguments)


def test_models_the_port_does_not_run_are_refused() -> None:
    config = InductionTask().model_config(positions="rotary")
    with pytest.raises(ValueError, match="learned or sinusoidal positions, got 'rotary'"):
        induction_live(DecoderOnlyLM(config), torch.tensor([[0, 5]]))
    grouped = InductionTask().model_config(num_kv_heads=2)
    with pytest.raises(ValueError, match="one key/value head per query head"):
        induction_live(DecoderOnlyLM(grouped), torch.tensor([[0, 5]]))


def test_page_model_reads_back_the_model_a_page_carries() -> None:
    for name, model in models().items():
        page = induction_live(model, torch.tensor([[0, 5, 6]])).data
        back = page_model(page)
        assert back.tie_weights == model.tie_weights, name
        for key, tensor in model.state_dict().items():
            assert torch.equal(back.state_dict()[key], tensor), (name, key)
    with pytest.raises(ValueError, match="no induction explorer in this HTML"):
        page_model("<div></div>")


def test_the_chapters_stored_model_runs_in_node_as_in_pytorch_and_copies() -> None:
    """Chapter 17's page carries the current scripts and its trained model: node and PyTorch
    agree on the page's examples, heads on and layer 2 off, and the model copies."""
    markup = stored_explorer(CHAPTER, "induction")
    for name in SCRIPTS:
        assert attnlib.live.script_source(name) in markup, (
            f"{CHAPTER.name} stores an older {name}: re-execute it"
        )
    model = page_model(markup)
    examples = json.loads(data_attribute(markup, "examples"))
    layer_2 = [[1, head] for head in range(model.config.num_heads)]
    cases = [{"ids": ids, "off": off} for ids in examples for off in ([], layer_2)]
    weights, manifest = packed_weights(model)
    payload = [
        {"config": browser_config(model), "manifest": manifest, "weights": weights, "cases": cases}
    ]
    (answers,) = node_answers(HARNESS, [JS], payload)
    for case, answer in zip(cases, answers, strict=True):
        logits, _ = run_with_weights(model, case["ids"], [tuple(pair) for pair in case["off"]])
        assert np.abs(np.array(answer["logits"]).reshape(logits.shape) - logits).max() <= 1e-4
        assert answer["predicted"] == logits.argmax(-1).tolist()
    # Trained: where copying can predict the next token (the probe's second copies), it does.
    probe = InductionTask().probe()
    with torch.no_grad():
        guesses = model(probe.ids).argmax(-1)[:, :-1]
    mask = probe.repeat_mask[:, :-1]
    right = (guesses == probe.ids[:, 1:])[mask].float().mean()
    with torch.no_grad(), model.ablated([tuple(pair) for pair in layer_2]):
        ablated = (model(probe.ids).argmax(-1)[:, :-1] == probe.ids[:, 1:])[mask].float().mean()
    assert right >= 0.5 and ablated <= 0.1, (right, ablated)
