"""Chapters 03-05's live translators: seq2seq.js translates as PyTorch does, and
:func:`attnlib.live.translator.translator_live` ships what it needs.

attnlib/live/seq2seq.js runs in node on a few hundred dates of the date task's generator (and
a few strings typed to hurt: unknown and capital letters, a character outside the BMP, one
character, the longest input), for every model kind, on untrained models of the chapters' sizes
and of odd sizes (so that a transposed weight cannot hide), on a unidirectional encoder, on
Luong without input feeding, and on briefly trained models that stop at the end symbol. Each
translation must equal ``Seq2Seq.greedy_decode``'s token for token; each step's probabilities
and attention weights must match PyTorch (float32) to 1e-5, and a float64 copy of the model to
1e-10 (the browser computes in float64 on the float32 weights). Every case of a test goes
through one node process.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch

import attnlib.live
from attnlib import seed_everything
from attnlib.data.text import CharVocab, make_batches
from attnlib.live.translator import (
    MAX_STEPS,
    model_spec,
    page_models,
    reference_steps,
    reference_steps_batch,
    spec_model,
    translator_live,
    translator_script,
    vocab_spec,
)
from attnlib.seq2seq import MODEL_KINDS
from attnlib.tasks.copy import CopyTaskConfig, copy_marks
from attnlib.tasks.copy import new_model as new_copy_model
from attnlib.tasks.copy import prepare as prepare_copy
from attnlib.tasks.dates import DateTaskConfig, new_model, predict, prepare
from attnlib.training import fit
from tests.helpers import node_answers, stored_explorer

SEQ2SEQ_JS = Path(attnlib.live.__file__).with_name("seq2seq.js")
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
# The chapters whose stored outputs ship trained translators: their notebook and data.
CHAPTERS = {
    "04": ("04_bahdanau_attention.ipynb", DateTaskConfig()),
    "05": ("05_luong_attention.ipynb", DateTaskConfig(n_train=4_000, n_test=1_000, epochs=2)),
    "14": ("14_decoder_transformer.ipynb", DateTaskConfig(n_test=1_000)),
}
COPIER = "03_the_bottleneck.ipynb"  # chapter 03 ships copiers of digit strings (expect="copy")
FLOAT32_TOLERANCE = 1e-5
FLOAT64_TOLERANCE = 1e-10
N_DATES = 300

# Reads {models: {name: spec}, vocab: {source, target}, texts, max_steps} on stdin; answers,
# per model, per text, the translation step by step (or {error}).
HARNESS = """
const s2s = require(process.argv[1]);
const job = JSON.parse(require("fs").readFileSync(0, "utf8"));
const source = s2s.readVocab(job.vocab.source, "source");
const target = s2s.readVocab(job.vocab.target, "target");
const out = {};
for (const [name, spec] of Object.entries(job.models)) {
  let model;
  try {
    model = s2s.loadModel(spec);
  } catch (error) {
    out[name] = { error: error.message };
    continue;
  }
  out[name] = job.texts.map((text) => {
    try {
      const result = s2s.translate(model, text, source, target, job.max_steps);
      return {
        ids: result.ids,
        unknown: result.unknown,
        text: result.text,
        tokens: result.tokens,
        probabilities: result.steps.map((step) => Array.from(step.probabilities)),
        weights: result.steps.map((step) => (step.weights ? Array.from(step.weights) : null)),
      };
    } catch (error) {
      return { error: error.message };
    }
  });
}
process.stdout.write(JSON.stringify(out));
"""

# Typed by a reader: unknown characters (capitals, '/', 'é'), one outside the BMP (one code point
# for Python and for Array.from alike), a lone character, a long input, spaces at the ends.
TYPED = [
    "2026/11/21",
    "NOV 21ST 2026",
    "nov 21st 2026",
    "le 21 novembre 2026, café",
    "21 \U0001f642 nov 2026",
    "7",
    " ",
    "  21.11.26  ",
    "saturday, the twenty-first of november two thousand twenty-six" * 2,
]


def run_node(models: dict, vocab: dict, texts: list[str], max_steps: int = MAX_STEPS) -> dict:
    job = {
        "models": {name: model_spec(model) for name, model in models.items()},
        "vocab": vocab,
        "texts": texts,
        "max_steps": max_steps,
    }
    return node_answers(HARNESS, [SEQ2SEQ_JS], job, timeout=600)


@cache
def date_task(n_train: int = 2_000, n_test: int = N_DATES):
    return prepare(DateTaskConfig(n_train=n_train, n_valid=100, n_test=n_test))


def untrained(kind: str, task, seed: int = 0, **options) -> torch.nn.Module:
    seed_everything(seed)
    return new_model(kind, task, **options).eval()


def compare(models: dict, task, texts: list[str], max_steps: int = MAX_STEPS) -> dict:
    """Run every text through node and PyTorch; assert they agree; return the largest
    differences by model: {name: (probability, weight)}."""
    vocab = {"source": vocab_spec(task.source_vocab), "target": vocab_spec(task.target_vocab)}
    answers = run_node(models, vocab, texts, max_steps)
    largest = {}
    batches = make_batches([(text, "") for text in texts], task.source_vocab, task.target_vocab, 64)
    for name, model in models.items():
        assert isinstance(answers[name], list), f"{name}: {answers[name]}"
        # Token for token against greedy_decode itself, all texts in batches.
        expected_texts = predict(model, batches, task.target_vocab, max_steps)
        references = reference_steps_batch(
            model, texts, task.source_vocab, task.target_vocab, max_steps
        )
        worst_p = worst_w = 0.0
        for text, answer, expected_text, reference in zip(
            texts, answers[name], expected_texts, references, strict=True
        ):
            what = f"{name} on {text!r}"
            assert "error" not in answer, f"{what}: {answer}"
            assert answer["ids"] == task.source_vocab.encode(text), f"{what}: source ids"
            assert answer["text"] == expected_text, f"{what}: greedy_decode says {expected_text!r}"
            assert reference.text == expected_text, f"{what}: reference_steps is not greedy_decode"
            assert answer["tokens"] == reference.tokens, f"{what}: tokens"
            shown = np.array(answer["probabilities"])
            worst_p = max(worst_p, float(np.abs(shown - reference.probabilities).max()))
            if reference.weights is None:
                assert all(w is None for w in answer["weights"]), (
                    f"{what}: weights without attention"
                )
            else:
                weights = np.array(answer["weights"])
                assert weights.shape == reference.weights.shape, what
                worst_w = max(worst_w, float(np.abs(weights - reference.weights).max()))
            unknown = sorted({c for c in text if c not in task.source_vocab.stoi})
            assert sorted(answer["unknown"]) == unknown, f"{what}: unknown characters"
        largest[name] = (worst_p, worst_w)
    return largest


def dates(task, n: int = N_DATES) -> list[str]:
    return [source for source, _ in task.splits.test[:n]]


def test_every_kind_translates_as_pytorch_does_on_hundreds_of_dates() -> None:
    task = date_task()
    models = {kind: untrained(kind, task, seed=i) for i, kind in enumerate(MODEL_KINDS)}
    largest = compare(models, task, dates(task) + TYPED)
    for name, (p, w) in largest.items():
        assert p <= FLOAT32_TOLERANCE and w <= FLOAT32_TOLERANCE, (name, p, w)


def test_odd_sizes_one_direction_and_no_input_feeding() -> None:
    """Every width different, so a weight read transposed or a gate block out of place shows."""
    task = replace(
        date_task(), config=DateTaskConfig(embedding_dim=12, hidden_size=22, attention_size=18)
    )
    models = {kind: untrained(kind, task, seed=10 + i) for i, kind in enumerate(MODEL_KINDS)}
    models["luong-general, no input feeding"] = untrained(
        "luong-general", task, seed=20, input_feeding=False
    )
    models["luong-dot, no input feeding"] = untrained(
        "luong-dot", task, seed=21, input_feeding=False
    )
    models["bahdanau, one direction"] = untrained("bahdanau", task, seed=22, bidirectional=False)
    models["luong-additive, one direction"] = untrained(
        "luong-additive", task, seed=23, bidirectional=False
    )
    models["none, one direction"] = untrained("none", task, seed=24, bidirectional=False)
    largest = compare(models, task, dates(task, 120) + TYPED)
    for name, (p, w) in largest.items():
        assert p <= FLOAT32_TOLERANCE and w <= FLOAT32_TOLERANCE, (name, p, w)


def test_float64_models_agree_to_round_off() -> None:
    """The same models in float64: the browser's float64 arithmetic then agrees to 1e-10."""
    task = date_task()
    models = {
        kind: untrained(kind, task, seed=30 + i).double() for i, kind in enumerate(MODEL_KINDS)
    }
    # model_spec ships float32 values: round the float64 models' weights to float32 first.
    for model in models.values():
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(parameter.float().double())
    largest = compare(models, task, dates(task, 60) + TYPED[:4])
    for name, (p, w) in largest.items():
        assert p <= FLOAT64_TOLERANCE and w <= FLOAT64_TOLERANCE, (name, p, w)


@cache
def briefly_trained() -> tuple[object, dict]:
    """Small models trained for one epoch: they write dates and stop at the end symbol."""
    config = DateTaskConfig(
        n_train=1_000,
        n_valid=50,
        n_test=N_DATES,
        epochs=1,
        embedding_dim=16,
        hidden_size=32,
        attention_size=24,
    )
    task = prepare(config)
    models = {}
    for kind in ("bahdanau", "luong-general"):
        seed_everything(0, threads=1)
        model = new_model(kind, task)
        fit(model, task.train_batches, task.loss, epochs=1, lr=1e-2, device="cpu", progress=False)
        models[kind] = model.eval()
    return task, models


def test_briefly_trained_models_stop_at_the_end_symbol_as_pytorch_does() -> None:
    task, models = briefly_trained()
    texts = dates(task)
    largest = compare(models, task, texts + TYPED)
    for name, (p, w) in largest.items():
        assert p <= FLOAT32_TOLERANCE and w <= FLOAT32_TOLERANCE, (name, p, w)
    # They learned something: most translations stop before max_steps.
    steps = reference_steps_batch(models["bahdanau"], texts, task.source_vocab, task.target_vocab)
    stopped = sum(len(s.tokens) < MAX_STEPS for s in steps)
    assert stopped > len(texts) // 2, f"only {stopped} of {len(texts)} translations stopped"


def test_max_steps_and_a_model_that_stops_at_once() -> None:
    task = date_task()
    model = untrained("bahdanau", task, seed=40)
    stops = untrained("luong-dot", task, seed=41)
    with torch.no_grad():
        stops.decoder.output.bias[task.target_vocab.eos_id] = 100.0  # </s> at the first step
    for max_steps in (1, 3, 25):
        largest = compare({"bahdanau": model, "stops": stops}, task, dates(task, 10), max_steps)
        assert max(max(pair) for pair in largest.values()) <= FLOAT32_TOLERANCE
    answers = run_node(
        {"stops": stops},
        {"source": vocab_spec(task.source_vocab), "target": vocab_spec(task.target_vocab)},
        ["21.11.26"],
    )
    assert answers["stops"][0]["tokens"] == [task.target_vocab.eos_id]
    assert answers["stops"][0]["text"] == ""


# --- seq2seq.js refuses what it cannot read, in words ---------------------------------------

ERRORS_HARNESS = """
const s2s = require(process.argv[1]);
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const out = cases.map((c) => {
  try {
    const source = s2s.readVocab(c.vocab.source, "source");
    const target = s2s.readVocab(c.vocab.target, "target");
    const model = s2s.loadModel(c.spec);
    if (c.ids) return { value: s2s.greedyDecode(model, c.ids, c.max_steps).length };
    return { value: s2s.translate(model, c.text, source, target, c.max_steps).text };
  } catch (error) {
    return { error: error.message };
  }
});
process.stdout.write(JSON.stringify(out));
"""


def test_seq2seq_js_says_what_is_wrong() -> None:
    task = date_task()
    spec = model_spec(untrained("luong-general", task))
    vocab = {"source": vocab_spec(task.source_vocab), "target": vocab_spec(task.target_vocab)}
    cut = dict(spec, weights=spec["weights"][:-8])
    missing = dict(spec, tensors=[t for t in spec["tensors"] if "combine" not in t[0]])
    reshaped = dict(
        spec,
        tensors=[
            [n, list(reversed(s)) if "cell.weight_ih" in n else s] for n, s in spec["tensors"]
        ],
    )
    cases = [
        (dict(spec, kind="luong-cosine"), "x", None, "unknown model kind"),
        (cut, "x", None, "the weights hold"),
        (missing, "x", None, "the weights hold"),
        (reshaped, "x", None, "decoder.cell.weight_ih has shape"),
        (dict(spec, eos_id=99), "x", None, "eos_id must be a target id"),
        (spec, "", None, "non-empty text"),
        (spec, "x", 0, "maxSteps must be a positive integer"),
        (spec, None, None, "source id 999"),
    ]
    jobs = [
        {
            "spec": s,
            "vocab": vocab,
            "text": text,
            "max_steps": steps,
            **({"ids": [1, 999]} if text is None else {}),
        }
        for s, text, steps, _ in cases
    ]
    answers = node_answers(ERRORS_HARNESS, [SEQ2SEQ_JS], jobs)
    for (_, text, _, message), answer in zip(cases, answers, strict=True):
        assert message in answer.get("error", ""), (text, message, answer)
    bad_vocab = dict(vocab, source=dict(vocab["source"], unk_id=500))
    answer = node_answers(
        ERRORS_HARNESS, [SEQ2SEQ_JS], [{"spec": spec, "vocab": bad_vocab, "text": "x"}]
    )[0]
    assert "unk_id is not one of its ids" in answer["error"]


# --- translator_live: the Python side ------------------------------------------------------


def small_models(task) -> dict:
    return {kind: untrained(kind, task, seed=i) for i, kind in enumerate(("bahdanau", "none"))}


def sample_page(models: dict, task) -> str:
    """translator_live's markup for ``models`` with every option set, on one example."""
    return translator_live(
        models,
        task.source_vocab,
        task.target_vocab,
        "21.11.26",
        target="2026-11-21",
        start="none",
        examples=["3 mar 1999"],
    ).data


def test_model_spec_ships_the_state_dict_as_float32() -> None:
    task = date_task()
    model = untrained("luong-additive", task)
    spec = model_spec(model)
    assert spec["kind"] == "luong-additive" and spec["input_feeding"] is True
    state = model.state_dict()
    assert [name for name, _ in spec["tensors"]] == list(state)
    raw = np.frombuffer(__import__("base64").b64decode(spec["weights"]), dtype="<f4")
    flat = np.concatenate([t.numpy().ravel() for t in state.values()])
    np.testing.assert_array_equal(raw, flat)
    assert (spec["sos_id"], spec["eos_id"], spec["pad_id"]) == (
        task.target_vocab.sos_id,
        task.target_vocab.eos_id,
        task.target_vocab.pad_id,
    )


def test_translator_live_carries_models_vocabularies_and_a_snapshot() -> None:
    task = date_task()
    models = small_models(task)
    markup = sample_page(models, task)
    assert 'data-explorer="translator"' in markup and 'data-start="1"' in markup
    assert translator_script() in markup
    for name in ("seq2seq.js", "translator_explorer.js"):
        assert SEQ2SEQ_JS.with_name(name).read_text(encoding="utf-8") in markup
    assert attnlib.live.FALLBACK in markup
    expected = reference_steps(
        models["bahdanau"], "21.11.26", task.source_vocab, task.target_vocab
    ).text
    assert f"bahdanau: <code>{expected or '(nothing)'}</code>" in markup
    assert "none, step by step" in markup
    again = sample_page(models, task)
    assert again == markup, "the same models must give the same page (stored outputs)"


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"models": {}}, ValueError, "at least one model"),
        ({"models": []}, ValueError, "at least one model"),
        ({"models": {"x": "not a model"}}, TypeError, "must be an attnlib.seq2seq.Seq2Seq"),
        ({"models": {"": None}}, ValueError, "non-empty strings"),
        ({"example": ""}, ValueError, "example must be a non-empty string"),
        ({"example": "x" * 101}, ValueError, "at most 100"),
        ({"examples": ["ok", 5]}, ValueError, "examples[1]"),
        ({"start": "luong"}, ValueError, "start must name one of the models"),
        ({"max_steps": 0}, ValueError, "max_steps must be a positive integer"),
        ({"max_length": True}, ValueError, "max_length must be a positive integer"),
        ({"target": 5}, TypeError, "target must be a string"),
        ({"source_vocab": object()}, TypeError, "needs a list of symbols"),
    ],
)
def test_translator_live_refuses_bad_input(change: dict, error: type, message: str) -> None:
    task = date_task()
    arguments = {
        "models": small_models(task),
        "source_vocab": task.source_vocab,
        "target_vocab": task.target_vocab,
        "example": "21.11.26",
    } | change
    with pytest.raises(error, match=__import__("re").escape(message)):
        translator_live(**arguments)


def test_translator_live_refuses_models_of_other_vocabularies() -> None:
    task = date_task()
    models = small_models(task)
    other = CharVocab("abc")
    with pytest.raises(ValueError, match="reads 42 source symbols|reads .* source symbols"):
        translator_live(models, other, task.target_vocab, "abc")
    with pytest.raises(ValueError, match="writes .* target symbols"):
        translator_live(models, task.source_vocab, other, "21.11.26")
    shifted = CharVocab(task.target_vocab.itos[4:])
    shifted.eos_id, shifted.sos_id = shifted.sos_id, shifted.eos_id
    with pytest.raises(ValueError, match="has sos_id"):
        translator_live(models, task.source_vocab, shifted, "21.11.26")
    bad = CharVocab("abc")
    bad.unk_id = 99
    with pytest.raises(ValueError, match="unk_id must be one of its ids"):
        translator_live(models, bad, task.target_vocab, "abc")
    broken = untrained("bahdanau", task)
    with torch.no_grad():
        broken.decoder.output.bias[0] = float("nan")
    with pytest.raises(ValueError, match="decoder.output.bias holds 1 non-finite"):
        translator_live({"broken": broken}, task.source_vocab, task.target_vocab, "21.11.26")


def test_reference_steps_is_greedy_decode() -> None:
    task = date_task()
    model = untrained("luong-dot", task)
    for text in dates(task, 5):
        steps = reference_steps(model, text, task.source_vocab, task.target_vocab)
        decoded = model.greedy_decode(
            torch.tensor([task.source_vocab.encode(text)]), torch.tensor([len(text)])
        )
        assert steps.tokens == decoded.tokens[0].tolist()
        np.testing.assert_allclose(steps.weights, decoded.alignments[0].double().numpy(), atol=0)
        np.testing.assert_allclose(steps.probabilities.sum(-1), 1.0, atol=1e-12)
    texts = dates(task, 20)
    together = reference_steps_batch(model, texts, task.source_vocab, task.target_vocab)
    for text, batched in zip(texts, together, strict=True):
        alone = reference_steps(model, text, task.source_vocab, task.target_vocab)
        assert batched.tokens == alone.tokens and batched.text == alone.text
        np.testing.assert_allclose(batched.probabilities, alone.probabilities, atol=1e-6)
        np.testing.assert_allclose(batched.weights, alone.weights, atol=1e-6)
    with pytest.raises(ValueError, match="non-empty text"):
        reference_steps(model, "", task.source_vocab, task.target_vocab)


def test_the_page_json_is_what_seq2seq_js_reads() -> None:
    """The data-models attribute parses back to the specs (the page's own copy of them)."""
    import html as html_module
    import re

    task = date_task()
    models = small_models(task)
    markup = translator_live(models, task.source_vocab, task.target_vocab, "21.11.26").data
    found = re.search(r'data-models="([^"]*)"', markup)
    assert found
    specs = json.loads(html_module.unescape(found.group(1)))
    assert [s["name"] for s in specs] == list(models)
    assert specs[0]["weights"] == model_spec(models["bahdanau"])["weights"]


def test_a_page_gives_back_the_models_it_carries() -> None:
    task = date_task()
    models = {kind: untrained(kind, task, seed=50 + i) for i, kind in enumerate(MODEL_KINDS)}
    models["no feeding"] = untrained("luong-dot", task, seed=60, input_feeding=False)
    models["one direction"] = untrained("bahdanau", task, seed=61, bidirectional=False)
    for model in models.values():
        again = spec_model(model_spec(model), task.source_vocab, task.target_vocab)
        for (name, a), (_, b) in zip(
            model.state_dict().items(), again.state_dict().items(), strict=True
        ):
            assert torch.equal(a, b), name
    markup = translator_live(models, task.source_vocab, task.target_vocab, "21.11.26").data
    read, source, target = page_models(markup)
    assert list(read) == list(models)
    assert source.itos == task.source_vocab.itos and target.itos == task.target_vocab.itos
    for name, model in models.items():
        assert model_spec(read[name]) == model_spec(model), name
    with pytest.raises(ValueError, match="no translator explorer"):
        page_models("<div></div>")


@pytest.mark.parametrize("chapter", list(CHAPTERS))
def test_the_chapters_shipped_models_translate_as_pytorch_does(chapter: str) -> None:
    """The trained models stored in the chapter's page, on 200 of its test dates: node and
    PyTorch agree token for token and to 1e-5. The page carries the current scripts."""
    notebook, config = CHAPTERS[chapter]
    markup = stored_explorer(NOTEBOOKS / notebook, "translator")
    assert translator_script() in markup, (
        f"{notebook} stores an older seq2seq.js or translator_explorer.js: re-execute it"
    )
    models, source_vocab, target_vocab = page_models(markup)
    task = replace(prepare(config), source_vocab=source_vocab, target_vocab=target_vocab)
    texts = dates(task, 200) + TYPED
    largest = compare(models, task, texts)
    for name, (p, w) in largest.items():
        assert p <= FLOAT32_TOLERANCE and w <= FLOAT32_TOLERANCE, (name, p, w)
    # Trained: they write ISO dates, and stop.
    right = sum(
        s.text == target
        for s, (_, target) in zip(
            reference_steps_batch(
                next(iter(models.values())), texts[:200], source_vocab, target_vocab
            ),
            task.splits.test[:200],
            strict=True,
        )
    )
    assert right >= 100, f"the first model gets only {right} of 200 test dates right"


COPY_MARKS_HARNESS = """
const s2s = require(process.argv[1]);
const pairs = JSON.parse(require("fs").readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(pairs.map(([output, expected]) =>
  s2s.copyMarks(output, expected).map((wrong) => (wrong ? "^" : " ")).join(""))));
"""


def test_copy_marks_in_node_are_pythons() -> None:
    pairs = [("1234", "1234"), ("1243", "1234"), ("12", "1234"), ("12345", "1234"), ("", "7")]
    answers = node_answers(COPY_MARKS_HARNESS, [SEQ2SEQ_JS], pairs)
    assert answers == [copy_marks(output, expected) for output, expected in pairs]


def test_translator_live_copy_mode_marks_the_page_and_its_snapshot() -> None:
    task = prepare_copy(CopyTaskConfig(n_train=16, n_valid=4, n_test_per_length=1))
    models = {kind: untrained_copy(kind, task) for kind in ("none", "bahdanau")}
    markup = translator_live(models, task.vocab, task.vocab, "31415", expect="copy").data
    assert 'data-expect="copy"' in markup.split("<script>")[0]  # the root's, not the script's
    assert "copy any digits you type" in markup
    for name, model in models.items():
        output = reference_steps(model, "31415", task.vocab, task.vocab).text
        verdict = "(right)" if output == "31415" else "(wrong: the answer is 31415)"
        assert f"{name}: <code>{output or '(nothing)'}</code> {verdict}" in markup, name
    plain = translator_live(models, task.vocab, task.vocab, "31415").data
    assert "data-expect" not in plain.split("<script>")[0]
    assert "translate any date you type" in plain
    with pytest.raises(ValueError, match="expect must be None or one of"):
        translator_live(models, task.vocab, task.vocab, "31415", expect="reverse")
    dates = date_task()
    with pytest.raises(ValueError, match="one vocabulary for the source and the target"):
        translator_live(
            small_models(dates), dates.source_vocab, dates.target_vocab, "1.2.03", expect="copy"
        )


def untrained_copy(kind: str, task, seed: int = 0) -> torch.nn.Module:
    seed_everything(seed)
    return new_copy_model(kind, task).eval()


def test_chapter_03s_stored_copiers_copy_as_pytorch_does() -> None:
    """Chapter 03's stored copiers, on 200 of its test strings and longer ones: node and PyTorch
    agree token for token and to 1e-5; with attention, nearly every string comes out right."""
    markup = stored_explorer(NOTEBOOKS / COPIER, "translator")
    assert translator_script() in markup, (
        f"{COPIER} stores an older seq2seq.js or translator_explorer.js: re-execute it"
    )
    assert 'data-expect="copy"' in markup.split("<script>")[0]
    models, vocab, _ = page_models(markup)
    task = prepare_copy(CopyTaskConfig())
    texts = [source for source, _ in task.splits.test[::4]] + ["31415926535897932384", "7" * 30]
    largest = compare(models, task, texts, max_steps=41)
    for name, (p, w) in largest.items():
        assert p <= FLOAT32_TOLERANCE and w <= FLOAT32_TOLERANCE, (name, p, w)
    copies = {
        name: [s.text for s in reference_steps_batch(model, texts[:200], vocab, vocab, 41)]
        for name, model in models.items()
    }
    right = {
        name: sum(c == t for c, t in zip(out, texts, strict=False)) for name, out in copies.items()
    }
    assert max(right.values()) >= 180, right  # the model with attention copies nearly all
    assert min(right.values()) <= 150, right  # the one without falls on the long ones
