"""Chapter 10's explorers: stack.js computes what attnlib.reference (and attnlib) computes.

attnlib/live/stack.js runs in node: its random numbers and weights must equal the oracle's, its
LayerNorm, BatchNorm and their statistics must match :mod:`attnlib.reference` to 1e-12, and its
stack profiles (forward and backward through post-LN and pre-LN blocks) to 1e-10. The oracle is
checked against ``torch.nn.LayerNorm``, ``torch.nn.BatchNorm1d`` in training mode and attnlib's
``EncoderLayer`` under autograd, in float64. All node cases go through one node process.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import attnlib.live
from attnlib import reference
from attnlib.live.stack_explorer import CHAPTER_BATCH, norms_live, stack_live
from attnlib.transformer import EncoderLayer
from tests.helpers import case_harness, node_answers

STACK_JS = Path(attnlib.live.__file__).with_name("stack.js")
NORM_TOL = 1e-12
STACK_RTOL = 1e-10
WEIGHT_NAMES = {
    "W_Q": "attention.query_projection.weight",
    "W_K": "attention.key_projection.weight",
    "W_V": "attention.value_projection.weight",
    "W_O": "attention.output_projection.weight",
    "W_1": "feed_forward.linear1.weight",
    "W_2": "feed_forward.linear2.weight",
}

HARNESS = case_harness(
    """
const stack = require(process.argv[1]);
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
const run = {
  uniform: (c) => stack.hashUniform(c.seed, c.stream, c.count),
  weights: (c) => stack.stackWeights(c.seed, c.layers),
  input: (c) => ({ input: stack.stackInput(c.seed, c.std), readout: stack.stackReadout(c.seed) }),
  norms: (c) => ({
    layer: stack.layerNorm(c.batch),
    batch: stack.batchNorm(c.batch),
    rows: stack.normStatistics(c.batch, 1),
    columns: stack.normStatistics(c.batch, 0),
  }),
  profile: (c) => stack.stackProfile(c.norm_first, c.layers, c.seed, c.std),
};
"""
)

UNIFORM_CASES = [
    {"kind": "uniform", "seed": seed, "stream": stream, "count": 50}
    for seed in (0, 1, 9, 2**31 + 5, 2**32 - 1)
    for stream in (0, 7, 1_000_001)
]
BATCHES = [
    np.array(CHAPTER_BATCH),
    np.array(CHAPTER_BATCH[:1]),  # a batch of one: BatchNorm gives zeros
    np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]),  # constant rows: LayerNorm gives zeros
    np.array([[3.0], [-1.0]]),  # one feature: LayerNorm gives zeros
    np.array([[1e6, -2e6, 3.5], [-4e-3, 0.0, 2.0], [7.0, 7.0, -7.0]]),
    np.random.default_rng(0).normal(size=(8, 8)) * np.arange(1, 9),
    np.array(CHAPTER_BATCH) * np.array([[100.0], [1.0], [1.0]]),  # one example scaled
]
NORM_CASES = [{"kind": "norms", "batch": batch.tolist()} for batch in BATCHES]
# (norm_first, layers, seed, input std): every depth against the oracle would take too long.
PROFILES = [
    (norm_first, layers, seed, std)
    for norm_first in (False, True)
    for layers, seed, std in ((1, 0, 1.0), (2, 5, 0.25), (5, 9, 16.0), (12, 3, 4.0), (24, 0, 1.0))
]
PROFILE_CASES = [
    {"kind": "profile", "norm_first": nf, "layers": layers, "seed": seed, "std": std}
    for nf, layers, seed, std in PROFILES
]
OTHER_CASES = [
    {"kind": "weights", "seed": 4, "layers": 2},
    {"kind": "input", "seed": 6, "std": 2.0},
]
JS_ERRORS = [
    ({"kind": "norms", "batch": []}, "the batch must have at least one example and one feature"),
    ({"kind": "norms", "batch": [[1, 2], [3]]}, "example 2 has 1 features, example 1 has 2"),
    (
        {"kind": "norms", "batch": [[1, None]]},
        "example 1 holds a value that is not a finite number",
    ),
    (
        {"kind": "profile", "norm_first": True, "layers": 0, "seed": 0, "std": 1.0},
        "the number of blocks must be an integer >= 1, got 0",
    ),
    (
        {"kind": "profile", "norm_first": True, "layers": 2, "seed": -1, "std": 1.0},
        "seed must be an integer >= 0, got -1",
    ),
    (
        {"kind": "profile", "norm_first": False, "layers": 2, "seed": 0, "std": 0},
        "the input's standard deviation must be a positive number, got 0",
    ),
]
CASES = UNIFORM_CASES + NORM_CASES + PROFILE_CASES + OTHER_CASES + [c for c, _ in JS_ERRORS]


@cache
def answers() -> tuple:
    """Every case through stack.js, one node process; the answers in CASES's order."""
    return tuple(node_answers(HARNESS, [STACK_JS], CASES, timeout=300))


def answer(case: dict):
    result = answers()[CASES.index(case)]
    assert "error" not in result, f"{case['kind']}: stack.js raised {result.get('error')}"
    return result["value"]


def assert_near(got, want, rtol: float, atol: float, what: str) -> None:
    np.testing.assert_allclose(
        np.asarray(got, np.float64), want, rtol=rtol, atol=atol, err_msg=what
    )


# --- stack.js against the oracle --------------------------------------------------------------


@pytest.mark.parametrize("case", UNIFORM_CASES, ids=lambda c: f"{c['seed']}-{c['stream']}")
def test_random_numbers_are_the_oracles_bit_for_bit(case: dict) -> None:
    want = reference.hash_uniform(case["seed"], case["stream"], case["count"])
    got = np.array(answer(case))
    assert np.array_equal(got, want)
    assert got.min() > 0 and got.max() < 1


def test_weights_input_and_readout_are_the_oracles() -> None:
    weights = answer(OTHER_CASES[0])
    for got, want in zip(weights, reference.stack_weights(4, 2), strict=True):
        for name in reference.STACK_MATRICES:
            assert np.array_equal(np.array(got[name]), want[name]), name
    drawn = answer(OTHER_CASES[1])
    assert np.array_equal(np.array(drawn["input"]), reference.stack_input(6, std=2.0))
    assert np.array_equal(np.array(drawn["readout"]), reference.stack_readout(6))


@pytest.mark.parametrize("index", range(len(BATCHES)))
def test_norms_and_their_statistics_match_the_oracle(index: int) -> None:
    batch = BATCHES[index]
    got = answer(NORM_CASES[index])
    assert_near(got["layer"], reference.layer_norm(batch), NORM_TOL, NORM_TOL, "LayerNorm")
    assert_near(got["batch"], reference.batch_norm(batch), NORM_TOL, NORM_TOL, "BatchNorm")
    for axis, key in ((1, "rows"), (0, "columns")):
        mean, std = reference.norm_statistics(batch, axis)
        scale = np.abs(batch).max()
        assert_near(got[key]["mean"], mean, NORM_TOL, NORM_TOL * scale, f"{key} mean")
        assert_near(got[key]["std"], std, NORM_TOL, NORM_TOL * scale, f"{key} std")


def test_a_batch_of_one_gives_batch_norm_zeros_and_scaling_leaves_layer_norm() -> None:
    one = answer(NORM_CASES[1])
    assert np.array_equal(np.array(one["batch"]), np.zeros((1, 6)))
    plain, scaled = answer(NORM_CASES[0]), answer(NORM_CASES[6])
    # scaling example 1 by 100 leaves its LayerNorm output (up to eps), moves BatchNorm's
    assert_near(scaled["layer"][0], np.array(plain["layer"][0]), 1e-6, 1e-6, "LayerNorm")
    assert np.abs(np.array(scaled["batch"]) - np.array(plain["batch"]))[1:].max() > 0.1


@pytest.mark.parametrize("case", PROFILE_CASES, ids=lambda c: str(tuple(c.values())[1:]))
def test_stack_profiles_match_the_oracle(case: dict) -> None:
    got = answer(case)
    want = reference.stack_profile(case["norm_first"], case["layers"], case["seed"], case["std"])
    assert set(got) == set(reference.STACK_QUANTITIES)
    for name in reference.STACK_QUANTITIES:
        assert len(got[name]) == case["layers"], name
        assert_near(got[name], want[name], STACK_RTOL, 1e-14, name)


@pytest.mark.parametrize(("case", "message"), JS_ERRORS, ids=lambda x: str(x)[:30])
def test_stack_js_refuses_bad_input_by_name(case: dict, message: str) -> None:
    assert answers()[CASES.index(case)] == {"error": message}


# --- the oracle against torch and attnlib -------------------------------------------------------


@pytest.mark.parametrize("index", range(len(BATCHES)))
def test_oracle_norms_are_torchs(index: int) -> None:
    batch = torch.tensor(BATCHES[index])
    features = batch.shape[1]
    layer = nn.LayerNorm(features, dtype=torch.float64)
    with torch.no_grad():
        assert_near(reference.layer_norm(BATCHES[index]), layer(batch).numpy(), 1e-13, 1e-13, "LN")
    if batch.shape[0] == 1:
        with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
            nn.BatchNorm1d(features, dtype=torch.float64).train()(batch)
        return
    norm = nn.BatchNorm1d(features, dtype=torch.float64).train()
    with torch.no_grad():
        assert_near(reference.batch_norm(BATCHES[index]), norm(batch).numpy(), 1e-13, 1e-13, "BN")
    assert norm.eps == reference.NORM_EPS == layer.eps


def torch_stack(norm_first: bool, layers: int, seed: int, std: float, fused: bool) -> dict:
    """The same stack as attnlib EncoderLayers in float64, measured under autograd."""
    blocks = nn.ModuleList(
        EncoderLayer(
            reference.STACK_WIDTH,
            reference.STACK_HEADS,
            reference.STACK_FF,
            dropout=0.0,
            norm_first=norm_first,
        )
        for _ in range(layers)
    ).double()
    with torch.no_grad():
        for block, weights in zip(blocks, reference.stack_weights(seed, layers), strict=True):
            block.fused = fused
            for name, parameter in WEIGHT_NAMES.items():
                block.get_parameter(parameter).copy_(torch.tensor(weights[name].T))
            for module in block.modules():
                if isinstance(module, nn.Linear):
                    module.bias.zero_()
    h = torch.tensor(reference.stack_input(seed, std=std))[None]  # (1, seq, d)
    streams = []
    for block in blocks:
        h, _ = block(h)
        h.retain_grad()
        streams.append(h)
    top = F.layer_norm(h, h.shape[-1:]) if norm_first else h
    loss = (torch.tensor(reference.stack_readout(seed))[None] * top).sum()
    loss.backward()
    record = {
        name: [block.get_parameter(p).grad.norm().item() for block in blocks]
        for name, p in WEIGHT_NAMES.items()
    }
    record["all"] = [
        torch.cat([p.grad.flatten() for p in block.parameters()]).norm().item() for block in blocks
    ]
    record["stream gradient"] = [s.grad.norm().item() for s in streams]
    record["stream std"] = [s.detach().std().item() for s in streams]
    unit = [F.normalize(s.detach()[0], dim=-1) for s in streams]
    n = reference.STACK_SEQ
    record["cosine"] = [((u @ u.T).sum().item() - n) / (n * (n - 1)) for u in unit]
    return {"loss": loss.item(), **{k: np.array(v) for k, v in record.items()}}


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize(
    ("norm_first", "layers", "seed", "std"), [(False, 6, 3, 2.0), (True, 6, 1, 0.5)]
)
def test_oracle_stack_is_attnlibs_encoder_layers(
    norm_first: bool, layers: int, seed: int, std: float, fused: bool
) -> None:
    want = torch_stack(norm_first, layers, seed, std, fused)
    got = reference.stack_profile(norm_first, layers, seed, std)
    assert reference.stack_loss(norm_first, layers, seed, std) == pytest.approx(
        want["loss"], rel=1e-12
    )
    for name in reference.STACK_QUANTITIES:
        assert_near(got[name], want[name], 1e-11, 1e-14, name)


def test_oracle_weights_are_xavier_uniform() -> None:
    weights = reference.stack_weights(0, 24)
    w1 = np.concatenate([w["W_1"].ravel() for w in weights])
    bound = np.sqrt(6 / (reference.STACK_WIDTH + reference.STACK_FF))
    assert np.abs(w1).max() <= bound
    assert w1.var() == pytest.approx(2 / (reference.STACK_WIDTH + reference.STACK_FF), rel=0.02)
    # block 3 of a 24-block stack is block 3 of a 4-block one
    assert np.array_equal(weights[2]["W_Q"], reference.stack_weights(0, 4)[2]["W_Q"])


def test_stack_shows_the_chapters_lessons_at_24_blocks() -> None:
    post = reference.stack_profile(False, 24, 0)
    pre = reference.stack_profile(True, 24, 0)
    assert post["W_Q"][-1] / post["W_Q"][0] < 1e-3  # post-LN: the attention scores stop learning
    assert post["cosine"][-1] > 0.99  # because the tokens collapse
    assert pre["W_2"][0] / pre["W_2"][-1] > 3  # pre-LN: gradients shrink towards the top
    assert pre["stream std"][-1] / pre["stream std"][0] > 2  # the pre-LN stream grows
    assert np.allclose(post["stream std"], post["stream std"][0], rtol=1e-3)


# --- the Python side: HTML, snapshot and errors ------------------------------------------------


def attribute(html: str, name: str) -> str:
    match = re.search(rf'data-{name}="([^"]*)"', html)
    assert match, f"no data-{name}"
    return match.group(1).replace("&quot;", '"')


def test_stack_live_carries_its_start_and_the_measured_profiles() -> None:
    measured = {
        "post-LN": {"W_2": [0.6, 0.5, 0.65], "cosine": torch.tensor([0.1, 0.9, 1.0]), "loss": 4.6},
        "pre-LN": {"W_2": [0.67, 0.3, 0.1432549], "cosine": [0.1, 0.5, 0.8]},
    }
    html = stack_live(measured, depth=5, quantity="cosine", seed=2, input_std=4.0).data
    assert attribute(html, "depth") == "5" and attribute(html, "quantity") == "cosine"
    assert attribute(html, "seed") == "2" and attribute(html, "input-std") == "4"
    data = json.loads(attribute(html, "measured"))
    assert data["pre-LN"] == {"W_2": [0.67, 0.3, 0.1433], "cosine": [0.1, 0.5, 0.8]}
    assert set(data["post-LN"]) == {"W_2", "cosine"}
    cosine = {o: reference.stack_profile(o == "pre-LN", 5, 2, 4.0)["cosine"] for o in data}
    for order, values in cosine.items():
        assert f"{order} {values[0]:.4g} at block 1 and {values[-1]:.4g} at block 5" in html
    # one inline script carries the arithmetic and the controls: nothing to fetch
    assert html.count("<script>") == 1 and "<script src" not in html
    assert 'live.register("stack", mountStack)' in html and "function stackProfile(" in html


def test_norms_live_carries_its_batch_and_says_what_it_shows() -> None:
    html = norms_live([[1, 2, 3], [4, 6, 11]], used=2, example=1, scale=10.0).data
    assert json.loads(attribute(html, "batch")) == [[1, 2, 3], [4, 6, 11]]
    assert attribute(html, "used") == "2" and attribute(html, "example") == "1"
    assert attribute(html, "scale") == "1"
    # example 2 scaled by 10: (40, 60, 110), mean 70 and std 29.44; feature 1: mean 20.5
    assert "own mean (2.00, 70.00)" in html and "(0.82, 29.44)" in html
    assert "the batch's means (20.50, 31.00, 56.50)" in html
    one = norms_live(used=1).data
    assert "BatchNorm's output is all zeros" in one and "own mean (7.16)" in one


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"depth": 0}, ValueError, "depth must be an int >= 1, got 0"),
        ({"depth": 25}, ValueError, "depth must be from 1 to 24 blocks, got 25"),
        ({"depth": 2.0}, TypeError, "depth must be an int >= 1, got float 2.0"),
        ({"quantity": "W_3"}, ValueError, "quantity must be one of ('stream std', "),
        ({"seed": 10}, ValueError, "seed must be from 0 to 9, got 10"),
        ({"input_std": 3}, ValueError, "input_std must be one of (0.25, 0.5, 1.0, 2.0, 4.0"),
        ({"measured": {"post-LN": {}}}, ValueError, "measured must map 'post-LN' and 'pre-LN'"),
        (
            {"measured": {"post-LN": {"x": [1]}, "pre-LN": {}}},
            ValueError,
            "measured['post-LN'] holds none of the quantities",
        ),
        (
            {"measured": {"post-LN": {"W_Q": [1, 2]}, "pre-LN": {}}},
            ValueError,
            "measured['pre-LN'] has no 'W_Q', but 'post-LN' has",
        ),
        (
            {"measured": {"post-LN": {"W_Q": [1, 2]}, "pre-LN": {"W_Q": [1, 2, 3]}}},
            ValueError,
            "measured['pre-LN']['W_Q'] must be one number per block, 2 blocks, got shape (3,)",
        ),
        (
            {"measured": {"post-LN": {"W_Q": [1, np.nan]}, "pre-LN": {"W_Q": [1, 2]}}},
            ValueError,
            "measured['post-LN']['W_Q'] must be finite",
        ),
    ],
)
def test_stack_live_refuses_bad_input_by_name(options: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=re.escape(message)):
        stack_live(**options)


@pytest.mark.parametrize(
    ("args", "options", "message"),
    [
        (
            (np.zeros((0, 3)),),
            {},
            "batch must be (examples, features), each from 1 to 8, got shape (0, 3)",
        ),
        ((np.zeros(4),), {}, "got shape (4,)"),
        ((np.zeros((2, 9)),), {}, "got shape (2, 9)"),
        (([[1.0, np.inf]],), {}, "batch must be finite, got 1 bad"),
        ((), {"used": 4}, "used must be from 1 to the batch's 3 examples, got 4"),
        ((), {"used": 2, "example": 2}, "example must be from 0 to used - 1 = 1, got 2"),
        ((), {"scale": 3.0}, "scale must be 10 ** (k / 10) for an integer k from -20 to 20"),
        ((), {"scale": 1000.0}, "(0.01 to 100), got 1000"),
        ((), {"scale": -1.0}, "got -1"),
    ],
)
def test_norms_live_refuses_bad_input_by_name(args: tuple, options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        norms_live(*args, **options)
