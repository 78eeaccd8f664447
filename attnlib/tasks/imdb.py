"""Part IV's task end to end: IMDB sentiment with a Transformer encoder.

The recipe of chapter 13: subword ids with head-and-tail truncation, masked-language-model
pretraining on packed blocks of the unlabelled and training reviews (never the test reviews),
then fine-tuning a classifier on the labelled training reviews, batched by length. The models
come from :mod:`attnlib.transformer`; the loop is :func:`attnlib.training.fit`; this module holds
only what is specific to the task: batches, losses, metrics and the configuration.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attnlib.config import quick_mode, training_precision
from attnlib.data.imdb import clean_review
from attnlib.data.subwords import SubwordTokenizer
from attnlib.encoder import flops_per_token
from attnlib.model_config import TransformerConfig


@dataclass(frozen=True)
class ImdbConfig:
    """Sizes of the model, the data and both training phases (GPU-sized by default)."""

    vocab_size: int = 8192
    max_len: int = 512
    head_tokens: int = 128
    d_model: int = 256
    num_heads: int = 4
    num_layers: int = 6
    d_ff: int = 1024
    dropout: float = 0.1
    norm_first: bool = True
    seed: int = 0
    pretrain_steps: int = 12_000
    pretrain_batch: int = 128
    pretrain_lr: float = 7e-4
    pretrain_max_seconds: float | None = 330.0
    mask_fraction: float = 0.15
    finetune_epochs: int = 3
    finetune_batch: int = 32
    finetune_lr: float = 2e-4
    scratch_lr: float = 3e-4
    warmup_fraction: float = 0.06
    weight_decay: float = 0.01
    label_smoothing: float = 0.0
    n_valid: int = 1000
    subset: int | None = None

    @classmethod
    def for_mode(cls, **overrides) -> ImdbConfig:
        """The full configuration, shrunk to a few CPU-sized steps when ``ATTNLIB_QUICK=1``."""
        config = cls(**overrides)
        if quick_mode():
            config = replace(
                config,
                pretrain_steps=min(config.pretrain_steps, 4),
                pretrain_batch=min(config.pretrain_batch, 4),
                # 32 reviews of 512 tokens take about 6 GB to train on a CPU; 4 take about 1.
                finetune_batch=min(config.finetune_batch, 4),
                finetune_epochs=1,
                n_valid=32,
                subset=config.subset or 64,
            )
        return config

    def transformer(self) -> TransformerConfig:
        """The encoder's configuration."""
        return TransformerConfig(
            vocab_size=self.vocab_size,
            d_model=self.d_model,
            num_heads=self.num_heads,
            num_layers=self.num_layers,
            d_ff=self.d_ff,
            dropout=self.dropout,
            max_len=self.max_len,
            norm_first=self.norm_first,
            pad_id=0,
        )

    def to_dict(self) -> dict:
        """Plain values, for a JSON file beside the weights."""
        return asdict(self)


def masked_per_block(config: ImdbConfig) -> int:
    """How many positions of each pretraining block are hidden: k = round(fraction · max_len)."""
    return max(1, round(config.mask_fraction * config.max_len))


def pretraining_flops_per_token(config: ImdbConfig) -> float:
    """Training FLOPs per token of a masked-LM step: the encoder's, plus the head (transform
    and vocabulary projection), which runs at the k hidden positions of each block only."""
    d, k = config.d_model, masked_per_block(config)
    head = 3 * 2 * (d * d + d * config.vocab_size) * k / config.max_len
    return flops_per_token(config.transformer(), config.max_len) + head


def encode_reviews(
    tokenizer: SubwordTokenizer, texts: Sequence[str], max_len: int, head_tokens: int
) -> list[np.ndarray]:
    """[CLS] + subword ids of each review, cut to ``max_len`` keeping its head and its tail."""
    if not 0 <= head_tokens < max_len:
        raise ValueError(f"head_tokens must be in [0, max_len), got {head_tokens} for {max_len}")
    tail_tokens = max_len - 1 - head_tokens
    encoded = tokenizer.encode_batch([clean_review(text) for text in texts])
    reviews = []
    for ids in encoded:
        if len(ids) > max_len - 1:
            # Openings and verdicts carry the sentiment; the middle is mostly plot.
            ids = ids[:head_tokens] + (ids[-tail_tokens:] if tail_tokens else [])
        reviews.append(np.asarray([tokenizer.cls_id, *ids], dtype=np.int32))
    return reviews


@dataclass(frozen=True)
class Reading:
    """What the classifier makes of one review: its tokens, P(positive), every attention map."""

    tokens: list[str]  # (n,) with [CLS] first
    ids: np.ndarray  # (n,) int32
    probability: float  # P(positive)
    weights: torch.Tensor  # (layers, heads, n, n), float32 on the CPU


def read_review(
    model: nn.Module, tokenizer: SubwordTokenizer, text: str, max_len: int, head_tokens: int
) -> Reading:
    """Run a classifier on one review, cut as :func:`encode_reviews` cuts it (eval mode)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    (ids,) = encode_reviews(tokenizer, [text], max_len, head_tokens)
    if len(ids) <= 1:  # only [CLS]: no token to read, and the model would still answer
        raise ValueError(f"the review holds no words to read: type a review (got {text[:40]!r})")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    with torch.no_grad():
        logits, weights = model(
            torch.as_tensor(ids, dtype=torch.long, device=device)[None], None, True
        )
    model.train(was_training)
    return Reading(
        tokens=[tokenizer.id_to_token(int(i)) for i in ids],
        ids=ids,
        probability=float(logits.float().softmax(-1)[0, 1]),
        weights=weights[0].float().cpu(),
    )


def pack_blocks(reviews: Sequence[np.ndarray], block: int, sep_id: int) -> torch.Tensor:
    """Concatenate reviews, each followed by [SEP], and cut into rows: (n_blocks, block).

    Packing wastes no position on padding, so pretraining needs no mask at all.
    """
    if not reviews:
        raise ValueError("pack_blocks needs at least one review")
    stream = np.concatenate([np.append(ids, sep_id) for ids in reviews])
    n_blocks = len(stream) // block
    if n_blocks == 0:
        raise ValueError(f"{len(stream)} tokens do not fill one block of {block}")
    return torch.from_numpy(stream[: n_blocks * block].astype(np.int64)).view(n_blocks, block)


class TensorBatch:
    """A dataclass of tensors that moves to a device as a whole (``fit`` calls ``.to``)."""

    def to(self, device: torch.device):
        """The same batch with every tensor on ``device``."""
        tensors = (getattr(self, name) for name in self.__dataclass_fields__)
        return type(self)(*(t.to(device, non_blocking=True) for t in tensors))


@dataclass
class MaskedBatch(TensorBatch):
    """Some tokens hidden: inputs (batch, seq), positions (batch, k), targets (batch, k)."""

    inputs: torch.Tensor
    positions: torch.Tensor
    targets: torch.Tensor


def mask_blocks(
    blocks: torch.Tensor,
    fraction: float,
    mask_id: int,
    vocab_size: int,
    first_word_id: int,
    generator: torch.Generator | None = None,
) -> MaskedBatch:
    """BERT's corruption of (batch, seq) ids: a fixed number k of positions per row are chosen;
    80% become [MASK], 10% a random word, 10% stay; the model must restore all k.

    A fixed k keeps every tensor's shape static, which ``torch.compile`` rewards.
    """
    batch, seq = blocks.shape
    k = max(1, round(fraction * seq))  # as masked_per_block
    device = blocks.device
    noise = torch.rand(batch, seq, device=device, generator=generator)
    positions = noise.topk(k, dim=1).indices
    targets = blocks.gather(1, positions)
    roll = torch.rand(batch, k, device=device, generator=generator)
    random_words = torch.randint(
        first_word_id, vocab_size, (batch, k), device=device, generator=generator
    )
    replacement = torch.where(roll < 0.8, torch.full_like(targets, mask_id), targets)
    replacement = torch.where(roll >= 0.9, random_words, replacement)
    inputs = blocks.scatter(1, positions, replacement)
    return MaskedBatch(inputs, positions, targets)


def pretraining_batches(
    blocks: torch.Tensor,
    steps: int,
    batch_size: int,
    tokenizer: SubwordTokenizer,
    fraction: float,
    seed: int,
) -> Iterator[MaskedBatch]:
    """``steps`` masked batches drawn at random from ``blocks``, on the blocks' device."""
    generator = torch.Generator(device=blocks.device).manual_seed(seed)
    first_word_id = tokenizer.mask_id + 1
    for _ in range(steps):
        rows = torch.randint(
            0, len(blocks), (batch_size,), device=blocks.device, generator=generator
        )
        yield mask_blocks(
            blocks[rows],
            fraction,
            tokenizer.mask_id,
            tokenizer.vocab_size,
            first_word_id,
            generator,
        )


def masked_lm_loss(model: nn.Module, batch: MaskedBatch) -> torch.Tensor:
    """Cross-entropy of the hidden tokens only."""
    logits = model(batch.inputs, positions=batch.positions)  # (batch, k, vocab)
    return F.cross_entropy(logits.flatten(0, 1).float(), batch.targets.flatten())


@dataclass
class LabelledBatch(TensorBatch):
    """Reviews: ids (batch, seq), key_mask (batch, seq) (True = real token), labels (batch,)."""

    ids: torch.Tensor
    key_mask: torch.Tensor
    labels: torch.Tensor


def length_buckets(
    reviews: Sequence[np.ndarray],
    labels: Sequence[int],
    batch_size: int,
    device: torch.device | str = "cpu",
    multiple: int = 64,
) -> list[LabelledBatch]:
    """Batches of reviews of similar length, padded to a multiple of ``multiple``, on ``device``.

    Sorting by length before cutting batches keeps padding, and so wasted work, small; rounding
    widths up to a multiple of 64 leaves a GPU few distinct shapes to prepare kernels for.
    """
    if len(reviews) != len(labels):
        raise ValueError(f"{len(reviews)} reviews but {len(labels)} labels")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    order = length_order(reviews)
    batches = []
    for start in range(0, len(order), batch_size):
        chosen = order[start : start + batch_size]
        width = max(len(reviews[i]) for i in chosen)
        width = math.ceil(width / multiple) * multiple
        ids = np.zeros((len(chosen), width), dtype=np.int64)
        for row, index in enumerate(chosen):
            ids[row, : len(reviews[index])] = reviews[index]
        ids_tensor = torch.from_numpy(ids)
        batch = LabelledBatch(
            ids_tensor, ids_tensor != 0, torch.tensor([int(labels[i]) for i in chosen])
        )
        batches.append(batch.to(torch.device(device)))
    return batches


def length_order(reviews: Sequence[np.ndarray]) -> list[int]:
    """Indices of ``reviews`` from shortest to longest (ties keep their order): the order in
    which :func:`length_buckets` lays them out."""
    return sorted(range(len(reviews)), key=lambda i: len(reviews[i]))


def shuffled(batches: Sequence[LabelledBatch], seed: int) -> list[LabelledBatch]:
    """The batches in a seeded random order (each epoch its own seed)."""
    order = list(batches)
    random.Random(seed).shuffle(order)
    return order


def classification_loss(
    model: nn.Module, batch: LabelledBatch, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Cross-entropy of the sentiment logits."""
    logits, _ = model(batch.ids, batch.key_mask)
    return F.cross_entropy(logits.float(), batch.labels, label_smoothing=label_smoothing)


@torch.no_grad()
def positive_probability(model: nn.Module, batches: Sequence[LabelledBatch]) -> torch.Tensor:
    """P(positive) for every review of ``batches``, in batch order: (n_reviews,) on the CPU."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    precision = training_precision(device)  # the dtype fit trains in, or None
    chunks = []
    for batch in batches:
        batch = batch.to(device)
        with torch.autocast(device.type, dtype=precision, enabled=precision is not None):
            logits, _ = model(batch.ids, batch.key_mask)
        chunks.append(logits.float().softmax(-1)[:, 1].cpu())
    model.train(was_training)
    return torch.cat(chunks)


def review_probabilities(
    model: nn.Module,
    reviews: Sequence[np.ndarray],
    batch_size: int,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """P(positive) for every review (n_reviews,) on the CPU, in the order of ``reviews``: batched
    by length for speed, then put back, so that two models' answers pair up review by review."""
    if not reviews:
        raise ValueError("no reviews to score")
    unlabelled = np.zeros(len(reviews), dtype=np.int64)
    by_length = positive_probability(model, length_buckets(reviews, unlabelled, batch_size, device))
    in_order = torch.empty_like(by_length)
    in_order[torch.as_tensor(length_order(reviews))] = by_length
    return in_order


def batch_labels(batches: Sequence[LabelledBatch]) -> torch.Tensor:
    """The labels of ``batches`` in batch order: (n_reviews,) on the CPU."""
    return torch.cat([batch.labels.cpu() for batch in batches])


def accuracy(model: nn.Module, batches: Sequence[LabelledBatch]) -> float:
    """Fraction of reviews whose predicted sentiment (P(positive) > 0.5) is right."""
    predicted = positive_probability(model, batches) > 0.5
    return float((predicted == batch_labels(batches).bool()).float().mean())


def adamw(model: nn.Module, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """AdamW with weight decay on matrices only (not on biases, norms or positions)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    fused = all(p.is_cuda for p in decay + no_decay)
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.98), eps=1e-6, fused=fused or None)
