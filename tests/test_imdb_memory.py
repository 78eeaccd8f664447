"""Chapter 13's training memory: the masked-LM head at the hidden positions only, and each
encoder layer recomputed in the backward pass (CPU), both with unchanged results."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlib.data.subwords import SubwordTokenizer
from attnlib.encoder import MaskedLanguageModel, SequenceClassifier, TransformerConfig
from attnlib.tasks import imdb as task
from attnlib.tasks.imdb_train import finetune, recomputing_on_cpu
from tests.helpers import CORPUS, finetuning_setup

CONFIG = TransformerConfig(
    vocab_size=300, d_model=32, num_heads=4, num_layers=3, d_ff=64, max_len=128, norm_first=True
)


@pytest.fixture(scope="module")
def tokenizer() -> SubwordTokenizer:
    return SubwordTokenizer.train(CORPUS, vocab_size=60, min_frequency=1)


def masked_batch(seed: int = 0, batch: int = 3) -> task.MaskedBatch:
    generator = torch.Generator().manual_seed(seed)
    blocks = torch.randint(5, CONFIG.vocab_size, (batch, CONFIG.max_len), generator=generator)
    return task.mask_blocks(blocks, 0.15, 4, CONFIG.vocab_size, 5, generator)


def test_loss_at_the_hidden_positions_equals_the_loss_of_the_full_logits():
    torch.manual_seed(0)
    model = MaskedLanguageModel(CONFIG).eval()  # no dropout: both passes see the same network
    batch = masked_batch()
    with torch.no_grad():
        full = model(batch.inputs)  # (batch, seq, vocab): every position projected
        index = batch.positions.unsqueeze(-1).expand(-1, -1, CONFIG.vocab_size)
        chosen = full.gather(1, index)  # (batch, k, vocab)
        old = F.cross_entropy(chosen.flatten(0, 1), batch.targets.flatten())
        new = task.masked_lm_loss(model, batch)
        at_positions = model(batch.inputs, positions=batch.positions)
    assert abs(float(new) - float(old)) < 1e-5
    assert torch.equal(at_positions.argmax(-1), chosen.argmax(-1))  # the same accuracy


def loss_and_gradients(recompute: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
    torch.manual_seed(0)
    model = MaskedLanguageModel(CONFIG).train()  # dropout on: the masks must be replayed
    model.encoder.recompute = recompute
    torch.manual_seed(1)
    loss = task.masked_lm_loss(model, masked_batch())
    loss.backward()
    return loss.detach(), [p.grad for p in model.parameters()]


def test_recomputed_layers_give_the_same_loss_and_gradients():
    loss, gradients = loss_and_gradients(recompute=False)
    loss_again, gradients_again = loss_and_gradients(recompute=True)
    assert torch.equal(loss, loss_again)
    for kept, recomputed in zip(gradients, gradients_again, strict=True):
        torch.testing.assert_close(recomputed, kept, rtol=1e-6, atol=1e-7)


def saved_bytes(recompute: bool) -> int:
    """Bytes of the distinct tensors the autograd graph keeps for the backward pass."""
    torch.manual_seed(0)
    model = MaskedLanguageModel(CONFIG).train()
    model.encoder.recompute = recompute
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        task.masked_lm_loss(model, masked_batch(batch=4))
    return sum(storages.values())


def test_recomputed_layers_keep_a_fraction_of_the_activations():
    # The (batch, heads, seq, seq) softmax, dropout mask and dropped weights of every layer
    # are no longer kept; the weights themselves still are (the optimizer holds them anyway).
    assert saved_bytes(recompute=True) < saved_bytes(recompute=False) / 3


def test_recompute_is_off_by_default_and_under_no_grad():
    model = MaskedLanguageModel(CONFIG)
    assert model.encoder.recompute is False
    model.encoder.recompute = True
    with torch.no_grad():
        hidden, weights = model.encoder(masked_batch().inputs, need_weights=True)
    assert weights.shape == (3, CONFIG.num_layers, CONFIG.num_heads, 128, 128)


def test_training_on_a_cpu_recomputes_and_puts_the_flag_back(tokenizer):
    config, prepared = finetuning_setup(tokenizer)
    classifier = SequenceClassifier(config.transformer())
    seen = []
    classifier.encoder.register_forward_pre_hook(
        lambda encoder, _: seen.append((torch.is_grad_enabled(), encoder.recompute))
    )
    finetune(classifier, prepared, torch.device("cpu"), lr=1e-3, progress=False)
    assert {recompute for grad, recompute in seen if grad} == {True}  # every training step
    assert classifier.encoder.recompute is False  # as it was before
    with recomputing_on_cpu(classifier, "cuda"):  # a GPU keeps its speed: nothing is changed
        assert classifier.encoder.recompute is False
