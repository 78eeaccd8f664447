"""attnlib.transformer and attnlib.encoder: against torch's own layer, the laws, the counts."""

import math

import pytest
import torch
from torch import nn

from attnlib.encoder import (
    Encoder,
    MaskedLanguageModel,
    SequenceClassifier,
    TransformerConfig,
    count_parameters,
    flops_per_token,
    parameter_breakdown,
    parameter_count,
)
from attnlib.transformer import (
    EncoderLayer,
    FeedForward,
    LearnedPositions,
    SinusoidalPositions,
    offset_rotation,
    sinusoidal_encoding,
    xavier_init_,
)

SMALL = {"vocab_size": 37, "d_model": 16, "num_heads": 4, "num_layers": 3, "d_ff": 24}


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _key_mask(lengths: list[int], seq: int) -> torch.Tensor:
    """(batch, seq), True at real tokens."""
    return torch.arange(seq).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)


def _ids(batch: int, seq: int, vocab: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(1, vocab, (batch, seq), generator=generator)


# --- equality with torch.nn.TransformerEncoderLayer -----------------------------------------


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("fused", [False, True])
def test_encoder_layer_equals_torch_layer(norm_first, padded, fused):
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(
        16, 4, 24, dropout=0.1, batch_first=True, norm_first=norm_first
    ).eval()
    with torch.no_grad():  # torch starts LayerNorms at 1/0: move them so the test sees them
        for norm in (theirs.norm1, theirs.norm2):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    ours = EncoderLayer(16, 4, 24, dropout=0.1, norm_first=norm_first, fused=fused)
    ours.load_from_torch(theirs).eval()
    x = _randn(3, 7, 16, seed=1)
    key_mask = _key_mask([7, 4, 1], 7) if padded else None
    # torch's key_padding_mask is True at padding: the inverse of our key_mask.
    expected = theirs(x, src_key_padding_mask=None if key_mask is None else ~key_mask)
    got, weights = ours.checked_forward(x, key_mask=key_mask)
    assert got.shape == (3, 7, 16)
    assert weights is None if fused else weights.shape == (3, 4, 7, 7)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    # need_weights forces the from-scratch path, which gives the same output.
    again, weights = ours.checked_forward(x, key_mask=key_mask, need_weights=True)
    assert weights.shape == (3, 4, 7, 7)
    torch.testing.assert_close(again, expected, rtol=0, atol=1e-5)


def test_load_from_torch_refuses_other_configurations():
    ours = EncoderLayer(16, 4, 24, dropout=0.1)
    with pytest.raises(ValueError, match=r"d_ff=32 \(ours 24\)"):
        ours.load_from_torch(nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True))
    with pytest.raises(ValueError, match=r"norm_first=True \(ours False\)"):
        ours.load_from_torch(
            nn.TransformerEncoderLayer(16, 4, 24, dropout=0.1, batch_first=True, norm_first=True)
        )
    with pytest.raises(ValueError, match=r"batch_first=False \(ours True\)"):
        ours.load_from_torch(nn.TransformerEncoderLayer(16, 4, 24, dropout=0.1))
    other = nn.TransformerEncoderLayer(16, 2, 24, 0.2, activation="gelu", batch_first=True)
    with pytest.raises(ValueError) as caught:
        ours.load_from_torch(other)
    assert str(caught.value) == (
        "torch layer differs from this one: num_heads=2 (ours 4), dropout=0.2 (ours 0.1), "
        "activation=gelu (ours relu)"
    )


# --- positions -------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model", [16, 17, 64, 7])
def test_sinusoidal_encoding_follows_the_formula(d_model):
    table = sinusoidal_encoding(50, d_model)
    assert table.shape == (50, d_model) and table.dtype == torch.float32
    for pos in (0, 3, 49):
        for column in range(d_model):
            i = column // 2
            angle = pos / 10000 ** (2 * i / d_model)
            expected = math.sin(angle) if column % 2 == 0 else math.cos(angle)
            assert table[pos, column].item() == pytest.approx(expected, abs=1e-6)


def test_sinusoidal_encoding_edge_sizes():
    assert sinusoidal_encoding(0, 4).shape == (0, 4)
    torch.testing.assert_close(sinusoidal_encoding(3, 1)[:, 0], torch.sin(torch.arange(3.0)))
    with pytest.raises(ValueError, match="length must be an int >= 0, got -1"):
        sinusoidal_encoding(-1, 4)


@pytest.mark.parametrize("d_model", [16, 17, 64, 5])
def test_relative_position_law(d_model):
    """PE(pos + k) = M(k) PE(pos) on the sine/cosine pairs, M(k) block-diagonal rotations."""
    table = sinusoidal_encoding(400, d_model).double()
    paired = 2 * (d_model // 2)
    for k in (0, 1, 2, 7, 50, 123, 299):
        rotation = offset_rotation(k, d_model).double()
        assert rotation.shape == (paired, paired)
        blocks = torch.block_diag(*(rotation[i : i + 2, i : i + 2] for i in range(0, paired, 2)))
        torch.testing.assert_close(rotation, blocks, rtol=0, atol=0)  # nothing off the blocks
        identity = torch.eye(paired, dtype=torch.float64)
        torch.testing.assert_close(rotation @ rotation.T, identity, rtol=0, atol=1e-6)
        shifted = table[k : k + 100, :paired]  # PE(pos + k) for pos = 0..99
        # the same M(k) for every pos: rows are PE(pos), so PE(pos + k) = PE(pos) M(k)^T.
        torch.testing.assert_close(shifted, table[:100, :paired] @ rotation.T, rtol=0, atol=2e-6)
    if d_model % 2:
        # The lone last column is a sine at the last frequency; it has no cosine partner.
        angle = torch.arange(400.0, dtype=torch.float64) * 10000 ** (-(d_model - 1) / d_model)
        torch.testing.assert_close(table[:, -1], torch.sin(angle), rtol=0, atol=1e-6)


def test_position_modules_add_their_tables():
    x = _randn(2, 9, 6, seed=0)
    sinusoidal = SinusoidalPositions(6, max_len=4)  # shorter than the input: a fresh table
    torch.testing.assert_close(sinusoidal(x) - x, sinusoidal_encoding(9, 6).expand(2, 9, 6))
    assert not sinusoidal.state_dict()  # the table is a formula, not a checkpoint entry
    learned = LearnedPositions(6, max_len=9)
    torch.testing.assert_close(learned(x) - x, learned.weight.detach().expand(2, 9, 6))
    assert learned.weight.std().item() == pytest.approx(0.02, rel=0.3)
    with pytest.raises(ValueError, match="sequence of 10 positions but learned positions stop at"):
        learned(_randn(1, 10, 6, seed=1))


# --- the layer's two orders ------------------------------------------------------------------


def test_post_ln_and_pre_ln_differ_only_in_the_order():
    torch.manual_seed(0)
    post = EncoderLayer(16, 4, 24, dropout=0.0, norm_first=False).eval()
    pre = EncoderLayer(16, 4, 24, dropout=0.0, norm_first=True).eval()
    assert list(post.state_dict()) == list(pre.state_dict())  # the same parts
    pre.load_state_dict(post.state_dict())
    x = _randn(2, 5, 16, seed=1)

    def attention(h):
        return post.attention(h)[0]

    feed_forward, norm1, norm2 = post.feed_forward, post.norm1, post.norm2
    with torch.no_grad():
        y = norm1(x + attention(x))
        expected_post = norm2(y + feed_forward(y))
        z = x + attention(norm1(x))
        expected_pre = z + feed_forward(norm2(z))
        got_post, got_pre = post(x)[0], pre(x)[0]
    torch.testing.assert_close(got_post, expected_post, rtol=0, atol=1e-6)
    torch.testing.assert_close(got_pre, expected_pre, rtol=0, atol=1e-6)
    assert (got_post - got_pre).abs().max().item() > 0.1
    # Post-LN ends on a LayerNorm (gain 1, bias 0): every position has mean 0, variance 1.
    assert got_post.mean(-1).abs().max().item() < 1e-5
    assert got_pre.mean(-1).abs().max().item() > 1e-2
    assert isinstance(Encoder(TransformerConfig(**SMALL)).final_norm, nn.Identity)
    assert isinstance(Encoder(TransformerConfig(**SMALL, norm_first=True)).final_norm, nn.LayerNorm)


def test_feed_forward_is_relu_between_two_linears():
    ff = FeedForward(6, 10, dropout=0.0)
    x = _randn(2, 3, 6, seed=0)
    w1, b1, w2, b2 = ff.linear1.weight, ff.linear1.bias, ff.linear2.weight, ff.linear2.bias
    expected = torch.clamp(x @ w1.T + b1, min=0) @ w2.T + b2
    torch.testing.assert_close(ff(x), expected)
    with pytest.raises(ValueError, match="unknown activation 'tanh'; choose 'relu' or 'gelu'"):
        FeedForward(6, 10, activation="tanh")


# --- the encoder: shapes and masks -----------------------------------------------------------


@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_and_model_shapes(positions, norm_first):
    config = TransformerConfig(**SMALL, positions=positions, norm_first=norm_first)
    ids, key_mask = _ids(3, 8, 37, seed=0), _key_mask([8, 5, 2], 8)
    hidden, weights = Encoder(config)(ids, key_mask)
    assert hidden.shape == (3, 8, 16) and weights is None
    hidden, weights = Encoder(config)(ids, key_mask, need_weights=True)
    assert weights.shape == (3, 3, 4, 8, 8)  # (batch, layers, heads, seq, seq)
    logits, weights = SequenceClassifier(config, num_classes=5)(ids, key_mask, need_weights=True)
    assert logits.shape == (3, 5) and weights.shape == (3, 3, 4, 8, 8)
    mlm = MaskedLanguageModel(config)
    assert mlm(ids, key_mask).shape == (3, 8, 37)
    assert mlm(ids, key_mask, positions=torch.tensor([[0, 2]] * 3)).shape == (3, 2, 37)


@pytest.mark.parametrize("fused", [False, True])
def test_padding_reaches_every_layer(fused):
    encoder = Encoder(TransformerConfig(**{**SMALL, "num_layers": 4}, fused=fused)).eval()
    key_mask = _key_mask([9, 6, 3], 9)
    ids = _ids(3, 9, 37, seed=0)
    other = torch.where(key_mask, ids, _ids(3, 9, 37, seed=1))  # new tokens at the padding only
    assert (other != ids).sum().item() > 5
    outputs: list[torch.Tensor] = []
    hooks = [
        layer.register_forward_hook(lambda m, i, o: outputs.append(o[0]))
        for layer in encoder.layers
    ]
    with torch.no_grad():
        _, weights = encoder(ids, key_mask, need_weights=not fused)
        encoder(other, key_mask, need_weights=not fused)
    for hook in hooks:
        hook.remove()
    assert len(outputs) == 8
    real = key_mask.unsqueeze(-1)
    for first, second in zip(outputs[:4], outputs[4:], strict=True):
        torch.testing.assert_close(first * real, second * real, rtol=0, atol=1e-6)
        assert ((first - second).abs() * ~real).max().item() > 1e-3  # padding itself did change
    if not fused:
        padded_keys = ~key_mask[:, None, None, None, :].expand_as(weights)
        assert weights[padded_keys].abs().max().item() == 0.0  # exactly zero, every layer
        torch.testing.assert_close(weights.sum(-1), torch.ones(3, 4, 4, 9))


def test_classifier_mean_pooling_ignores_padding():
    torch.manual_seed(0)
    config = TransformerConfig(**SMALL)
    model = SequenceClassifier(config).eval()
    key_mask = _key_mask([6, 3], 6)
    ids = _ids(2, 6, 37, seed=0)
    other = torch.where(key_mask, ids, _ids(2, 6, 37, seed=1))
    with torch.no_grad():
        torch.testing.assert_close(model(ids, key_mask)[0], model(other, key_mask)[0])
        # Short sequence alone, without padding, gives the same logits.
        alone = model(ids[1:, :3])[0]
        torch.testing.assert_close(alone, model(ids, key_mask)[0][1:], rtol=0, atol=1e-5)
        first = SequenceClassifier(config, pooling="first").eval()
        hidden, _ = first.encoder(ids, key_mask)
        torch.testing.assert_close(first(ids, key_mask)[0], first.head(hidden[:, 0]))


def test_mlm_positions_select_rows_of_the_full_logits():
    mlm = MaskedLanguageModel(TransformerConfig(**SMALL)).eval()
    ids, key_mask = _ids(2, 6, 37, seed=0), _key_mask([6, 4], 6)
    positions = torch.tensor([[1, 4], [3, 0]])
    with torch.no_grad():
        full = mlm(ids, key_mask)
        selected = mlm(ids, key_mask, positions=positions)
    assert selected.shape == (2, 2, 37)
    torch.testing.assert_close(selected, full[torch.arange(2)[:, None], positions])
    with pytest.raises(
        ValueError, match=r"positions must be \(batch, k\) with batch=2, got shape \(1, 2\)"
    ):
        mlm(ids, key_mask, positions=positions[:1])
    with pytest.raises(TypeError, match="positions must be an integer tensor"):
        mlm(ids, key_mask, positions=positions.float())


def test_models_run_under_bf16_autocast_and_backward_on_both_paths():
    for fused in (False, True):
        model = SequenceClassifier(TransformerConfig(**SMALL, fused=fused))
        ids, key_mask = _ids(2, 5, 37, seed=0), _key_mask([5, 2], 5)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits, _ = model(ids, key_mask)
        assert logits.dtype == torch.bfloat16 and logits.shape == (2, 2)
        logits.float().sum().backward()
        grad = model.encoder.layers[0].attention.query_projection.weight.grad
        assert grad is not None and torch.isfinite(grad).all()


# --- tying, counts, initialisation -----------------------------------------------------------


def test_tied_projection_shares_the_embedding_storage():
    config = TransformerConfig(**SMALL)
    tied, untied = MaskedLanguageModel(config), MaskedLanguageModel(config, tie_weights=False)
    assert tied.output.weight is tied.encoder.embedding.weight
    assert tied.output.weight.data_ptr() == tied.encoder.embedding.weight.data_ptr()
    assert untied.output.weight.data_ptr() != untied.encoder.embedding.weight.data_ptr()
    assert count_parameters(untied) - count_parameters(tied) == 37 * 16
    # The tied weight kept the embedding's init (std d^-0.5), not Xavier's for a 16->37 matrix.
    assert tied.output.weight.std().item() == pytest.approx(16**-0.5, rel=0.2)
    # A pretrained MLM encoder loads into a classifier and computes the same hidden states.
    classifier = SequenceClassifier(config)
    classifier.encoder.load_state_dict(tied.encoder.state_dict())
    ids = _ids(2, 5, 37, seed=0)
    tied.eval()
    classifier.eval()
    torch.testing.assert_close(classifier.encoder(ids)[0], tied.encoder(ids)[0])


@pytest.mark.parametrize(
    "changes",
    [{}, {"positions": "learned"}, {"norm_first": True}, {"d_model": 24, "num_heads": 3}],
)
def test_parameter_count_formula_matches_the_modules(changes):
    config = TransformerConfig(**{**SMALL, **changes})
    assert count_parameters(Encoder(config)) == parameter_count(config)
    classifier = SequenceClassifier(config, num_classes=3)
    assert count_parameters(classifier) == parameter_count(config, "classifier", num_classes=3)
    for tie in (True, False):
        mlm = MaskedLanguageModel(config, tie_weights=tie)
        assert count_parameters(mlm) == parameter_count(config, "mlm", tie_weights=tie)


def test_parameter_count_of_the_default_block_by_hand():
    config = TransformerConfig(vocab_size=8000)
    blocks = parameter_breakdown(config)
    # 4 (256^2 + 256) + (256*1024 + 1024 + 1024*256 + 256) + 4*256
    assert blocks["per_layer"] == 263_168 + 525_568 + 1_024 == 789_760
    assert count_parameters(EncoderLayer(256, 4, 1024)) == 789_760
    assert parameter_count(config) == 8000 * 256 + 4 * 789_760 == 5_207_040
    with pytest.raises(ValueError, match="unknown head 'decoder'"):
        parameter_count(config, head="decoder")


def test_flops_per_token_by_hand():
    config = TransformerConfig(vocab_size=8000)  # d 256, d_ff 1024, 4 layers
    per_layer = 2 * (4 * 256 * 256 + 2 * 256 * 1024) + 2 * 2 * 128 * 256
    assert per_layer == 1_703_936
    assert flops_per_token(config, 128, training=False) == 4 * per_layer
    assert flops_per_token(config, 128) == 3 * 4 * per_layer == 20_447_232
    with pytest.raises(ValueError, match="seq_len must be positive, got 0"):
        flops_per_token(config, 0)


def test_xavier_init_values():
    encoder = Encoder(TransformerConfig(**{**SMALL, "d_model": 64, "d_ff": 128}))
    linear = encoder.layers[0].feed_forward.linear1  # 64 -> 128
    bound = math.sqrt(6 / (64 + 128))
    assert linear.weight.abs().max().item() <= bound
    assert linear.weight.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.1)
    assert linear.bias.abs().max().item() == 0.0
    assert encoder.layers[1].attention.output_projection.bias.abs().max().item() == 0.0
    embedding = encoder.embedding.weight
    assert embedding[0].abs().max().item() == 0.0  # the padding row
    assert embedding[1:].std().item() == pytest.approx(64**-0.5, rel=0.15)


def test_xavier_keeps_variance_through_20_layers_where_naive_init_explodes():
    def variance_after(init) -> list[float]:
        torch.manual_seed(0)
        stack = nn.Sequential(*(nn.Linear(64, 64) for _ in range(20))).double()
        init(stack)
        x = torch.randn(1024, 64, dtype=torch.float64)
        variances = []
        with torch.no_grad():
            for layer in stack:
                x = layer(x)
                variances.append(x.var().item())
        return variances

    xavier = variance_after(xavier_init_)
    naive = variance_after(lambda s: [nn.init.normal_(p, 0.0, 1.0) for p in s.parameters()])
    assert all(0.5 < v < 2.0 for v in xavier), xavier
    # N(0, 1) weights multiply the variance by about fan_in = 64 per layer: 64^20 ~ 1e36.
    assert naive[0] > 30 and naive[-1] > 1e30


# --- configuration and input errors ----------------------------------------------------------


def test_config_round_trips_through_a_weights_only_checkpoint(tmp_path):
    config = TransformerConfig(**SMALL, positions="learned", norm_first=True, dropout=0.2)
    torch.save({"config": config.to_dict()}, tmp_path / "c.pt")
    loaded = torch.load(tmp_path / "c.pt", weights_only=True)
    assert TransformerConfig.from_dict(loaded["config"]) == config
    with pytest.raises(ValueError, match="unknown TransformerConfig keys: colour, size"):
        TransformerConfig.from_dict({**config.to_dict(), "size": 1, "colour": "red"})


def test_a_config_saved_before_the_rename_loads_its_key_value_heads():
    saved = {**TransformerConfig(**SMALL).to_dict(), "decoder_kv_heads": 2}
    del saved["num_kv_heads"]  # a checkpoint of an earlier attnlib has the old name only
    assert TransformerConfig.from_dict(saved).num_kv_heads == 2
    with pytest.raises(ValueError, match="'decoder_kv_heads' is the old name of 'num_kv_heads'"):
        TransformerConfig.from_dict({**saved, "num_kv_heads": 2})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"num_heads": 5}, "num_heads=5 does not divide d_model=16"),
        ({"num_layers": 0}, "num_layers must be a positive integer, got 0"),
        ({"d_ff": 2.5}, "d_ff must be a non-negative integer, got 2.5"),
        ({"d_ff": -1}, "d_ff must be a non-negative integer, got -1"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\), got 1.0"),
        (
            {"positions": "alibi"},
            "unknown positions 'alibi'; choose one of 'sinusoidal', 'learned', 'rotary', 'none'",
        ),
        ({"activation": "swish"}, "unknown activation 'swish'; choose 'relu' or 'gelu'"),
        ({"pad_id": 37}, r"pad_id=37 is outside the vocabulary 0..36"),
        ({"window": 0}, "window must be positive, got 0"),
    ],
)
def test_config_refusals(changes, message):
    with pytest.raises(ValueError, match=message):
        TransformerConfig(**{**SMALL, **changes})


def test_encoder_input_refusals():
    encoder = Encoder(TransformerConfig(**SMALL, max_len=10))
    ids = _ids(2, 6, 37, seed=0)
    with pytest.raises(TypeError, match="ids must be integer token ids"):
        encoder(ids.float())
    with pytest.raises(
        ValueError, match=r"ids must be \(batch, seq\) with seq >= 1, got shape \(6,\)"
    ):
        encoder(ids[0])
    with pytest.raises(ValueError, match="sequence of 11 tokens is longer than max_len=10"):
        encoder(_ids(1, 11, 37, seed=0))
    with pytest.raises(ValueError, match=r"token id 37 is outside the vocabulary 0..36"):
        encoder(torch.tensor([[1, 37]]))
    with pytest.raises(ValueError, match=r"token id -1 is outside the vocabulary 0..36"):
        encoder(torch.tensor([[-1, 3]]))
    with pytest.raises(ValueError, match=r"key_mask must be \(batch, n_keys\) = \(2, 6\)"):
        encoder(ids, _key_mask([3, 2], 5))
    with pytest.raises(TypeError, match="key_mask must be boolean"):
        encoder(ids, _key_mask([3, 2], 6).long())
    encoder.check_ids = False  # the host sync skipped: torch's own lookup error remains
    with pytest.raises(IndexError):
        encoder(torch.tensor([[1, 37]]))
    layer = encoder.layers[0]
    with pytest.raises(ValueError, match=r"x must be \(batch, seq, d_model=16\), got shape"):
        layer.checked_forward(_randn(2, 3, 8, seed=0))
    with pytest.raises(ValueError, match="unknown pooling 'max'; choose 'mean' or 'first'"):
        SequenceClassifier(TransformerConfig(**SMALL), pooling="max")
    with pytest.raises(ValueError, match="num_classes must be positive, got 0"):
        SequenceClassifier(TransformerConfig(**SMALL), num_classes=0)


def test_config_names_the_window_only_when_set():
    assert "window" not in repr(TransformerConfig(**SMALL))
    assert repr(TransformerConfig(**SMALL, window=4)).endswith("window=4)")
