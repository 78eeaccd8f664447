"""Chapters 03-05's translators: the trained GRU seq2seq models, run in the reader's browser.

:func:`translator_live` returns the HTML of the explorer: a root element carrying the models'
weights and the two vocabularies in ``data-*`` attributes, and, for a page without JavaScript,
a snapshot of the models on one example (stored when the chapter ran); then an inline script
with the DOM helpers (``attention.js``, ``explorers.js``), ``seq2seq.js`` (the forward pass:
the GRU encoder, every decoder and score, greedy decoding) and ``translator_explorer.js`` (the
controls). A reader types a date and sees it translated, with its alignment, step by step; no
kernel is needed, so it works in the published book.

The weights travel as plain arrays, in the models' ``state_dict`` names and order: for each
model, its tensors' names and shapes, and one base64 string of their float32 values,
little-endian, one after the other (:func:`model_spec`). They are the models' own float32
values, so the browser computes with exactly the weights PyTorch does.
:func:`reference_steps` is the PyTorch side of the comparison: ``Seq2Seq.greedy_decode``'s loop,
keeping each step's probabilities, which ``tests/test_live_translator.py`` holds ``seq2seq.js``
to.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

import numpy as np
import torch
from IPython.display import HTML

from attnlib.live import FALLBACK, bundle, snippet
from attnlib.seq2seq import BahdanauDecoder, LuongDecoder, PlainDecoder, Seq2Seq

# What the explorer's own scripts need first: the DOM helpers (and the softmax port they sit on).
NEEDS = ("attention.js", "explorers.js")
OWN_SCRIPTS = ("seq2seq.js", "translator_explorer.js")
EXPLORER = "translator"
# The longest input the page translates: the dates of chapters 03-05 have at most 69 characters.
MAX_LENGTH = 100
MAX_STEPS = 20  # attnlib.tasks.dates.translate's default
EXPECTS = ("copy",)  # what an output is held to: "copy" (chapter 03), the input itself


def model_kind(model: Seq2Seq) -> str:
    """The kind of ``model`` as :func:`attnlib.seq2seq.build_model` names it."""
    decoder = model.decoder
    if isinstance(decoder, LuongDecoder):
        return f"luong-{decoder.score_name}"
    if isinstance(decoder, BahdanauDecoder):
        return "bahdanau"
    if isinstance(decoder, PlainDecoder):
        return "none"
    raise TypeError(f"the browser knows no decoder of type {type(decoder).__name__}")


def model_spec(model: Seq2Seq) -> dict:
    """The model as ``seq2seq.js`` reads it: its kind, special ids, every tensor of its
    ``state_dict`` as [name, shape] and their float32 values in one base64 string."""
    if not isinstance(model, Seq2Seq):
        raise TypeError(f"a model must be an attnlib.seq2seq.Seq2Seq, got {type(model).__name__}")
    kind = model_kind(model)
    if model.encoder.gru.num_layers != 1:
        raise ValueError(
            f"the browser runs one GRU layer, the encoder has {model.encoder.gru.num_layers}"
        )
    tensors, chunks = [], []
    for name, tensor in model.state_dict().items():
        values = tensor.detach().to("cpu", torch.float32).contiguous().numpy()
        if not np.isfinite(values).all():
            raise ValueError(f"{name} holds {int((~np.isfinite(values)).sum())} non-finite values")
        tensors.append([name, list(values.shape)])
        chunks.append(values.astype("<f4").tobytes())
    spec = {
        "kind": kind,
        "sos_id": int(model.sos_id),
        "eos_id": int(model.eos_id),
        "pad_id": int(model.pad_id),
        "tensors": tensors,
        "weights": base64.b64encode(b"".join(chunks)).decode("ascii"),
    }
    if isinstance(model.decoder, LuongDecoder):
        spec["input_feeding"] = bool(model.decoder.input_feeding)
    return spec


def spec_model(spec: Mapping, source_vocab, target_vocab) -> Seq2Seq:
    """The :class:`~attnlib.seq2seq.Seq2Seq` that :func:`model_spec` wrote ``spec`` from, on
    the two vocabularies (its sizes read off the tensors' shapes, its weights loaded): how the
    models of a page are read back."""
    from attnlib.seq2seq import build_model

    shapes = dict(spec["tensors"])
    hidden = shapes["encoder.bridge.weight"][0]
    model = build_model(
        spec["kind"],
        source_vocab,
        target_vocab,
        embedding_dim=shapes["encoder.embedding.weight"][1],
        hidden_size=hidden,
        attention_size=shapes.get("decoder.score.query_projection.weight", [hidden])[0],
        input_feeding=spec.get("input_feeding", True),
        bidirectional="encoder.gru.weight_hh_l0_reverse" in shapes,
    )
    values = np.frombuffer(base64.b64decode(spec["weights"]), dtype="<f4")
    state, offset = {}, 0
    for name, shape in spec["tensors"]:
        count = int(np.prod(shape, dtype=np.int64))
        state[name] = torch.from_numpy(values[offset : offset + count].reshape(shape).copy())
        offset += count
    if offset != values.size:
        raise ValueError(f"the weights hold {values.size} values, the tensors need {offset}")
    model.load_state_dict(state)
    return model.eval()


def page_models(markup: str) -> tuple[dict[str, Seq2Seq], object, object]:
    """The models and the (source, target) vocabularies of a translator's HTML, read back."""
    import re

    from attnlib.data.text import CharVocab

    found = {name: re.search(rf'data-{name}="([^"]*)"', markup) for name in ("models", "vocab")}
    if not all(found.values()):
        raise ValueError("no translator explorer in this HTML (data-models and data-vocab)")
    specs = json.loads(html.unescape(found["models"].group(1)))
    vocab = json.loads(html.unescape(found["vocab"].group(1)))
    vocabs = []
    for side in ("source", "target"):
        rebuilt = CharVocab(vocab[side]["itos"][4:])
        if rebuilt.itos != vocab[side]["itos"]:
            raise ValueError(f"the page's {side} vocabulary is not a CharVocab's")
        vocabs.append(rebuilt)
    models = {spec["name"]: spec_model(spec, *vocabs) for spec in specs}
    return models, vocabs[0], vocabs[1]


def vocab_spec(vocab) -> dict:
    """A character vocabulary as ``seq2seq.js`` reads it: its symbols and special ids."""
    itos = getattr(vocab, "itos", None)
    if not isinstance(itos, list) or not all(isinstance(s, str) for s in itos) or not itos:
        raise TypeError(f"a vocabulary needs a list of symbols (itos), got {type(vocab).__name__}")
    spec = {"itos": list(itos)}
    for name in ("pad_id", "sos_id", "eos_id", "unk_id"):
        value = getattr(vocab, name, None)
        if not isinstance(value, int) or not 0 <= value < len(itos):
            raise ValueError(f"the vocabulary's {name} must be one of its ids, got {value!r}")
        spec[name] = value
    return spec


def _check_fit(name: str, model: Seq2Seq, source_vocab, target_vocab) -> None:
    """Refuse a model whose embeddings or special ids do not fit the vocabularies."""
    source_rows = model.encoder.embedding.num_embeddings
    target_rows = model.decoder.embedding.num_embeddings
    if source_rows != len(source_vocab.itos):
        raise ValueError(
            f"model {name!r} reads {source_rows} source symbols, the source vocabulary has "
            f"{len(source_vocab.itos)}: was it trained with another vocabulary?"
        )
    if target_rows != len(target_vocab.itos):
        raise ValueError(
            f"model {name!r} writes {target_rows} target symbols, the target vocabulary has "
            f"{len(target_vocab.itos)}: was it trained with another vocabulary?"
        )
    for special in ("sos_id", "eos_id", "pad_id"):
        if getattr(model, special) != getattr(target_vocab, special):
            raise ValueError(
                f"model {name!r} has {special} {getattr(model, special)}, the target "
                f"vocabulary {getattr(target_vocab, special)}"
            )


@dataclass
class Steps:
    """A greedy translation step by step: ``tokens`` (steps,), ``probabilities`` (steps,
    target vocabulary) and ``weights`` (steps, source length) or None without attention."""

    text: str
    tokens: list[int]
    probabilities: np.ndarray
    weights: np.ndarray | None


@torch.no_grad()
def reference_steps_batch(
    model: Seq2Seq, texts: Sequence[str], source_vocab, target_vocab, max_steps: int = MAX_STEPS
) -> list[Steps]:
    """PyTorch's greedy translations of ``texts`` (one batch, padded), as
    ``Seq2Seq.greedy_decode`` runs them, keeping the softmax of each step's logits: each
    text's steps up to its end symbol (included) or ``max_steps``. What the browser must show."""
    if isinstance(texts, str) or not texts:
        raise ValueError("reference_steps_batch needs a list of at least one text")
    for text in texts:
        if not isinstance(text, str) or not text:
            raise ValueError("translate needs a non-empty text")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}")
    model.eval()
    device = next(model.parameters()).device
    ids = [source_vocab.encode(text) for text in texts]
    lengths = torch.tensor([len(row) for row in ids])
    source = torch.full((len(ids), int(lengths.max())), source_vocab.pad_id, dtype=torch.long)
    for row, row_ids in enumerate(ids):
        source[row, : len(row_ids)] = torch.tensor(row_ids, dtype=torch.long)
    decoder = model.decoder
    memory, state = model._start(source.to(device), lengths)
    token = torch.full((len(ids),), model.sos_id, device=device)
    finished = torch.zeros(len(ids), dtype=torch.bool, device=device)
    tokens, probabilities, weights = [], [], []
    for _ in range(max_steps):
        features, state, step_weights = decoder.advance(decoder.embedding(token), state, memory)
        logits = decoder.output(features)
        token = logits.argmax(-1)
        tokens.append(token.cpu())
        probabilities.append(torch.softmax(logits.double(), -1).cpu())
        if step_weights is not None:
            weights.append(step_weights.double().cpu())
        finished |= token == model.eos_id
        if bool(finished.all()):
            break
    all_tokens = torch.stack(tokens, 1).tolist()  # (batch, steps)
    all_probabilities = torch.stack(probabilities, 1).numpy()  # (batch, steps, vocab)
    all_weights = torch.stack(weights, 1).numpy() if weights else None  # (batch, steps, src)
    results = []
    for row, row_tokens in enumerate(all_tokens):
        steps = (
            row_tokens.index(model.eos_id) + 1 if model.eos_id in row_tokens else len(row_tokens)
        )
        results.append(
            Steps(
                target_vocab.decode(row_tokens[:steps]),
                row_tokens[:steps],
                all_probabilities[row, :steps],
                all_weights[row, :steps, : len(ids[row])] if all_weights is not None else None,
            )
        )
    return results


def reference_steps(
    model: Seq2Seq, text: str, source_vocab, target_vocab, max_steps: int = MAX_STEPS
) -> Steps:
    """:func:`reference_steps_batch` of one text: its greedy translation, step by step."""
    return reference_steps_batch(model, [text], source_vocab, target_vocab, max_steps)[0]


def _shown(symbol: str) -> str:
    return "␣" if symbol == " " else symbol


def snapshot(
    models: Mapping[str, Seq2Seq],
    example: str,
    source_vocab,
    target_vocab,
    start: str,
    target: str | None,
    max_steps: int,
    expect: str | None = None,
) -> str:
    """The explorer without JavaScript: each model's translation of ``example``, and the
    ``start`` model's steps in words (character, probability, the input it read most)."""
    lines = []
    for name, model in models.items():
        steps = reference_steps(model, example, source_vocab, target_vocab, max_steps)
        verdict = ""
        if target is not None:
            verdict = " (right)" if steps.text == target else f" (wrong: the answer is {target})"
        lines.append(
            f"<li>{html.escape(name)}: <code>{html.escape(steps.text) or '(nothing)'}</code>"
            f"{html.escape(verdict)}</li>"
        )
    first = reference_steps(models[start], example, source_vocab, target_vocab, max_steps)
    what = "copy any digits you type" if expect == "copy" else "translate any date you type"
    rows = []
    characters = list(example)
    for t, token in enumerate(first.tokens):
        symbol = target_vocab.itos[token]
        read = "no attention: the same summary of the whole input at every step"
        if first.weights is not None:
            order = np.argsort(-first.weights[t], kind="stable")[:3]
            read = ", ".join(
                f"“{html.escape(_shown(characters[j]))}” ({j + 1}) {first.weights[t][j]:.2f}"
                for j in order
            )
        rows.append(
            f"<tr><td>{t + 1}</td><td><code>{html.escape(symbol)}</code></td>"
            f"<td>{first.probabilities[t][token]:.3f}</td><td>{read}</td></tr>"
        )
    return (
        f"<p>{FALLBACK}</p>"
        f"<p><strong>With JavaScript, the trained models {what}, in your browser.</strong> "
        "Below is a snapshot stored when the chapter was executed.</p>"
        f"<p>Input: <code>{html.escape(example)}</code> ({len(characters)} characters)</p>"
        f"<ul>{''.join(lines)}</ul>"
        f"<table><caption>{html.escape(start)}, step by step</caption><thead><tr><th>step</th>"
        "<th>writes</th><th>probability</th><th>reads most (input character, position, weight)"
        f"</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


@cache
def translator_script() -> str:
    """The explorer's inline script: the shared DOM helpers, then its own two files, defined
    once per page, then every translator root mounted."""
    folder = resources.files("attnlib.live")
    own = []
    for name in OWN_SCRIPTS:
        text = folder.joinpath(name).read_text(encoding="utf-8")
        if "</script" in text.lower() or "<!--" in text:
            raise ValueError(f"{name} contains text that would end an inline <script>")
        own.append(text)
    body = "\n".join(own)
    version = hashlib.sha256(body.encode()).hexdigest()[:12]
    return (
        f"{bundle(NEEDS)}\n(function () {{\n"
        "var module;  // never a CommonJS module in a page\n"
        f"if (window.attnlibLive.translatorVersion !== {json.dumps(version)}) {{\n"
        f"{body}\n"
        f"window.attnlibLive.translatorVersion = {json.dumps(version)};\n"
        "}\n"
        "window.attnlibLive.mountAll(document);\n})();"
    )


def _check_text(name: str, text: object, max_length: int) -> str:
    if not isinstance(text, str) or not text:
        raise ValueError(f"{name} must be a non-empty string, got {text!r}")
    if len(text) > max_length:
        raise ValueError(
            f"{name} has {len(text)} characters; the explorer takes at most {max_length}"
        )
    return text


def translator_live(
    models: Mapping[str, Seq2Seq],
    source_vocab,
    target_vocab,
    example: str,
    *,
    target: str | None = None,
    start: str | None = None,
    examples: Sequence[str] = (),
    max_steps: int = MAX_STEPS,
    max_length: int = MAX_LENGTH,
    expect: str | None = None,
) -> HTML:
    """The live translator for ``models`` (name -> trained :class:`~attnlib.seq2seq.Seq2Seq`,
    all on the two vocabularies), opening on ``example`` (whose right translation ``target``
    the snapshot may name) with the model ``start`` (default: the first). ``examples`` are
    more dates offered in a list beside the text box. Inputs of up to ``max_length``
    characters are translated, with at most ``max_steps`` output steps (as
    :func:`attnlib.tasks.dates.translate`). With ``expect="copy"`` (chapter 03's copy task) the
    right output is the input: the page shows every model's copy with its wrong characters
    marked (:func:`attnlib.tasks.copy.copy_marks`), and ``target`` is the example."""
    if not isinstance(models, Mapping) or not models:
        raise ValueError("translator_live needs a dict of at least one model: name -> Seq2Seq")
    for name in models:
        if not isinstance(name, str) or not name:
            raise ValueError(f"model names must be non-empty strings, got {name!r}")
    for key, value in (("max_steps", max_steps), ("max_length", max_length)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a positive integer, got {value!r}")
    source_spec, target_spec = vocab_spec(source_vocab), vocab_spec(target_vocab)
    specs = []
    for name, model in models.items():
        spec = model_spec(model)  # refuses what is not a Seq2Seq first
        _check_fit(name, model, source_vocab, target_vocab)
        specs.append({"name": name, **spec})
    example = _check_text("example", example, max_length)
    extra = [_check_text(f"examples[{i}]", text, max_length) for i, text in enumerate(examples)]
    if start is None:
        start = next(iter(models))
    if start not in models:
        raise ValueError(f"start must name one of the models {list(models)}, got {start!r}")
    if target is not None and not isinstance(target, str):
        raise TypeError(f"target must be a string or None, got {type(target).__name__}")
    if expect is not None and expect not in EXPECTS:
        raise ValueError(f"expect must be None or one of {list(EXPECTS)}, got {expect!r}")
    if expect == "copy":
        if source_vocab.itos != target_vocab.itos:
            raise ValueError("expect='copy' needs one vocabulary for the source and the target")
        target = example if target is None else target
    attributes = {
        "models": json.dumps(specs, separators=(",", ":")),
        "vocab": json.dumps(
            {"source": source_spec, "target": target_spec},
            separators=(",", ":"),
            ensure_ascii=False,
        ),
        "example": example,
        "examples": json.dumps(extra, ensure_ascii=False),
        "start": str(list(models).index(start)),
        "max-steps": str(max_steps),
        "max-length": str(max_length),
    }
    if expect is not None:
        attributes["expect"] = expect
    fallback = snapshot(
        models, example, source_vocab, target_vocab, start, target, max_steps, expect
    )
    return HTML(snippet(EXPLORER, attributes, fallback, translator_script()))
