"""Chapter 13's browser model computes what the Python model computes: one source of truth.

attnlib/live/imdb.js (tokenizer, safetensors reader, forward pass) and the WebAssembly kernel
(attnlib/live/linear.wat, assembled into linear.wasm) run in node on the shipped model; the tokens
must be identical to ``tokenizers``' and P(positive) equal to the PyTorch model's to 1e-4. Crafted
texts run on every machine; a few hundred real test reviews run where ATTNLIB_DATA points at the
IMDB archive.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch

import attnlib.live
from attnlib.live import wasm
from attnlib.live.imdb import (
    EXAMPLE,
    SERVED_FILES,
    download_size,
    files_hash,
    imdb_live,
    imdb_script,
    shown_token,
)
from attnlib.tasks import imdb as task
from attnlib.tasks.imdb_train import SHIPPED_MODEL, load_trained
from tests.helpers import TOKENIZER_TEXTS, node_answers

LIVE = Path(attnlib.live.__file__).parent
IMDB_JS = LIVE / "imdb.js"
NODE = shutil.which("node") or ("/usr/bin/node" if Path("/usr/bin/node").is_file() else None)
# wabt's assembler, installed by `npm ci` (make lint does it first, so CI always has it).
WAT2WASM = Path(__file__).resolve().parent.parent / "node_modules" / "wabt" / "bin" / "wat2wasm"
TOLERANCE = 1e-4
REAL = os.environ.get("ATTNLIB_DATA", "")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")

# argv: imdb.js, the model's folder. stdin: {"wasm": base64 or null, "texts": [...],
# "tokenize": [...], "timed": [...], "analyse": [any JSON], "safetensors": [{file, base64}],
# "display": [tokens], "linear": [...cases]}. stdout: {"backend", "reviews": [{ids, tokens,
# probability}], "tokenized": [{ids, tokens}], "timed": [{ids, ms}], "analysed": [{error} or
# {probability}], "safetensors": [{error} or {names}], "display": [...], "linear": [...]}.
HARNESS = """
const fs = require("fs");
const imdb = require(process.argv[2]);
const folder = process.argv[3];
const input = JSON.parse(fs.readFileSync(0, "utf8"));
const wasm = input.wasm ? Buffer.from(input.wasm, "base64") : null;
const out = { reviews: [], tokenized: [], timed: [], analysed: [], safetensors: [], linear: [] };
const tokenizerJson = JSON.parse(fs.readFileSync(folder + "/tokenizer.json"));
const tokenizer = new imdb.Tokenizer(tokenizerJson);
const failure = (error) => ({ error: { name: error.name, message: error.message } });
for (const text of input.tokenize || []) {
  const e = tokenizer.encode(text);
  out.tokenized.push({ ids: e.ids, tokens: e.tokens });
}
for (const text of input.timed || []) {
  const fresh = new imdb.Tokenizer(tokenizerJson);  // nothing cached
  const start = performance.now();
  const e = fresh.encode(text);
  out.timed.push({ ms: performance.now() - start, ids: e.ids });
}
out.display = (input.display || []).map((token) => tokenizer.display(token));
for (const file of input.safetensors || []) {
  try {
    const tensors = imdb.readSafetensors(Buffer.from(file.base64, "base64"), file.file);
    out.safetensors.push({ names: Object.keys(tensors) });
  } catch (error) {
    out.safetensors.push(failure(error));
  }
}
if ((input.texts || []).length || (input.analyse || []).length) {
  const config = JSON.parse(fs.readFileSync(folder + "/config.json"));
  const tensors = imdb.readSafetensors(fs.readFileSync(folder + "/model.safetensors"));
  const model = new imdb.Classifier(tensors, config, { wasm });
  out.backend = model.backendName;
  for (const text of input.texts || []) {
    const r = imdb.analyse(model, tokenizer, text);
    const received = imdb.attentionReceived(r.weights[r.weights.length - 1][0], r.ids.length);
    out.reviews.push({ ids: r.ids, tokens: r.tokens, probability: r.probability,
                       dropped: r.dropped, lastHead0Received: received,
                       firstWeights: Array.from(r.weights[0][0].slice(0, 4)) });
  }
  for (const value of input.analyse || []) {
    try {
      out.analysed.push({ probability: imdb.analyse(model, tokenizer, value).probability });
    } catch (error) {
      out.analysed.push(failure(error));
    }
  }
  out.emptyReview = imdb.EMPTY_REVIEW;
}
const backend = imdb.wasmBackend(wasm);
for (const c of input.linear || []) {
  const x = Float32Array.from(c.x), w = Float32Array.from(c.w), b = Float32Array.from(c.b);
  try {
    const js = imdb.linear(x, c.n, c.inputs, w, b, c.outputs);
    const layer = { weightAddress: backend.upload(w), biasAddress: backend.upload(b) };
    const fast = backend.linear(x, c.n, c.inputs, layer, c.outputs);
    out.linear.push({ js: Array.from(js), wasm: Array.from(fast) });
  } catch (error) {
    out.linear.push({ error: error.message });
  }
}
process.stdout.write(JSON.stringify(out));
"""


def run_node(payload: dict, tmp_path: Path, timeout: float = 900) -> dict:
    """Run the harness on ``payload``; return its answer (fails with node's stderr)."""
    script = tmp_path / "harness.js"
    script.write_text(HARNESS)
    result = subprocess.run(
        [NODE, str(script), str(IMDB_JS), str(SHIPPED_MODEL)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


@cache
def shipped():
    """The shipped classifier (float32, eval) and its tokenizer and config."""
    model, tokenizer, config, _ = load_trained(SHIPPED_MODEL)
    return model, tokenizer, config


def python_probabilities(texts: list[str]) -> tuple[list[np.ndarray], np.ndarray]:
    """[CLS]-led ids and P(positive) of each text, by the PyTorch model, one review a batch."""
    model, tokenizer, config = shipped()
    reviews = task.encode_reviews(tokenizer, texts, config.max_len, config.head_tokens)
    with torch.no_grad():
        probabilities = [
            float(model(torch.as_tensor(ids, dtype=torch.long)[None])[0].softmax(-1)[0, 1])
            for ids in reviews
        ]
    return reviews, np.array(probabilities)


def check_reviews(texts: list[str], answer: dict) -> float:
    """Tokens identical, probabilities within TOLERANCE; returns the largest difference."""
    _, tokenizer, _ = shipped()
    reviews, expected = python_probabilities(texts)
    assert len(answer["reviews"]) == len(texts)
    for text, ids, got in zip(texts, reviews, answer["reviews"], strict=True):
        assert got["ids"] == ids.tolist(), f"ids differ for {text[:80]!r}"
        assert got["tokens"] == [tokenizer.id_to_token(int(i)) for i in ids]
    got = np.array([review["probability"] for review in answer["reviews"]])
    difference = np.abs(got - expected)
    worst = int(difference.argmax())
    assert difference.max() < TOLERANCE, f"{difference.max():.2e} at {texts[worst][:80]!r}"
    return float(difference.max())


# Texts that exercise each step of the pipeline: <br />, accents, special tokens typed as text,
# punctuation runs, digits, underscores, scripts and symbols the vocabulary never saw.
CRAFTED = [
    EXAMPLE,
    "the film was good",
    "the film was not bad",
    "Terrible.<br /><br />Just terrible!!! 0/10, would NOT watch again...",
    *TOKENIZER_TEXTS,
    # A spacing combining mark (Mc) is stripped; <br> with Rust's whitespace, not JavaScript's.
    "ka\u093e and a<br\x85/>b and c<br\ufeff/>d",
    "a",
    "!",
    "   ",
]
LONG = " ".join(["An endless review that keeps going, sentence after sentence."] * 70) + " Great!"


@needs_node
def test_tokenizer_matches_tokenizers_on_crafted_texts(tmp_path):
    _, tokenizer, _ = shipped()
    answer = run_node({"tokenize": CRAFTED + [LONG]}, tmp_path)
    for text, got in zip(CRAFTED + [LONG], answer["tokenized"], strict=True):
        assert got["ids"] == tokenizer.encode(text), text
        assert got["tokens"] == tokenizer.tokens(text), text
    # The specials typed as text come out as their own ids, as in `tokenizers`.
    assert set(answer["tokenized"][5]["ids"]) >= {0, 1, 2, 3, 4}


# One pre-token of 200,000 characters (a pasted run with no space), and shorter ones: the
# merge loop was quadratic in a pre-token's length (20,000 characters took seconds, 200,000
# froze the tab); with a heap over a linked list of symbols it is O(n log n).
BPE_TIME_LIMIT_MS = 5000


def pasted_run(length: int) -> str:
    """``length`` characters of letters with no space, as a paste from a broken page."""
    words = "supercalifragilisticexpialidociousandthenwonderfullyterribleactingbyeveryone"
    return (words * (length // len(words) + 1))[:length]


@needs_node
def test_tokenizer_is_fast_and_equal_to_tokenizers_on_a_200000_character_word(tmp_path):
    _, tokenizer, _ = shipped()
    texts = [pasted_run(n) for n in (2_500, 20_000, 200_000)] + ["a" * 200_000]
    answer = run_node({"timed": texts}, tmp_path, timeout=120)
    for text, got in zip(texts, answer["timed"], strict=True):
        assert got["ids"] == tokenizer.encode(text), f"{len(text)} characters"
    slowest = max(got["ms"] for got in answer["timed"])
    assert slowest < BPE_TIME_LIMIT_MS, f"a long pre-token took {slowest:.0f} ms"


@needs_node
def test_tokens_shown_without_their_end_of_word_suffix(tmp_path):
    tokens = ["not</w>", "terr", "[CLS]", "[UNK]", "</w>", "!</w>"]
    answer = run_node({"display": tokens}, tmp_path)
    assert answer["display"] == [
        {"text": "not", "wordEnd": True},
        {"text": "terr", "wordEnd": False},
        {"text": "[CLS]", "wordEnd": True},
        {"text": "[UNK]", "wordEnd": True},
        {"text": "</w>", "wordEnd": False},
        {"text": "!", "wordEnd": True},
    ]
    assert [shown_token(token) for token in tokens] == [
        (d["text"], d["wordEnd"]) for d in answer["display"]
    ], "the snapshot (Python) and the explorer (JavaScript) must show tokens alike"


@needs_node
def test_analyse_refuses_empty_reviews_and_non_strings(tmp_path):
    empty = ["", "   ", "\n\t \u00a0", "<br /><br />"]
    others = [42, None, ["a review"], {"text": "a review"}, True]
    answer = run_node({"analyse": [*empty, *others, "good"]}, tmp_path)
    *refused, good = answer["analysed"]
    for text, got in zip(empty, refused[: len(empty)], strict=True):
        assert got["error"]["name"] == answer["emptyReview"], repr(text)
        assert "no words to read" in got["error"]["message"], repr(text)
    kinds = ["number", "null", "array", "object", "boolean"]
    for kind, got in zip(kinds, refused[len(empty) :], strict=True):
        assert got["error"] == {
            "name": "TypeError",
            "message": f"text must be a string, got {kind}",
        }
    assert 0 < good["probability"] < 1


def safetensors_bytes(header: bytes) -> str:
    """A file of ``header`` with its 8-byte length in front, as base64."""
    return base64.b64encode(len(header).to_bytes(8, "little") + header).decode("ascii")


@needs_node
def test_safetensors_errors_name_the_file(tmp_path):
    files = [
        {"file": "model.safetensors", "base64": safetensors_bytes(b"<html>not found</html>")},
        {"file": "model.safetensors", "base64": safetensors_bytes(b"[1, 2]")},
        {"file": "weights.bin", "base64": base64.b64encode(b"1234").decode("ascii")},
        {"file": "ok.safetensors", "base64": safetensors_bytes(b'{"__metadata__": {}}')},
    ]
    answer = run_node({"safetensors": files}, tmp_path)
    not_json, not_object, short, ok = answer["safetensors"]
    assert not_json["error"]["message"].startswith(
        "model.safetensors is not a safetensors file: its header is not JSON ("
    )
    assert not_json["error"]["name"] == "Error"
    assert not_object["error"]["message"] == (
        "model.safetensors is not a safetensors file: its header is not a JSON object"
    )
    assert short["error"]["message"] == "weights.bin is not a safetensors file: 4 bytes"
    assert ok == {"names": []}


@needs_node
def test_browser_model_matches_python_on_crafted_texts(tmp_path):
    texts = [text for text in CRAFTED if text.strip()] + [LONG]
    answer = run_node({"wasm": wasm.linear_module_base64(), "texts": texts}, tmp_path)
    assert answer["backend"] == "WebAssembly SIMD"
    check_reviews(texts, answer)
    long_review = answer["reviews"][-1]
    assert len(long_review["ids"]) == 512 and long_review["dropped"] > 0
    # What the explorer shows of the attention: the mean over queries sums to one.
    for review in answer["reviews"]:
        assert abs(sum(review["lastHead0Received"]) - 1.0) < 1e-5


@needs_node
def test_plain_javascript_path_matches_too(tmp_path):
    answer = run_node({"wasm": None, "texts": [EXAMPLE, "the film was not good"]}, tmp_path)
    assert answer["backend"] == "JavaScript"
    check_reviews([EXAMPLE, "the film was not good"], answer)


@needs_node
def test_attention_weights_match_python(tmp_path):
    model, tokenizer, config = shipped()
    answer = run_node({"wasm": wasm.linear_module_base64(), "texts": [EXAMPLE]}, tmp_path)
    reading = task.read_review(model, tokenizer, EXAMPLE, config.max_len, config.head_tokens)
    assert reading.tokens == answer["reviews"][0]["tokens"]
    np.testing.assert_allclose(
        answer["reviews"][0]["firstWeights"], reading.weights[0, 0, 0, :4].numpy(), atol=1e-5
    )
    received = reading.weights[-1, 0].mean(dim=0).numpy()
    np.testing.assert_allclose(answer["reviews"][0]["lastHead0Received"], received, atol=1e-5)


def linear_case(rng: np.random.Generator, n: int, inputs: int, outputs: int) -> dict:
    return {
        "n": n,
        "inputs": inputs,
        "outputs": outputs,
        "x": rng.normal(size=n * inputs).tolist(),
        "w": rng.normal(size=outputs * inputs).tolist(),
        "b": rng.normal(size=outputs).tolist(),
    }


@needs_node
def test_wasm_kernel_equals_numpy_and_plain_javascript(tmp_path):
    rng = np.random.default_rng(0)
    cases = [linear_case(rng, n, i, o) for n, i, o in ((1, 4, 1), (7, 8, 5), (12, 64, 33))]
    cases.append(linear_case(rng, 3, 6, 2))  # 6 inputs: not a multiple of 4
    answer = run_node({"wasm": wasm.linear_module_base64(), "linear": cases}, tmp_path)
    for case, got in zip(cases[:3], answer["linear"][:3], strict=True):
        x = np.array(case["x"], dtype=np.float32).reshape(case["n"], case["inputs"])
        w = np.array(case["w"], dtype=np.float32).reshape(case["outputs"], case["inputs"])
        expected = (x @ w.T + np.array(case["b"], dtype=np.float32)).ravel()
        np.testing.assert_allclose(got["wasm"], expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["js"], expected, rtol=1e-5, atol=1e-5)
    assert answer["linear"][3] == {
        "error": "the WebAssembly kernel needs inputs divisible by 4, got 6"
    }


# A tiny classifier made in node (weights from sin, so no file is read): each case builds one
# from its config, with or without the kernel, and predicts its ids; answers or the error.
TINY_HARNESS = """
const imdb = require(process.argv[1]);
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
function tensorsFor(c) {
  const t = {}, d = c.d_model, ff = c.d_ff;
  const put = (name, count) => {
    t[name] = { shape: [count], data: Float32Array.from({ length: count }, (_, i) =>
      Math.sin(i + count) / 4) };
  };
  put("encoder.embedding.weight", c.vocab_size * d);
  for (let l = 0; l < c.num_layers; l++) {
    const p = "encoder.layers." + l + ".";
    for (const n of ["norm1", "norm2"]) { put(p + n + ".weight", d); put(p + n + ".bias", d); }
    for (const n of ["query", "key", "value", "output"]) {
      put(p + "attention." + n + "_projection.weight", d * d);
      put(p + "attention." + n + "_projection.bias", d);
    }
    put(p + "feed_forward.linear1.weight", ff * d); put(p + "feed_forward.linear1.bias", ff);
    put(p + "feed_forward.linear2.weight", d * ff); put(p + "feed_forward.linear2.bias", d);
  }
  put("encoder.final_norm.weight", d); put("encoder.final_norm.bias", d);
  put("head.weight", 2 * d); put("head.bias", 2);
  return t;
}
const answers = cases.map((c) => {
  try {
    const wasm = c.wasm ? Buffer.from(c.wasm, "base64") : null;
    const model = new imdb.Classifier(tensorsFor(c.config), c.config, { wasm });
    const ids = c.typed ? Int32Array.from(c.ids) : c.ids;
    return { backend: model.backendName, probabilities: model.predict(ids).probabilities };
  } catch (error) {
    return { error: { name: error.name, message: error.message } };
  }
});
process.stdout.write(JSON.stringify(answers));
"""
TINY = {"vocab_size": 10, "max_len": 16, "d_model": 8, "num_heads": 2, "num_layers": 1}
TINY |= {"d_ff": 16, "norm_first": True}


def tiny_answers(cases: list[dict]) -> list[dict]:
    """Each case ({config?, ids, wasm?, typed?}) through TINY_HARNESS in one node process."""
    full = [{"config": TINY, "wasm": None, **case} for case in cases]
    return node_answers(TINY_HARNESS, [IMDB_JS], full, timeout=60)


def test_predict_refuses_ids_that_are_not_integers_naming_the_element():
    cases = [{"ids": ids} for ids in ([2, "7"], None, [1, 2.5], {"0": 1}, "12", [1, 2])]
    cases.append({"ids": [1, 2], "typed": True})
    *refused, good, typed = tiny_answers(cases)
    expected = [
        'ids[1] = "7" (string)',
        "null",
        "ids[1] = 2.5 (number)",
        "object",
        "string",
    ]
    for got, given in zip(refused, expected, strict=True):
        message = f"ids must be an array of integer token ids, got {given}"
        assert got["error"] == {"name": "TypeError", "message": message}
    assert good == typed and abs(sum(good["probabilities"]) - 1) < 1e-6


def test_classifier_refuses_heads_that_do_not_divide_d_model_by_its_config_fields():
    config = {**TINY, "d_model": 256, "num_heads": 3}
    halves = {**TINY, "num_heads": 2.5}
    bad, half = tiny_answers(
        [{"config": config, "ids": [1], "wasm": wasm.linear_module_base64()}, {"config": halves}]
    )
    assert bad["error"]["message"] == (
        "config.d_model (256) must be divisible by config.num_heads (3): each head reads "
        "d_model / num_heads features"
    )
    assert half["error"]["message"] == "config.num_heads must be a positive integer, got 2.5"


def test_heads_narrower_than_the_kernel_reads_run_in_javascript():
    kernel = wasm.linear_module_base64()
    narrow = {**TINY, "num_heads": 4}  # heads of 2 features: the kernel reads 4 at a time
    fast, plain, narrow_with_kernel = tiny_answers(
        [
            {"ids": [1, 2, 3], "wasm": kernel},
            {"ids": [1, 2, 3], "config": narrow},
            {"ids": [1, 2, 3], "config": narrow, "wasm": kernel},
        ]
    )
    assert fast["backend"] == "WebAssembly SIMD" and narrow_with_kernel["backend"] == "JavaScript"
    assert narrow_with_kernel["probabilities"] == plain["probabilities"]


def test_wasm_module_is_the_committed_file():
    module = wasm.linear_module()
    assert module[:8] == b"\x00asm\x01\x00\x00\x00"
    assert module == (LIVE / wasm.MODULE).read_bytes()
    assert base64.b64decode(wasm.linear_module_base64()) == module
    assert len(module) < 1024
    assert (LIVE / wasm.SOURCE).is_file(), "the kernel's source ships beside its bytes"


@needs_node
@pytest.mark.skipif(
    not WAT2WASM.is_file(), reason="wabt is not installed: run `npm ci` (make lint does)"
)
def test_wasm_module_is_the_assembled_wat(tmp_path):
    assembled = tmp_path / "linear.wasm"
    subprocess.run(
        [NODE, str(WAT2WASM), str(LIVE / wasm.SOURCE), "-o", str(assembled)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert assembled.read_bytes() == wasm.linear_module(), (
        "attnlib/live/linear.wasm is not linear.wat assembled: run `npm run wasm`, commit both"
    )


def test_imdb_live_markup_is_self_contained_and_stable():
    markup = imdb_live().data
    assert 'data-explorer="imdb"' in markup and 'data-base="../_static/imdb/"' in markup
    assert f'data-size="{download_size(SHIPPED_MODEL)}"' in markup
    assert markup.count("</script>") == 1 and 'src="http' not in markup
    assert imdb_script() in markup
    for name in attnlib.live.IMDB_SCRIPTS:
        assert attnlib.live.script_source(name) in markup
    assert wasm.linear_module_base64() in markup
    assert "P(positive) = " in markup and "data:image/png;base64," in markup
    assert imdb_live().data == markup, "the snippet must be the same every time"


def test_imdb_live_snapshot_shows_word_ends_not_the_suffix():
    markup = imdb_live("the film was not bad").data
    snapshot = markup[: markup.index("<script>")]
    assert '<code title="not&lt;/w&gt;">not</code> <code title="bad&lt;/w&gt;">bad</code>' in (
        snapshot
    )
    assert "&lt;/w&gt;</code>" not in snapshot and "</w>" not in snapshot


def test_imdb_live_snapshot_shows_pythons_prediction():
    model, tokenizer, config = shipped()
    reading = task.read_review(
        model, tokenizer, "the film was bad", config.max_len, config.head_tokens
    )
    markup = imdb_live("the film was bad").data
    assert f"P(positive) = {reading.probability:.4f}" in markup
    verdict = re.search(r"Prediction: <strong>(\w+)</strong>", markup).group(1)
    assert verdict == ("positive" if reading.probability >= 0.5 else "negative")
    assert f"{len(reading.tokens)} tokens:" in markup


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": "  "}, "text must be a non-empty review"),
        ({"layer": 6}, r"layer must be in \[-6, 6\), got 6"),
        ({"head": 4}, r"head must be in \[0, 4\), got 4"),
    ],
)
def test_imdb_live_refuses_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        imdb_live(**kwargs)


def test_download_size_names_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="lacks config.json, tokenizer.json"):
        download_size(tmp_path)
    for name in SERVED_FILES:
        (tmp_path / name).write_bytes(b"12345")
    assert download_size(tmp_path) == 15


def test_files_hash_names_the_served_bytes(tmp_path):
    # The browser keeps the model in a cache named after this hash: new bytes, a new name.
    for name in SERVED_FILES:
        (tmp_path / name).write_bytes(name.encode())
    first = files_hash(tmp_path)
    assert re.fullmatch(r"[0-9a-f]{16}", first) and files_hash(tmp_path) == first
    (tmp_path / "model.safetensors").write_bytes(b"other weights")
    assert files_hash(tmp_path) != first
    assert f'data-hash="{files_hash(SHIPPED_MODEL)}"' in imdb_live().data
    (tmp_path / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="lacks config.json"):
        files_hash(tmp_path)


def test_read_review_cuts_like_encode_reviews():
    model, tokenizer, config = shipped()
    reading = task.read_review(model, tokenizer, LONG, config.max_len, config.head_tokens)
    (expected,) = task.encode_reviews(tokenizer, [LONG], config.max_len, config.head_tokens)
    assert reading.ids.tolist() == expected.tolist() and reading.tokens[0] == "[CLS]"
    assert tuple(reading.weights.shape) == (config.num_layers, config.num_heads, 512, 512)
    with pytest.raises(TypeError, match="text must be a str, got int"):
        task.read_review(model, tokenizer, 3, config.max_len, config.head_tokens)


@pytest.mark.parametrize("text", ["", "   ", "<br /><br />"])
def test_read_review_refuses_a_review_without_words(text):
    model, tokenizer, config = shipped()
    with pytest.raises(ValueError, match="the review holds no words to read"):
        task.read_review(model, tokenizer, text, config.max_len, config.head_tokens)


# --- a few hundred real test reviews ------------------------------------------------------------

needs_real = pytest.mark.skipif(
    not REAL or not Path(REAL).exists(), reason="ATTNLIB_DATA does not point at the IMDB archive"
)


def real_sample(texts: list[str], short: int, long: int, seed: int = 0) -> list[str]:
    """``short`` reviews drawn from the shortest tenth and ``long`` from all, by seed."""
    rng = np.random.default_rng(seed)
    lengths = np.array([len(text) for text in texts])
    shortest = np.flatnonzero(lengths <= np.quantile(lengths, 0.1))
    chosen = list(rng.choice(shortest, short, replace=False)) + list(
        rng.choice(len(texts), long, replace=False)
    )
    return [texts[i] for i in chosen]


@needs_node
@needs_real
def test_browser_model_matches_python_on_real_reviews(tmp_path, capsys):
    from attnlib.data.imdb import load_imdb

    texts = load_imdb(progress=False).test.texts
    reviews = real_sample(texts, short=190, long=10)
    tokenized = real_sample(texts, short=0, long=2000, seed=1)
    answer = run_node(
        {"wasm": wasm.linear_module_base64(), "texts": reviews, "tokenize": tokenized}, tmp_path
    )
    _, tokenizer, _ = shipped()
    for text, got in zip(tokenized, answer["tokenized"], strict=True):
        assert got["ids"] == tokenizer.encode(text), text[:200]
    worst = check_reviews(reviews, answer)
    with capsys.disabled():
        print(f"\n200 real reviews: largest |P_browser - P_python| = {worst:.2e}")
