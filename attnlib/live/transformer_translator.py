"""Chapter 14's explorer: the encoder-decoder Transformer translating dates in the browser.

:func:`transformer_translator_live` returns the HTML of the explorer: a root element carrying the
model's weights (base64 float32, in a fixed order named by a manifest), its configuration and
vocabularies in ``data-*`` attributes, and, for a page without JavaScript, a snapshot of the
example's translation; then an inline script with ``attention.js``, ``explorers.js`` (the DOM
helpers), ``transformer_translator.js`` (the forward pass and greedy decoding, a port of
:mod:`attnlib.generation` checked against PyTorch by ``tests/test_live_transformer_translator.py``)
and ``transformer_translator_explorer.js`` (the controls). It needs no kernel.
"""

from __future__ import annotations

import base64
import html
import io

import numpy as np
import torch
from IPython.display import HTML
from torch import nn

from attnlib.data.text import CharVocab
from attnlib.generation import EncoderDecoder, greedy_decode
from attnlib.live import _json, bundle, snippet

SCRIPTS = (
    "attention.js",
    "explorers.js",
    "transformer_translator.js",
    "transformer_translator_explorer.js",
)
MAX_STEPS = 20  # as attnlib.tasks.dates_transformer.cross_attention decodes
EXAMPLE = "25 august 1963"


def _encoder_decoder(model: nn.Module) -> EncoderDecoder:
    """The EncoderDecoder of a DateTransformer (its ``.model``), or the model itself."""
    inner = getattr(model, "model", model)
    if not isinstance(inner, EncoderDecoder):
        raise TypeError(
            f"model must be an EncoderDecoder or a DateTransformer, got {type(model).__name__}"
        )
    return inner


def _check_supported(model: EncoderDecoder, source_vocab: object, target_vocab: object) -> None:
    """Refuse what the browser port does not implement, and vocabularies of other sizes."""
    config = model.config
    if config.activation != "relu":
        raise ValueError(
            f"the browser port runs relu feed-forwards only, got {config.activation!r}"
        )
    if config.num_kv_heads not in (None, config.num_heads):
        raise ValueError(
            f"the browser port has one key/value head per query head, got num_kv_heads="
            f"{config.num_kv_heads} for num_heads={config.num_heads}"
        )
    for name, vocab, size in (
        ("source_vocab", source_vocab, config.vocab_size),
        ("target_vocab", target_vocab, model.target_config.vocab_size),
    ):
        if not isinstance(vocab, CharVocab):
            raise TypeError(f"{name} must be a CharVocab, got {type(vocab).__name__}")
        if len(vocab) != size:
            raise ValueError(f"{name} has {len(vocab)} symbols but the model's has {size}")


def packed_weights(model: EncoderDecoder) -> tuple[str, list[list]]:
    """Every tensor the browser needs, as base64 float32 (little-endian) and its manifest
    [[name, shape], ...] in order; a tied output weight is sent once, as the embedding."""
    parts, manifest = [], []
    for name, tensor in model.state_dict().items():
        if name == "output.weight" and model.tie_weights:
            continue
        array = tensor.detach().cpu().to(torch.float32).numpy().astype("<f4")
        parts.append(array.tobytes())
        manifest.append([name, list(array.shape)])
    return base64.b64encode(b"".join(parts)).decode("ascii"), manifest


def browser_config(
    model: EncoderDecoder, source_vocab: CharVocab, target_vocab: CharVocab
) -> dict[str, object]:
    """What ``transformer_translator.js`` needs besides the weights."""
    c = model.config
    return {
        "d_model": c.d_model,
        "num_heads": c.num_heads,
        "num_layers": c.num_layers,
        "d_ff": c.d_ff,
        "max_len": c.max_len,
        "positions": c.positions,
        "norm_first": c.norm_first,
        "layer_norm_eps": model.decoder.layers[0].norm1.eps,
        "tie_weights": model.tie_weights,
        "max_steps": MAX_STEPS,
        "source_vocab": source_vocab.itos,
        "target_vocab": target_vocab.itos,
    }


def translate_with_weights(
    model: EncoderDecoder, text: str, source_vocab: CharVocab, target_vocab: CharVocab
) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Greedy tokens up to and including ``</s>``, probabilities (steps, vocab) and
    cross-attention (layers, heads, steps, src): what the browser computes, from PyTorch."""
    source = torch.tensor([source_vocab.encode(text)])
    generated = greedy_decode(
        model, source, start_id=target_vocab.sos_id, end_id=target_vocab.eos_id, max_len=MAX_STEPS
    )
    ids = generated.tokens[0].tolist()
    steps = ids.index(target_vocab.eos_id) + 1 if target_vocab.eos_id in ids else len(ids)
    probabilities = torch.softmax(generated.logits[0, :steps], dim=-1).numpy()
    cross = generated.cross_weights[0, :, :, :steps].numpy()
    return ids[:steps], probabilities, cross


def _heads_png(cross: np.ndarray, source: str, rows: list[str]) -> str:
    """Every layer's and head's cross-attention (layers, heads, steps, src) as a base64 PNG."""
    from matplotlib.figure import Figure  # no pyplot: nothing is shown, no backend is chosen

    layers, heads, steps, src = cross.shape
    figure = Figure(figsize=(2.4 * heads, 2.0 * layers + 0.4), dpi=60, layout="constrained")
    labels = ["␣" if symbol == " " else symbol for symbol in source]
    for index, ax in enumerate(figure.subplots(layers, heads, squeeze=False).flat):
        layer, head = divmod(index, heads)
        ax.imshow(cross[layer, head], cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=10)
        ax.set_xticks(range(src), labels, fontsize=7) if src <= 30 else ax.set_xticks([])
        ax.set_yticks(range(steps), rows, fontsize=7)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def snapshot(
    model: EncoderDecoder, text: str, source_vocab: CharVocab, target_vocab: CharVocab
) -> str:
    """The explorer as HTML without JavaScript: the example's translation, step by step, and
    every head's cross-attention as one picture."""
    ids, probabilities, cross = translate_with_weights(model, text, source_vocab, target_vocab)
    rows = [target_vocab.itos[i] for i in ids]
    steps = "".join(
        f"<tr><td>{step + 1}</td><td><code>{html.escape(symbol)}</code></td>"
        f"<td>{probabilities[step, ids[step]]:.3f}</td></tr>"
        for step, symbol in enumerate(rows)
    )
    picture = _heads_png(cross, text, rows)
    return (
        "<p><strong>This explorer runs the trained Transformer in your browser with JavaScript, "
        "which is off or did not run here.</strong> Below is a snapshot stored when the chapter "
        "was executed; with JavaScript on, you can type your own date and step through its "
        "translation.</p>"
        f"<p>Date: <code>{html.escape(text)}</code>, translation: "
        f"<code>{html.escape(target_vocab.decode(ids))}</code></p>"
        "<table><thead><tr><th>step</th><th>written</th><th>probability</th></tr></thead>"
        f"<tbody>{steps}</tbody></table>"
        '<img alt="cross-attention of every layer and head" style="max-width:100%;height:auto" '
        f'src="data:image/png;base64,{picture}">'
    )


def transformer_translator_live(
    model: nn.Module,
    source_vocab: CharVocab,
    target_vocab: CharVocab,
    example: str = EXAMPLE,
) -> HTML:
    """Chapter 14's explorer for ``model`` (a DateTransformer or an EncoderDecoder, post-LN or
    pre-LN, relu), starting at the date ``example``: type a date, step through its greedy
    translation, pick a layer and a head of the cross-attention."""
    inner = _encoder_decoder(model)
    _check_supported(inner, source_vocab, target_vocab)
    if not isinstance(example, str) or not example.strip():
        raise ValueError("example must be a non-empty date, such as '25 august 1963'")
    unknown = sorted({symbol for symbol in example if symbol not in source_vocab.stoi})
    if unknown:
        raise ValueError(f"example has characters outside the source vocabulary: {unknown}")
    if len(example) > inner.config.max_len:
        raise ValueError(
            f"example has {len(example)} characters, more than max_len={inner.config.max_len}"
        )
    weights, manifest = packed_weights(inner)
    attributes = {
        "config": _json(browser_config(inner, source_vocab, target_vocab)),
        "manifest": _json(manifest),
        "weights": weights,
        "example": example,
    }
    fallback = snapshot(inner, example, source_vocab, target_vocab)
    return HTML(snippet("transformer-translator", attributes, fallback, bundle(SCRIPTS)))
