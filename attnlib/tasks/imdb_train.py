"""Chapter 13's two training phases on IMDB, and the files a trained model ships as.

``prepare`` turns the reviews into subword ids and batches; ``pretrain`` teaches a masked
language model on the unlabelled and training reviews; ``finetune`` trains the sentiment
classifier; ``save_trained`` / ``load_trained`` write and read the shipped model (safetensors
weights in bfloat16, the tokenizer's JSON, and the configuration and results as JSON).
"""

from __future__ import annotations

import json
import math
import os
import random
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch import nn

from attnlib.config import training_precision
from attnlib.data.imdb import IMDB
from attnlib.data.subwords import SubwordTokenizer
from attnlib.encoder import Encoder, SequenceClassifier
from attnlib.schedules import linear_warmup_decay
from attnlib.tasks.imdb import (
    ImdbConfig,
    LabelledBatch,
    accuracy,
    adamw,
    classification_loss,
    encode_reviews,
    length_buckets,
    mask_blocks,
    masked_lm_loss,
    pack_blocks,
    pretraining_batches,
    pretraining_flops_per_token,
    shuffled,
)
from attnlib.training import History, fit

SHIPPED_MODEL = Path(__file__).resolve().parents[1] / "assets" / "imdb"


@dataclass
class ImdbData:
    """Subword ids of every split: lists of (length,) int32 arrays, [CLS] first."""

    config: ImdbConfig
    train: list[np.ndarray]
    train_labels: np.ndarray
    valid: list[np.ndarray]
    valid_labels: np.ndarray
    test: list[np.ndarray]
    test_labels: np.ndarray
    test_texts: list[str]
    pretrain: list[np.ndarray]
    pretrain_valid: list[np.ndarray]
    # test[j] is the data set's test review test_order[j]: predictions map back to it, so that
    # two models (or a model and a baseline) are compared review by review.
    test_order: list[int] = field(default_factory=list)


def prepare(data: IMDB, tokenizer: SubwordTokenizer, config: ImdbConfig) -> ImdbData:
    """Encode the reviews; hold out ``n_valid`` training reviews for validation (seeded).

    Pretraining reads the unlabelled and the training reviews, never the test reviews (nor
    the unlabelled reviews that repeat one word for word); 1% of them are held out to measure
    how well the masked words are restored.
    """
    if tokenizer.vocab_size != config.vocab_size:
        raise ValueError(
            f"tokenizer has {tokenizer.vocab_size} ids but the configuration expects "
            f"vocab_size={config.vocab_size}"
        )
    rng = random.Random(config.seed)
    train_order = list(range(len(data.train.texts)))
    rng.shuffle(train_order)
    test_order = list(range(len(data.test.texts)))
    rng.shuffle(test_order)
    unlabelled_order = data.unlabelled_outside_test()
    if config.subset is not None:
        train_order = train_order[: config.subset + config.n_valid]
        test_order = sorted(test_order[: config.subset])
        unlabelled_order = unlabelled_order[: config.subset]
    valid_order, train_order = train_order[: config.n_valid], train_order[config.n_valid :]

    def encode(texts: list[str]) -> list[np.ndarray]:
        return encode_reviews(tokenizer, texts, config.max_len, config.head_tokens)

    train_texts = [data.train.texts[i] for i in train_order]
    train = encode(train_texts)
    unlabelled = encode([data.unlabelled.texts[i] for i in unlabelled_order])
    pretrain = unlabelled + train
    rng.shuffle(pretrain)
    # 1% of the reviews, and at least 16 so that a small subset still fills a held-out block.
    held_out = max(16, len(pretrain) // 100)
    test_texts = [data.test.texts[i] for i in test_order]
    return ImdbData(
        config=config,
        train=train,
        train_labels=data.train.labels[train_order].astype(np.int64),
        valid=encode([data.train.texts[i] for i in valid_order]),
        valid_labels=data.train.labels[valid_order].astype(np.int64),
        test=encode(test_texts),
        test_labels=data.test.labels[test_order].astype(np.int64),
        test_texts=test_texts,
        pretrain=pretrain[held_out:],
        pretrain_valid=pretrain[:held_out],
        test_order=test_order,
    )


@dataclass
class PhaseResult:
    """What a training phase did: history, steps, tokens seen, seconds and throughput."""

    history: History
    steps: int
    tokens: int
    seconds: float
    eval_seconds: float
    device: str
    extra: dict = field(default_factory=dict)

    @property
    def tokens_per_second(self) -> float:
        """Training tokens per second of wall time, evaluation left out (compilation kept in)."""
        return self.tokens / max(self.seconds - self.eval_seconds, 1e-9)

    @property
    def steady_tokens_per_second(self) -> float:
        """Tokens per second after the first evaluation: compilation and warm-up left out."""
        evaluations = self.history.evaluations
        if len(evaluations) < 2:
            return self.tokens_per_second
        first, last = evaluations[0], evaluations[-1]
        tokens_per_step = self.tokens / max(self.steps, 1)
        seconds = max(last.seconds - first.seconds, 1e-9)
        return tokens_per_step * (last.step - first.step) / seconds

    def share_of_peak(self, peak_tflops: float, steady: bool = False) -> float:
        """Achieved FLOP/s over the device's peak, from ``extra['flops_per_token']``."""
        if "flops_per_token" not in self.extra:
            raise KeyError("this phase recorded no flops_per_token (pretraining does)")
        if not peak_tflops > 0:
            raise ValueError(f"peak_tflops must be positive, got {peak_tflops}")
        rate = self.steady_tokens_per_second if steady else self.tokens_per_second
        return rate * self.extra["flops_per_token"] / (peak_tflops * 1e12)


@contextmanager
def recomputing_on_cpu(model: nn.Module, device: torch.device | str) -> Iterator[None]:
    """While training on a CPU, set ``model.encoder.recompute`` (see :class:`Encoder`): the
    same results, holding one layer's activations instead of every layer's. Chapter 13's quick
    mode trains on 4 x 512 tokens a step, which otherwise keeps about 600 MB of activations for
    the backward, 290 MB of them (batch, heads, 512, 512) attention tensors (CPU attention with
    dropout has no fused kernel). A GPU has the memory, and keeps its speed. The flag is put
    back as it was afterwards."""
    encoder = getattr(model, "encoder", None)
    if torch.device(device).type != "cpu" or not isinstance(encoder, Encoder):
        yield
        return
    before = encoder.recompute
    encoder.recompute = True
    try:
        yield
    finally:
        encoder.recompute = before


def pretrain(
    model: nn.Module,
    data: ImdbData,
    tokenizer: SubwordTokenizer,
    device: torch.device,
    compile_model: bool = False,
    chunks: int = 20,
    progress: bool = True,
) -> PhaseResult:
    """Masked-language-model training for ``config.pretrain_steps`` steps, in ``chunks`` parts.

    The packed blocks live on ``device`` and batches are drawn there, so the GPU never waits
    for the host. After each part, the accuracy of restoring held-out masked words is recorded.
    """
    config = data.config
    model.to(device)
    blocks = pack_blocks(data.pretrain, config.max_len, tokenizer.sep_id).to(device)
    held_out = pack_blocks(data.pretrain_valid, config.max_len, tokenizer.sep_id)[:256].to(device)
    generator = torch.Generator(device=device).manual_seed(config.seed + 1)
    probe = mask_blocks(
        held_out,
        config.mask_fraction,
        tokenizer.mask_id,
        tokenizer.vocab_size,
        tokenizer.mask_id + 1,
        generator,
    )
    steps, chunks = config.pretrain_steps, min(chunks, config.pretrain_steps)
    per_chunk = math.ceil(steps / chunks)
    eval_seconds = 0.0

    def batches(chunk: int):
        count = min(per_chunk, steps - chunk * per_chunk)
        return pretraining_batches(
            blocks,
            count,
            config.pretrain_batch,
            tokenizer,
            config.mask_fraction,
            config.seed * 1000 + chunk,
        )

    def evaluate(_: nn.Module) -> dict[str, float]:
        nonlocal eval_seconds
        start = time.perf_counter()
        correct, total, correct_at_mask, total_at_mask = 0, 0, 0, 0
        precision = training_precision(device)  # the dtype fit trains in, or None
        for row in range(0, len(probe.inputs), 32):
            part = slice(row, row + 32)
            with torch.autocast(device.type, dtype=precision, enabled=precision is not None):
                logits = model(probe.inputs[part], positions=probe.positions[part])
            right = logits.argmax(-1) == probe.targets[part]  # (rows, k)
            # A tenth of the chosen positions keep their word, which the model can simply copy:
            # the accuracy on the [MASK] positions alone is the harder, honest number.
            at_mask = probe.inputs[part].gather(1, probe.positions[part]) == tokenizer.mask_id
            correct, total = correct + int(right.sum()), total + right.numel()
            correct_at_mask += int((right & at_mask).sum())
            total_at_mask += int(at_mask.sum())
        eval_seconds += time.perf_counter() - start
        return {
            "masked_accuracy": correct / total,
            "mask_token_accuracy": correct_at_mask / max(1, total_at_mask),
        }

    trained = torch.compile(model) if compile_model else model
    start = time.perf_counter()

    def out_of_time(_: dict[str, float]) -> bool:
        # A safety net for a run with a deadline: stop between parts, with the schedule unfinished.
        limit = config.pretrain_max_seconds
        return limit is not None and time.perf_counter() - start > limit

    with recomputing_on_cpu(model, device):
        history = fit(
            trained,
            batches,
            masked_lm_loss,
            epochs=math.ceil(steps / per_chunk),
            optimizer=adamw(model, config.pretrain_lr, config.weight_decay),
            schedule=linear_warmup_decay(max(1, round(config.warmup_fraction * steps)), steps),
            evaluate=evaluate,
            stop_when=out_of_time,
            device=device,
            progress="run" if progress else False,  # one bar for the 20 parts, not 20 bars
            max_steps=steps,  # the bar's total; the parts add up to it exactly
            part_name="part",  # a part is 1/20 of the steps, not a pass over the text
        )
    seconds = time.perf_counter() - start
    tokens = history.steps * config.pretrain_batch * config.max_len
    flops = pretraining_flops_per_token(config)
    extra = {"blocks": len(blocks), "compiled": compile_model, "flops_per_token": flops}
    return PhaseResult(history, history.steps, tokens, seconds, eval_seconds, str(device), extra)


def finetune(
    classifier: nn.Module,
    data: ImdbData,
    device: torch.device,
    lr: float,
    progress: bool = True,
    test_every_epoch: bool = False,
    seed: int | None = None,
) -> PhaseResult:
    """Train the sentiment classifier on length-bucketed batches; validation accuracy per epoch
    (and test accuracy, for the record only, with ``test_every_epoch``). ``seed`` (default
    ``config.seed``) orders the batches; the classifier's own initialisation is the caller's."""
    config = data.config
    seed = config.seed if seed is None else seed
    classifier.to(device)
    train_batches = length_buckets(data.train, data.train_labels, config.finetune_batch, device)
    valid_batches = length_buckets(data.valid, data.valid_labels, eval_batch_size(device), device)
    test_batches = evaluation_batches(data, device) if test_every_epoch else []
    steps = config.finetune_epochs * len(train_batches)
    eval_seconds = 0.0

    def evaluate(model: nn.Module) -> dict[str, float]:
        nonlocal eval_seconds
        start = time.perf_counter()
        result = {"valid_accuracy": accuracy(model, valid_batches)}
        if test_batches:
            result["test_accuracy"] = accuracy(model, test_batches)
        eval_seconds += time.perf_counter() - start
        return result

    start = time.perf_counter()
    with recomputing_on_cpu(classifier, device):
        history = fit(
            classifier,
            lambda epoch: shuffled(train_batches, seed * 1000 + epoch),
            partial(classification_loss, label_smoothing=config.label_smoothing),
            epochs=config.finetune_epochs,
            optimizer=adamw(classifier, lr, config.weight_decay),
            schedule=linear_warmup_decay(max(1, round(config.warmup_fraction * steps)), steps),
            evaluate=evaluate,
            device=device,
            progress="run" if progress else False,
            max_steps=steps,  # the bar's total: every epoch's batches
        )
    seconds = time.perf_counter() - start
    tokens = config.finetune_epochs * sum(int(b.key_mask.sum()) for b in train_batches)
    return PhaseResult(history, history.steps, tokens, seconds, eval_seconds, str(device))


def eval_batch_size(device: torch.device | str) -> int:
    """Reviews per evaluation batch: 128 on a GPU, 32 on a CPU (a laptop's memory)."""
    return 128 if torch.device(device).type == "cuda" else 32


def evaluation_batches(data: ImdbData, device: torch.device | str = "cpu") -> list[LabelledBatch]:
    """The test reviews in length buckets (evaluation order = sorted by length)."""
    return length_buckets(data.test, data.test_labels, eval_batch_size(device), device)


MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json", "results.json")


def save_trained(
    folder: str | Path,
    classifier: SequenceClassifier,
    tokenizer: SubwordTokenizer,
    config: ImdbConfig,
    results: dict,
) -> Path:
    """Write the shipped model: weights in bfloat16 (half the bytes), tokenizer, config, results."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    weights = {
        name: tensor.detach().to("cpu", torch.bfloat16).contiguous()
        for name, tensor in classifier.state_dict().items()
    }
    with tempfile.TemporaryDirectory(dir=folder) as staging:
        staged = Path(staging)
        save_file(weights, staged / "model.safetensors")
        tokenizer.save(staged / "tokenizer.json")
        (staged / "config.json").write_text(json.dumps(config.to_dict(), indent=1) + "\n")
        (staged / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        # Replace the files only once all four are written: never a half-updated model.
        for name in MODEL_FILES:
            os.replace(staged / name, folder / name)
    return folder


def load_trained(
    folder: str | Path,
) -> tuple[SequenceClassifier, SubwordTokenizer, ImdbConfig, dict]:
    """The shipped classifier (float32, eval mode), its tokenizer, configuration and results."""
    from safetensors.torch import load_file

    folder = Path(folder)
    missing = [name for name in MODEL_FILES if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} lacks {', '.join(missing)}: not a trained IMDB model")
    config = ImdbConfig(**json.loads((folder / "config.json").read_text()))
    classifier = SequenceClassifier(config.transformer(), num_classes=2)
    weights = {name: t.float() for name, t in load_file(folder / "model.safetensors").items()}
    classifier.load_state_dict(weights)
    tokenizer = SubwordTokenizer.load(folder / "tokenizer.json")
    results = json.loads((folder / "results.json").read_text())
    return classifier.eval(), tokenizer, config, results
