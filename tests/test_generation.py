"""attnlib.generation: greedy decoding, with the KV cache equal to recomputing the prefix."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from attnlib.encoder import TransformerConfig
from attnlib.generation import EncoderDecoder, decoder_cache, greedy_decode, kv_cache_bytes

PAD, START, END = 0, 1, 2
SMALL = {"vocab_size": 9, "d_model": 32, "num_heads": 4, "num_layers": 2, "d_ff": 64}


def _key_mask(lengths: torch.Tensor | list[int], seq: int) -> torch.Tensor:
    """(batch, seq), True at real tokens."""
    return torch.arange(seq).unsqueeze(0) < torch.as_tensor(lengths).unsqueeze(1)


def _reversal_batch(batch: int = 16, longest: int = 5) -> tuple[torch.Tensor, ...]:
    """Sources of 2..longest symbols (ids 3..8) and their reversals + END, padded with PAD."""
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(2, longest + 1, (batch,), generator=generator)
    lengths[0] = longest
    source_key_mask = _key_mask(lengths, longest)
    source = torch.randint(3, 9, (batch, longest), generator=generator).masked_fill(
        ~source_key_mask, PAD
    )
    target_out = torch.full((batch, longest + 1), PAD)
    for row, n in enumerate(lengths.tolist()):
        target_out[row, :n] = source[row, :n].flip(0)
        target_out[row, n] = END
    target_in = torch.cat([torch.full((batch, 1), START), target_out[:, :-1]], 1)
    target_in = target_in.masked_fill(target_in == END, PAD)
    return source, source_key_mask, target_in, _key_mask(lengths + 1, longest + 1), target_out


@pytest.fixture(scope="module")
def trained():
    """A small model that has learned to reverse one batch (~0.6 s on one CPU thread)."""
    torch.manual_seed(0)
    source, source_key_mask, target_in, target_key_mask, target_out = _reversal_batch()
    model = EncoderDecoder(TransformerConfig(**SMALL, dropout=0.0))
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(100):  # 60 already reverse every row exactly
        logits, _ = model(source, target_in, source_key_mask, target_key_mask)
        loss = F.cross_entropy(logits.flatten(0, 1), target_out.flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval(), source, source_key_mask, target_out


def _untrained_model(norm_first: bool, fused: bool, positions: str = "sinusoidal"):
    """A freshly initialised model, in training mode as a learner would leave it."""
    torch.manual_seed(1)
    config = TransformerConfig(**SMALL, norm_first=norm_first, fused=fused, max_len=20)
    return EncoderDecoder(dataclasses.replace(config, positions=positions))


def test_greedy_decoding_reverses_the_learned_batch_and_stops_per_sequence(trained):
    model, source, source_key_mask, target_out = trained
    result = greedy_decode(model, source, source_key_mask, start_id=START, end_id=END, max_len=12)
    # The longest source has 5 symbols: 5 + END = 6 steps, then every sequence has finished.
    assert result.tokens.shape == (16, 6)
    assert torch.equal(result.tokens, target_out)  # END, then PAD after it, per sequence
    assert result.logits.shape == (16, 6, 9)
    assert result.cross_weights.shape == (16, 2, 4, 6, 5)  # (batch, layers, heads, steps, src)
    finished_before = torch.cumsum(result.tokens == END, dim=1).roll(1, dims=1)
    finished_before[:, 0] = 0
    live = finished_before == 0  # (batch, steps): steps up to and including END
    sums = result.cross_weights.sum(-1)  # (batch, layers, heads, steps)
    torch.testing.assert_close(sums.permute(0, 3, 1, 2)[live], torch.ones(int(live.sum()), 2, 4))
    assert sums.permute(0, 3, 1, 2)[~live].abs().max().item() == 0.0  # zero after END
    padded = ~source_key_mask[:, None, None, None, :].expand_as(result.cross_weights)
    assert result.cross_weights[padded].abs().max().item() == 0.0


@pytest.mark.parametrize("fused", [False, True])
def test_cache_gives_the_tokens_of_recomputing_the_prefix_on_the_trained_model(trained, fused):
    model, source, source_key_mask, _ = trained
    runs = {
        use_cache: greedy_decode(
            model,
            source,
            source_key_mask,
            start_id=START,
            end_id=END,
            max_len=12,
            use_cache=use_cache,
            need_weights=not fused,
        )
        for use_cache in (True, False)
    }
    cached, recomputed = runs[True], runs[False]
    assert torch.equal(cached.tokens, recomputed.tokens)
    torch.testing.assert_close(cached.logits, recomputed.logits, rtol=0, atol=1e-5)
    if not fused:
        torch.testing.assert_close(
            cached.cross_weights, recomputed.cross_weights, rtol=0, atol=1e-6
        )
    assert recomputed.cache is None and cached.cache.length == 6


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_cache_equals_recomputing_on_an_untrained_model(norm_first, fused, positions):
    model = _untrained_model(norm_first, fused, positions)
    source = torch.randint(3, 9, (4, 7), generator=torch.Generator().manual_seed(2))
    source_key_mask = _key_mask([7, 5, 3, 1], 7)
    options = {"start_id": START, "end_id": END, "max_len": 12, "need_weights": not fused}
    cached = greedy_decode(model, source, source_key_mask, **options)
    recomputed = greedy_decode(model, source, source_key_mask, use_cache=False, **options)
    assert cached.tokens.shape == recomputed.tokens.shape
    assert torch.equal(cached.tokens, recomputed.tokens)
    # Every step's logits agree, so positions and cached keys line up at every step.
    torch.testing.assert_close(cached.logits, recomputed.logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("fused", [False, True])
def test_a_cached_block_and_cached_steps_equal_one_full_pass(norm_first, fused):
    """Any target, not only greedy's: a block of 3 positions at once, then one at a time."""
    model = _untrained_model(norm_first, fused).eval()
    source = torch.randint(3, 9, (2, 5), generator=torch.Generator().manual_seed(3))
    source_key_mask = _key_mask([5, 3], 5)
    target = torch.randint(1, 9, (2, 6), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        full, expected_cross = model(source, target, source_key_mask, need_weights=not fused)
        memory, memory_mask4d = model.encode(source, source_key_mask)
        cache = decoder_cache(model.decoder, memory)
        pieces, crosses = [], []
        for start, stop in ((0, 3), (3, 4), (4, 5), (5, 6)):
            hidden, self_weights, cross = model.decoder.decode(
                target[:, start:stop], None, None, memory_mask4d, not fused, cache
            )
            if not fused:
                assert self_weights.shape == (2, 2, 4, stop - start, stop)  # keys: all cached
                crosses.append(cross)
            pieces.append(model.output(hidden))
    torch.testing.assert_close(torch.cat(pieces, 1), full, rtol=0, atol=1e-5)
    if not fused:
        torch.testing.assert_close(torch.cat(crosses, 3), expected_cross, rtol=0, atol=1e-6)
    assert cache.length == 6


def test_cache_bytes_by_formula_and_by_hand(trained):
    model, source, source_key_mask, _ = trained
    result = greedy_decode(model, source, source_key_mask, start_id=START, end_id=END, max_len=9)
    cache = result.cache
    assert cache.length == 6 and cache.layers[0].keys.shape == (16, 4, 6, 8)
    # 2 (keys, values) x 2 layers x 16 sequences x (6 steps + 5 source) x 32 x 4 bytes
    assert cache.nbytes() == 2 * 2 * 16 * (6 + 5) * 32 * 4 == 90_112
    assert kv_cache_bytes(model.target_config, 16, 6, memory_len=5) == 90_112
    assert kv_cache_bytes(model.target_config, 1, 100, dtype=torch.bfloat16) == 25_600
    with pytest.raises(ValueError, match="batch must be positive, got 0"):
        kv_cache_bytes(model.target_config, 0, 6)


def test_decoding_runs_without_dropout_and_restores_the_mode():
    torch.manual_seed(0)
    model = EncoderDecoder(TransformerConfig(**SMALL, dropout=0.5))
    source = torch.randint(3, 9, (3, 4), generator=torch.Generator().manual_seed(0))
    first = greedy_decode(model, source, start_id=START, end_id=END, max_len=5)
    second = greedy_decode(model, source, start_id=START, end_id=END, max_len=5)
    assert model.training and model.decoder.layers[0].dropout1.training
    torch.testing.assert_close(first.logits, second.logits, rtol=0, atol=0)


def test_greedy_decode_refusals():
    model = _untrained_model(norm_first=False, fused=True)  # max_len 20, target vocab 9
    source = torch.randint(3, 9, (2, 4), generator=torch.Generator().manual_seed(0))
    with pytest.raises(TypeError, match="model must be an EncoderDecoder, got Linear"):
        greedy_decode(torch.nn.Linear(2, 2), source, start_id=START, end_id=END, max_len=3)
    with pytest.raises(ValueError, match=r"start_id=9 is outside the target vocabulary 0..8"):
        greedy_decode(model, source, start_id=9, end_id=END)
    with pytest.raises(ValueError, match="end_id must be an int >= 0, got -1"):
        greedy_decode(model, source, start_id=START, end_id=-1)
    with pytest.raises(ValueError, match="max_len=21 steps need 21 positions, but the decoder"):
        greedy_decode(model, source, start_id=START, end_id=END, max_len=21)
    with pytest.raises(TypeError, match="use_cache must be True or False"):
        greedy_decode(model, source, start_id=START, end_id=END, use_cache="yes")
    with pytest.raises(ValueError, match=r"token id 9 is outside the vocabulary 0..8"):
        greedy_decode(model, source + 1, start_id=START, end_id=END)
    with pytest.raises(ValueError, match=r"source_key_mask must be \(batch, src\) = \(2, 4\)"):
        greedy_decode(model, source, _key_mask([3, 2], 3), start_id=START, end_id=END)


@pytest.mark.parametrize("kv_heads", [1, 2])
@pytest.mark.parametrize("fused", [False, True])
def test_grouped_cache_holds_kv_heads_and_equals_recomputing(kv_heads, fused):
    torch.manual_seed(1)
    config = TransformerConfig(**SMALL, fused=fused, max_len=20, num_kv_heads=kv_heads)
    model = EncoderDecoder(config)
    source = torch.randint(3, 9, (4, 7), generator=torch.Generator().manual_seed(2))
    source_key_mask = _key_mask([7, 5, 3, 1], 7)
    options = {"start_id": START, "end_id": None, "max_len": 9, "need_weights": not fused}
    cached = greedy_decode(model, source, source_key_mask, **options)
    recomputed = greedy_decode(model, source, source_key_mask, use_cache=False, **options)
    assert torch.equal(cached.tokens, recomputed.tokens) and cached.tokens.shape == (4, 9)
    torch.testing.assert_close(cached.logits, recomputed.logits, rtol=0, atol=1e-5)
    assert cached.cache.layers[0].keys.shape == (4, kv_heads, 9, 8)
    assert cached.cache.memory[0].keys.shape == (4, kv_heads, 7, 8)
    # 2 (keys, values) x 2 layers x 4 sequences x (9 steps + 7 source) x kv_heads x 8 x 4 bytes
    expected = 2 * 2 * 4 * (9 + 7) * kv_heads * 8 * 4
    assert cached.cache.nbytes() == expected == kv_cache_bytes(config, 4, 9, memory_len=7)


def test_end_id_none_decodes_exactly_max_len_tokens(trained):
    model, source, source_key_mask, target_out = trained
    result = greedy_decode(model, source, source_key_mask, start_id=START, end_id=None, max_len=9)
    assert result.tokens.shape == (16, 9) and result.cache.length == 9
    # Up to END the tokens are those of decoding with an end token; then it goes on.
    assert torch.equal(result.tokens[0, :6], target_out[0])


def test_cache_rotates_keys_by_their_positions_as_recomputing_does():
    model = _untrained_model(norm_first=False, fused=True)
    layer = model.decoder.layers[1]
    layer.self_attention = layer.self_attention.rotary()
    source = torch.randint(3, 9, (2, 4), generator=torch.Generator().manual_seed(0))
    options = {"start_id": START, "end_id": None, "max_len": 6}
    cached = greedy_decode(model, source, **options)
    recomputed = greedy_decode(model, source, use_cache=False, **options)
    assert torch.equal(cached.tokens, recomputed.tokens) and cached.tokens.shape == (2, 6)
    torch.testing.assert_close(cached.logits, recomputed.logits, rtol=0, atol=1e-5)


def test_cache_refuses_rotary_cross_attention():
    model = _untrained_model(norm_first=False, fused=True)
    layer = model.decoder.layers[0]
    layer.cross_attention = layer.cross_attention.rotary()
    source = torch.randint(3, 9, (2, 4), generator=torch.Generator().manual_seed(0))
    with pytest.raises(TypeError, match="cross-attention cannot have rotary positions"):
        greedy_decode(model, source, start_id=START, end_id=END, max_len=3)


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_with_kv_heads_pools_the_decoder_and_keeps_the_rest(trained, kv_heads):
    from attnlib.generation import with_kv_heads

    model, source, source_key_mask, _ = trained
    grouped = with_kv_heads(model, kv_heads)
    assert grouped.config.num_kv_heads == kv_heads and not grouped.training
    assert model.config.num_kv_heads is None  # the original is untouched
    layer = grouped.decoder.layers[1].cross_attention
    assert layer.num_kv_heads == kv_heads and layer.key_projection.weight.shape == (
        8 * kv_heads,
        32,
    )
    before, after = model.state_dict(), grouped.state_dict()
    kept = [k for k in before if not (k.startswith("decoder.") and "_projection." in k)]
    kept += [k for k in before if "query_projection" in k or "output_projection" in k]
    assert all(torch.equal(before[k], after[k]) for k in kept)
    assert grouped.output.weight is grouped.decoder.embedding.weight  # still tied
    options = {"start_id": START, "end_id": None, "max_len": 6}
    cached = greedy_decode(grouped, source, source_key_mask, **options)
    recomputed = greedy_decode(grouped, source, source_key_mask, use_cache=False, **options)
    assert torch.equal(cached.tokens, recomputed.tokens)
    assert cached.cache.layers[0].keys.shape == (16, kv_heads, 6, 8)


def test_with_kv_heads_refuses_what_it_cannot_convert(trained):
    from attnlib.generation import with_kv_heads

    model = trained[0]
    with pytest.raises(TypeError, match="model must be an EncoderDecoder, got Encoder"):
        with_kv_heads(model.encoder, 1)
    with pytest.raises(ValueError, match="num_kv_heads=3 does not divide num_heads=4"):
        with_kv_heads(model, 3)


@pytest.mark.parametrize("positions", ["rotary", "none", "learned"])
@pytest.mark.parametrize("window", [None, 2])
@pytest.mark.parametrize("fused", [False, True])
def test_cache_equals_recomputing_with_any_positions_and_a_window(positions, window, fused):
    torch.manual_seed(3)
    config = TransformerConfig(
        **SMALL, fused=fused, max_len=20, positions=positions, window=window, num_kv_heads=2
    )
    model = EncoderDecoder(config)
    source = torch.randint(3, 9, (3, 6), generator=torch.Generator().manual_seed(4))
    options = {"start_id": START, "end_id": None, "max_len": 8, "need_weights": not fused}
    cached = greedy_decode(model, source, **options)
    recomputed = greedy_decode(model, source, use_cache=False, **options)
    assert torch.equal(cached.tokens, recomputed.tokens)
    torch.testing.assert_close(cached.logits, recomputed.logits, rtol=0, atol=1e-5)
    kept = 8 if window is None else window
    assert cached.cache.layers[0].keys.shape == (3, 2, kept, 8)
