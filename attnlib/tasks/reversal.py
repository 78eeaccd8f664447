"""Chapter 16's small task: reverse a string of 4 to 10 digits with an encoder–decoder.

Each example is a source (the digits, padded), the decoder's input (the start token, then the
reversed digits) and the target (the reversed digits, then the end token). Ids 3 to 12 are the
digits 0 to 9. :func:`train_reversal` and :func:`train_on` are the runs chapter 16 compares;
they are functions of this module, not of the notebook, so that
:func:`attnlib.parallel.run_parallel` can send them to other processes, one seed each.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attnlib._checks import check_count, check_int
from attnlib.generation import EncoderDecoder, greedy_decode
from attnlib.model_config import TransformerConfig
from attnlib.training import fit

PAD, START, END = 0, 1, 2
VOCAB = 13  # ids 3..12 are the digits 0..9
MAX_DIGITS = 10
BATCH = 64

# (source, source key mask, decoder input, target): (count, max_digits), (count, max_digits),
# (count, max_digits + 1), (count, max_digits + 1)
ReversalData = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def reversal_data(
    count: int, generator: torch.Generator, min_digits: int = 4, max_digits: int = MAX_DIGITS
) -> ReversalData:
    """``count`` examples: source (count, max_digits) and its key mask, decoder input and target
    (count, max_digits + 1), each string's length drawn from min_digits..max_digits."""
    check_count("count", count)
    if not 1 <= check_int("min_digits", min_digits) <= check_int("max_digits", max_digits):
        raise ValueError(f"need 1 <= min_digits <= max_digits, got {min_digits} and {max_digits}")
    lengths = torch.randint(min_digits, max_digits + 1, (count,), generator=generator)
    source_key_mask = torch.arange(max_digits)[None] < lengths[:, None]
    source = torch.randint(3, VOCAB, (count, max_digits), generator=generator)
    source = source.masked_fill(~source_key_mask, PAD)
    target = torch.full((count, max_digits + 1), PAD)
    for row, n in enumerate(lengths.tolist()):
        target[row, :n] = source[row, :n].flip(0)
        target[row, n] = END
    decoder_in = torch.cat([torch.full((count, 1), START), target[:, :-1]], dim=1)
    decoder_in = decoder_in.masked_fill(decoder_in == END, PAD)
    return source, source_key_mask, decoder_in, target


def digits(ids: torch.Tensor) -> str:
    """One row of ids (length,) as its digits, up to the first padding or end token."""
    out = []
    for token in ids.tolist():
        if token in (PAD, END):
            break
        out.append("0123456789"[token - 3] if token >= 3 else "<s>")
    return "".join(out)


def batches_of(
    data: ReversalData, steps: int, batch_size: int = BATCH, seed: int = 0
) -> list[ReversalData]:
    """``steps`` batches of ``batch_size`` examples in a seeded order, a fresh order for each
    pass over the data."""
    check_count("steps", steps)
    check_count("batch_size", batch_size)
    generator, count = torch.Generator().manual_seed(check_int("seed", seed)), len(data[0])
    passes = math.ceil(steps * batch_size / count)
    order = torch.cat([torch.randperm(count, generator=generator) for _ in range(passes)])
    return [
        tuple(t[order[s * batch_size : (s + 1) * batch_size]] for t in data) for s in range(steps)
    ]


def _teacher_forced_logits(model: EncoderDecoder, batch: ReversalData) -> torch.Tensor:
    """The decoder's logits (batch, max_digits + 1, vocab) with the true previous tokens fed in."""
    source, source_key_mask, decoder_in, _ = batch
    logits, _ = model(source, decoder_in, source_key_mask, decoder_in != PAD)
    return logits


def _target_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of logits (batch, length, vocab) against target (batch, length), padding
    left out (a 0-d tensor)."""
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=PAD)


def reversal_loss(model: EncoderDecoder, batch: ReversalData) -> torch.Tensor:
    """Cross-entropy over the target tokens, padding left out (a 0-d tensor)."""
    return _target_loss(_teacher_forced_logits(model, batch), batch[3])


def greedy_exact_match(model: EncoderDecoder, data: ReversalData) -> float:
    """The share of strings that greedy decoding reverses exactly, end token included."""
    source, source_key_mask, _, target = data
    tokens = greedy_decode(
        model,
        source,
        source_key_mask,
        start_id=START,
        end_id=END,
        max_len=MAX_DIGITS + 1,
        need_weights=False,
    ).tokens
    predicted = torch.full_like(target, PAD)
    predicted[:, : tokens.shape[1]] = tokens
    return (predicted == target).all(dim=1).float().mean().item()


def teacher_forced(model: EncoderDecoder, data: ReversalData) -> tuple[float, float]:
    """(next-token accuracy, loss) on ``data`` under teacher forcing, padding left out."""
    target = data[3]
    model.eval()
    with torch.no_grad():
        logits = _teacher_forced_logits(model, data)
    loss = _target_loss(logits, target).item()
    real = target != PAD
    accuracy = ((logits.argmax(-1) == target) & real).sum().item() / real.sum().item()
    return accuracy, loss


def train_reversal(
    config: TransformerConfig, data: ReversalData, steps: int, seed: int, lr: float = 1e-3
) -> EncoderDecoder:
    """An :class:`EncoderDecoder` built from ``seed`` and trained ``steps`` steps of Adam."""
    torch.manual_seed(check_int("seed", seed))
    model = EncoderDecoder(config)
    fit(
        model,
        batches_of(data, steps, seed=seed),
        reversal_loss,
        lr=lr,
        device="cpu",
        progress=False,
    )
    return model


def train_on(
    model: EncoderDecoder,
    data: ReversalData,
    test: ReversalData,
    seed: int,
    done: int,
    steps: int,
    every: int,
    lr: float = 1e-3,
) -> tuple[EncoderDecoder, list[float]]:
    """Train ``model`` on the ``steps`` batches after the first ``done`` of seed ``seed``'s
    order, with a fresh Adam; return it and its teacher-forced accuracy on ``test`` every
    ``every`` steps."""
    check_int("done", done)
    check_count("every", every)
    more = batches_of(data, done + steps, seed=seed)[done:]
    history = fit(
        model,
        more,
        reversal_loss,
        lr=lr,
        device="cpu",
        progress=False,
        evaluate=lambda trained: {"accuracy": teacher_forced(trained, test)[0]},
        evaluate_every=every,
    )
    at = {e.step: e.metrics["accuracy"] for e in history.evaluations}
    return model, [at[step] for step in range(every, steps + 1, every)]
