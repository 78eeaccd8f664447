"""The decoder-only language model: the cache against recomputing for every configuration, the
implementations against each other, and the model against the encoder it is built from."""

import itertools

import pytest
import torch

from attnlib.encoder import Encoder, TransformerConfig, parameter_breakdown
from attnlib.lm import DecoderOnlyLM
from attnlib.masks import causal_mask

POSITIONS = ("sinusoidal", "learned", "rotary", "none")
KV_HEADS = (1, 2, 4)  # multi-query, grouped, one per query head
WINDOWS = (None, 3)
IMPLEMENTATIONS = ("eager", "sdpa", "flash")
SEEDS = (0, 1)
COMBINATIONS = list(itertools.product(POSITIONS, KV_HEADS, WINDOWS, IMPLEMENTATIONS, SEEDS))


def _config(**changes) -> TransformerConfig:
    options = {
        "vocab_size": 11,
        "d_model": 16,
        "num_heads": 4,
        "num_layers": 2,
        "d_ff": 32,
        "dropout": 0.1,
        "max_len": 16,
    }
    return TransformerConfig(**(options | changes))


def _prompt(batch: int, n: int, seed: int) -> torch.Tensor:
    return torch.randint(1, 11, (batch, n), generator=torch.Generator().manual_seed(seed))


def _model(seed: int, implementation: str | None = None, **changes) -> DecoderOnlyLM:
    torch.manual_seed(seed)
    return DecoderOnlyLM(_config(**changes), implementation=implementation)


def test_the_property_grid_has_144_cases():
    assert len(COMBINATIONS) == 4 * 3 * 2 * 3 * 2 == 144


@pytest.mark.parametrize(
    ("positions", "kv_heads", "window", "implementation", "seed"), COMBINATIONS
)
def test_cache_gives_the_tokens_and_logits_of_recomputing(
    positions, kv_heads, window, implementation, seed
):
    model = _model(seed, implementation, positions=positions, num_kv_heads=kv_heads, window=window)
    prompt = _prompt(3, 5, seed)
    cached = model.generate(prompt, 7)
    recomputed = model.generate(prompt, 7, use_cache=False)
    assert torch.equal(cached.tokens, recomputed.tokens) and cached.tokens.shape == (3, 7)
    torch.testing.assert_close(cached.logits, recomputed.logits, rtol=0, atol=1e-5)
    layer = cached.cache.layers[0]
    # 5 + 7 positions fed (the last token is never fed back); a window keeps window of them
    assert cached.cache.length == 11
    assert layer.keys.shape == (3, kv_heads, 11 if window is None else window, 4)


@pytest.mark.parametrize(
    ("positions", "kv_heads", "window"), list(itertools.product(POSITIONS, KV_HEADS, WINDOWS))
)
def test_the_three_implementations_agree(positions, kv_heads, window):
    model = _model(0, positions=positions, num_kv_heads=kv_heads, window=window).eval()
    ids = _prompt(2, 12, 1)
    logits = {}
    for implementation in IMPLEMENTATIONS:
        model.implementation = implementation
        logits[implementation] = model(ids)
    torch.testing.assert_close(logits["sdpa"], logits["eager"], rtol=0, atol=1e-5)
    torch.testing.assert_close(logits["flash"], logits["eager"], rtol=0, atol=1e-5)


def test_it_is_the_encoder_stack_under_a_causal_mask():
    model = _model(2).eval()
    encoder = Encoder(model.config).eval()
    own = {key: value for key, value in model.state_dict().items() if key != "output.bias"}
    encoder.load_state_dict({k: v for k, v in own.items() if not k.startswith("output.")})
    ids = _prompt(2, 9, 3)
    hidden, _ = encoder.encode(ids, causal_mask(9)[None, None])
    torch.testing.assert_close(model(ids), model.output(hidden), rtol=0, atol=1e-6)


def test_a_position_sees_no_later_one_and_a_window_no_earlier_one():
    ids = _prompt(1, 10, 4)
    changed_last = ids.clone()
    changed_last[0, -1] = (ids[0, -1] + 1) % 11
    changed_first = ids.clone()
    changed_first[0, 0] = (ids[0, 0] + 1) % 11
    model = _model(5, positions="rotary").eval()
    before = model(ids)
    assert torch.equal(model(changed_last)[:, :-1], before[:, :-1])  # causal
    windowed = _model(5, positions="rotary", window=3).eval()
    before = windowed(ids)
    after = windowed(changed_first)
    # with two layers, token 0 reaches at most positions 0 .. 2 * (3 - 1) = 4
    assert torch.equal(after[:, 5:], before[:, 5:]) and not torch.equal(after[:, 4], before[:, 4])


def test_rotary_positions_rotate_in_attention_and_add_no_table():
    model = _model(0, positions="rotary")
    assert isinstance(model.positions, torch.nn.Identity)
    assert {layer.attention.rotary_base for layer in model.layers} == {10000.0}
    assert _model(0).layers[0].attention.rotary_base is None


def test_tied_output_is_the_embedding_and_generate_restores_the_mode():
    model = _model(0)
    assert model.output.weight is model.embedding.weight
    model.train()
    model.generate(_prompt(1, 2, 0), 2)
    assert model.training


def test_generation_stops_when_every_sequence_has_ended():
    model = _model(6).eval()
    prompt = _prompt(2, 3, 6)
    first = model.generate(prompt, 1).tokens[:, 0]
    ended = model.generate(prompt, 8, end_id=int(first[0]))
    assert ended.tokens[0, 0] == first[0]
    if ended.tokens.shape[1] < 8:  # both ended: the one that ended first is padded after
        assert bool((ended.tokens == first[0]).any(dim=1).all())


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda m: m(torch.zeros(2, 3)), TypeError, "ids must be integer token ids"),
        (lambda m: m(torch.tensor([[1, 11]])), ValueError, "token id 11 is outside the vocab"),
        (lambda m: m(torch.zeros(2, 0, dtype=torch.long)), ValueError, "with n >= 1"),
        (lambda m: m.generate(_prompt(1, 10, 0), 7), ValueError, "17 positions, but the sinus"),
        (lambda m: m.generate(_prompt(1, 2, 0), 0), ValueError, "max_new_tokens must be pos"),
        (lambda m: m.generate(_prompt(1, 2, 0), 2, end_id=11), ValueError, "end_id=11 is outs"),
        (lambda m: setattr(m, "implementation", "fast"), ValueError, "unknown attention impl"),
    ],
)
def test_bad_input_is_refused_by_name(call, error, message):
    with pytest.raises(error, match=message):
        call(_model(0))


def test_flash_refuses_dropout_while_training():
    model = _model(0, "flash").train()
    with pytest.raises(ValueError, match="the flash implementation has no dropout"):
        model(_prompt(1, 4, 0))
    assert _model(0, "flash", dropout=0.0).train()(_prompt(1, 4, 0)).shape == (1, 4, 11)


def test_rotary_and_no_positions_may_run_past_max_len():
    model = _model(0, positions="rotary", max_len=4).eval()
    assert model.generate(_prompt(1, 3, 0), 5).tokens.shape == (1, 5)


def test_attention_only_layers_have_no_feed_forward_and_count_as_the_formula_says():
    model = _model(0, d_ff=0)
    assert all(layer.feed_forward is None for layer in model.layers)
    assert all(isinstance(layer.norm2, torch.nn.Identity) for layer in model.layers)
    per_layer = sum(p.numel() for p in model.layers[0].parameters())
    assert (
        per_layer == 4 * (16 * 16 + 16) + 2 * 16 == parameter_breakdown(model.config)["per_layer"]
    )
    assert model(_prompt(2, 5, 0)).shape == (2, 5, 11)


def test_attention_weights_are_causal_rows_that_sum_to_one():
    model = _model(0, positions="rotary", window=3).eval()
    logits, weights = model.attention_weights(_prompt(2, 6, 1))
    assert weights.shape == (2, 2, 4, 6, 6)
    torch.testing.assert_close(logits, model(_prompt(2, 6, 1)), rtol=0, atol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 4, 6))
    allowed = torch.ones(6, 6).tril() - torch.ones(6, 6).tril(-3)  # itself and 2 before
    assert bool((weights * (1 - allowed) == 0).all())


def test_an_ablated_head_changes_the_output_and_comes_back_afterwards():
    model = _model(0).eval()
    ids = _prompt(1, 6, 2)
    before = model(ids)
    with model.ablated([(1, 2)]):
        after = model(ids)
        assert model.layers[1].attention.head_gate.tolist() == [1.0, 1.0, 0.0, 1.0]
        assert model.layers[0].attention.head_gate is None
    assert not torch.equal(after, before)
    torch.testing.assert_close(model(ids), before, rtol=0, atol=0)
    with pytest.raises(ValueError, match="head 4 is outside 0..3"), model.ablated([(0, 4)]):
        pass


def test_ablating_every_head_of_an_attention_only_model_leaves_the_direct_path():
    model = _model(0, d_ff=0, positions="none", norm_first=True).eval()
    ids = _prompt(1, 6, 3)
    every = [(layer, head) for layer in range(2) for head in range(4)]
    with model.ablated(every):
        logits = model(ids)
    # what is left: embedding, the attention layers' output biases, final norm, unembedding
    x = model.embedding(ids) * 4.0 + sum(
        layer.attention.output_projection.bias for layer in model.layers
    )
    torch.testing.assert_close(logits, model.output(model.final_norm(x)), rtol=0, atol=1e-5)
