"""Chapter 13's task code: truncation, packing, masking, batching, metrics and shipped files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlib.config import device_peak
from attnlib.data.imdb import IMDB
from attnlib.data.subwords import SubwordTokenizer
from attnlib.encoder import SequenceClassifier
from attnlib.tasks import imdb as task
from attnlib.tasks.imdb_train import (
    PhaseResult,
    finetune,
    load_trained,
    prepare,
    pretrain,
    save_trained,
)
from attnlib.training import Evaluation, History
from tests.helpers import CORPUS, finetuning_setup, reviews, small_config


class CountingTokenizer:
    """Each word becomes an id equal to its length + 10: enough to test cutting and packing."""

    cls_id, sep_id, mask_id, vocab_size = 2, 3, 4, 64

    def encode_batch(self, texts):
        return [[10 + len(word) for word in text.split()] for text in texts]


@pytest.fixture(scope="module")
def tokenizer() -> SubwordTokenizer:
    return SubwordTokenizer.train(CORPUS, vocab_size=60, min_frequency=1)


def test_encode_reviews_keeps_head_and_tail():
    words = " ".join("x" * (i % 5 + 1) for i in range(20))  # ids 11..15 repeating
    (ids,) = task.encode_reviews(CountingTokenizer(), [words], max_len=10, head_tokens=3)
    full = [10 + (i % 5 + 1) for i in range(20)]
    assert ids.tolist() == [2, *full[:3], *full[-6:]]
    assert ids.dtype == np.int32


def test_encode_reviews_leaves_short_reviews_whole_and_cleans_breaks():
    (ids,) = task.encode_reviews(CountingTokenizer(), ["ab<br />cde"], max_len=10, head_tokens=3)
    assert ids.tolist() == [2, 12, 13]


def test_encode_reviews_refuses_a_head_as_long_as_the_window():
    with pytest.raises(ValueError, match=r"head_tokens must be in \[0, max_len\), got 10 for 10"):
        task.encode_reviews(CountingTokenizer(), ["a"], max_len=10, head_tokens=10)


def test_pack_blocks_separates_reviews_and_drops_the_remainder():
    reviews = [np.array([2, 5, 6]), np.array([2, 7]), np.array([2, 8, 9, 10])]
    blocks = task.pack_blocks(reviews, block=5, sep_id=3)  # 12 tokens: two blocks, 2 left over
    assert blocks.tolist() == [[2, 5, 6, 3, 2], [7, 3, 2, 8, 9]]
    assert blocks.dtype == torch.long


def test_pack_blocks_refuses_too_little_text():
    with pytest.raises(ValueError, match="3 tokens do not fill one block of 8"):
        task.pack_blocks([np.array([2, 5])], block=8, sep_id=3)


def test_mask_blocks_hides_a_fixed_number_with_80_10_10():
    blocks = torch.randint(5, 1000, (400, 100), generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(1)
    batch = task.mask_blocks(
        blocks, 0.15, mask_id=4, vocab_size=1000, first_word_id=5, generator=generator
    )
    assert batch.positions.shape == batch.targets.shape == (400, 15)
    assert torch.equal(batch.targets, blocks.gather(1, batch.positions))
    shown = batch.inputs.gather(1, batch.positions)
    masked = (shown == 4).float().mean().item()
    kept = (shown == batch.targets).float().mean().item()
    assert 0.77 < masked < 0.83
    assert 0.08 < kept < 0.13  # 10% kept, plus random words that happen to equal the original
    unchosen = torch.ones_like(blocks, dtype=torch.bool).scatter(1, batch.positions, False)
    assert torch.equal(batch.inputs[unchosen], blocks[unchosen])


def test_masked_per_block_matches_mask_blocks():
    config = small_config(max_len=512)
    assert task.masked_per_block(config) == 77


def test_length_buckets_pad_little_and_keep_labels_with_reviews():
    reviews = [np.arange(2, 2 + n) for n in (5, 17, 3, 9)]
    labels = [0, 1, 1, 0]
    batches = task.length_buckets(reviews, labels, batch_size=2, multiple=8)
    assert [tuple(b.ids.shape) for b in batches] == [(2, 8), (2, 24)]
    assert batches[0].labels.tolist() == [1, 0]  # lengths 3 and 5
    assert batches[1].labels.tolist() == [0, 1]  # lengths 9 and 17
    assert batches[0].key_mask.sum(dim=1).tolist() == [3, 5]
    assert task.length_order(reviews) == [2, 0, 3, 1]


def test_length_buckets_refuse_mismatched_labels():
    with pytest.raises(ValueError, match="2 reviews but 3 labels"):
        task.length_buckets([np.arange(3), np.arange(4)], [0, 1, 1], batch_size=2)


def test_accuracy_and_probability_of_a_tiny_classifier():
    torch.manual_seed(0)
    model = SequenceClassifier(small_config().transformer())
    reviews = [np.arange(2, 2 + n) for n in (4, 6, 8, 10)]
    batches = task.length_buckets(reviews, [1, 0, 1, 0], batch_size=2, multiple=8)
    probability = task.positive_probability(model, batches)
    assert probability.shape == (4,)
    assert ((probability > 0) & (probability < 1)).all()
    expected = float(((probability > 0.5) == task.batch_labels(batches).bool()).float().mean())
    assert task.accuracy(model, batches) == expected
    assert model.training  # evaluation restores the mode it found


def test_pretraining_flops_add_the_head_at_hidden_positions_only():
    config = small_config()
    k = task.masked_per_block(config)
    d, v = config.d_model, config.vocab_size
    from attnlib.encoder import flops_per_token

    expected = flops_per_token(config.transformer(), config.max_len)
    expected += 6 * (d * d + d * v) * k / config.max_len
    assert task.pretraining_flops_per_token(config) == pytest.approx(expected)


def test_shipped_files_round_trip_in_bfloat16(tmp_path, tokenizer):
    config = small_config()
    torch.manual_seed(0)
    model = SequenceClassifier(config.transformer()).eval()
    save_trained(tmp_path, model, tokenizer, config, {"test_accuracy": 0.5})
    loaded, loaded_tokenizer, loaded_config, results = load_trained(tmp_path)
    assert loaded_config == config
    assert results == {"test_accuracy": 0.5}
    assert loaded_tokenizer.encode("a great film") == tokenizer.encode("a great film")
    ids = torch.tensor([[2, 10, 11, 12, 13]])
    with torch.no_grad():
        expected, _ = model(ids)
        got, _ = loaded(ids)
    # bfloat16 keeps 8 bits of mantissa: the logits move by a fraction of a percent.
    assert torch.allclose(got, expected, atol=0.05)


def test_load_trained_names_the_missing_files(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="lacks model.safetensors, tokenizer.json"):
        load_trained(tmp_path)


def test_review_probabilities_come_back_in_the_order_given():
    torch.manual_seed(0)
    model = SequenceClassifier(small_config(max_len=64).transformer())  # buckets pad to 64
    reviews = [np.arange(2, 2 + n) for n in (10, 4, 8, 6, 4)]
    in_order = task.review_probabilities(model, reviews, batch_size=2)
    one_by_one = [
        float(task.positive_probability(model, task.length_buckets([r], [0], 1))[0])
        for r in reviews
    ]
    assert in_order.shape == (5,)
    assert torch.allclose(in_order, torch.tensor(one_by_one), atol=1e-6)
    with pytest.raises(ValueError, match="no reviews to score"):
        task.review_probabilities(model, [], batch_size=2)


def test_prepare_records_which_test_review_each_encoded_one_is(tokenizer):
    texts = ["a great film", "a terrible film", "i loved it", "a waste of time", "the plot"]
    n = len(texts)
    data = IMDB(
        train=reviews(CORPUS[:8], 1),
        test=reviews(texts, np.arange(n) % 2),
        unlabelled=reviews(CORPUS[:4], -1),
        digest="0" * 64,
    )
    prepared = prepare(data, tokenizer, small_config(n_valid=2, seed=3))
    assert sorted(prepared.test_order) == list(range(n))
    assert prepared.test_order != list(range(n))  # shuffled, so the mapping matters
    for j, i in enumerate(prepared.test_order):
        assert prepared.test_texts[j] == texts[i]
        assert prepared.test_labels[j] == data.test.labels[i]
        assert np.array_equal(
            prepared.test[j], task.encode_reviews(tokenizer, [texts[i]], 32, 8)[0]
        )


def test_prepare_never_pretrains_on_a_test_review(tokenizer):
    leaked = "a terrible film, a waste of time"
    train = [text for text in CORPUS if text != leaked][:8]
    data = IMDB(
        train=reviews(train, 1),
        test=reviews([leaked, "i loved it"], 0),
        unlabelled=reviews([leaked, "the plot was thin", leaked, "a great cast"], -1),
        digest="0" * 64,
    )
    assert data.unlabelled_outside_test() == [1, 3]
    prepared = prepare(data, tokenizer, small_config(n_valid=2, seed=0))
    pretrained = prepared.pretrain + prepared.pretrain_valid
    assert len(pretrained) == 6 + 2  # the training reviews left after validation, 2 unlabelled
    (leaked_ids,) = task.encode_reviews(tokenizer, [leaked], 32, 8)
    assert not any(np.array_equal(ids, leaked_ids) for ids in pretrained)


def test_finetune_seed_orders_the_batches(tokenizer):
    config, prepared = finetuning_setup(tokenizer)

    def losses(seed: int | None) -> list[float]:
        torch.manual_seed(0)  # the same classifier every time: only the batch order differs
        classifier = SequenceClassifier(config.transformer())
        run = finetune(
            classifier, prepared, torch.device("cpu"), lr=1e-3, progress=False, seed=seed
        )
        return run.history.train_loss

    assert losses(None) == losses(0)
    assert losses(5) != losses(0)


class CopyingModel(torch.nn.Module):
    """Predicts, at each chosen position, the word its input holds there: right exactly where
    the corruption left the word in place, never at a [MASK]."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.unused = torch.nn.Parameter(torch.zeros(()))  # the optimizer needs a parameter

    def forward(self, inputs: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        shown = inputs.gather(1, positions)  # (batch, k)
        logits = 10.0 * torch.nn.functional.one_hot(shown, self.vocab_size).float()
        return logits + 0.0 * self.unused  # (batch, k, vocab)


def test_pretraining_reports_accuracy_on_the_mask_positions_alone(tokenizer):
    data = IMDB(
        train=reviews(CORPUS, 1),
        test=reviews(["i loved it"], 0),
        unlabelled=reviews(CORPUS, -1),
        digest="0" * 64,
    )
    config = small_config(max_len=8, head_tokens=2, n_valid=10, seed=0, pretrain_steps=2)
    config = config.__class__(**{**config.to_dict(), "pretrain_batch": 2, "mask_fraction": 0.5})
    prepared = prepare(data, tokenizer, config)
    model = CopyingModel(tokenizer.vocab_size)
    result = pretrain(model, prepared, tokenizer, torch.device("cpu"), chunks=1, progress=False)
    metrics = result.history.metrics
    # the copying model is right on every position left unchanged, and on no [MASK]
    assert metrics["mask_token_accuracy"] == [0.0]
    assert 0.0 < metrics["masked_accuracy"][0] < 0.5


def phase_with_chunks() -> PhaseResult:
    """Three chunks of 10 steps of 100 tokens: the first took 5 s (compiling), the others 1 s."""
    history = History()
    for step, seconds in ((10, 5.0), (20, 6.0), (30, 7.0)):
        history.evaluations.append(Evaluation(step, 1, seconds, {}))
    history.steps = 30
    extra = {"flops_per_token": 2e6}
    return PhaseResult(history, 30, 3000, seconds=7.5, eval_seconds=0.5, device="cpu", extra=extra)


def test_throughput_with_and_without_the_first_chunk():
    phase = phase_with_chunks()
    assert phase.tokens_per_second == pytest.approx(3000 / 7.0)
    assert phase.steady_tokens_per_second == pytest.approx(2000 / 2.0)  # chunks 2 and 3 alone
    # 1,000 tokens/s x 2 MFLOP/token = 2 GFLOP/s, against a peak of 0.004 TFLOP/s: half
    assert phase.share_of_peak(0.004, steady=True) == pytest.approx(0.5)
    assert phase.share_of_peak(0.004) == pytest.approx(3000 / 7.0 * 2e6 / 4e9)


def test_share_of_peak_needs_the_flops_and_a_peak():
    phase = phase_with_chunks()
    with pytest.raises(ValueError, match="peak_tflops must be positive, got 0"):
        phase.share_of_peak(0)
    phase.extra.clear()
    with pytest.raises(KeyError, match="recorded no flops_per_token"):
        phase.share_of_peak(989.0)


def test_device_peak_knows_no_cpu_peak():
    assert device_peak(torch.device("cpu")) == ("cpu", None)
