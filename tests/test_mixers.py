"""Every mixer of the harness: causal, the right shape, trainable; and the short convolution."""

from __future__ import annotations

import pytest
import torch

from attnlib.mixers import MIXERS, ShortConvolution, make_mixer


def inputs(n: int = 12, seed: int = 0) -> torch.Tensor:
    return torch.randn(2, n, 16, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", list(MIXERS))
def test_a_mixer_never_reads_the_future(name):
    torch.manual_seed(0)
    mixer = make_mixer(name, 16, 2)
    x = inputs()
    changed = x.clone()
    changed[:, 7] += 3.0  # position 7 changes: positions 0..6 must not move
    before, after = mixer(x), mixer(changed)
    assert before.shape == (2, 12, 16)
    torch.testing.assert_close(after[:, :7], before[:, :7], atol=1e-6, rtol=0)
    assert (after[:, 7:] - before[:, 7:]).abs().max().item() > 1e-4


@pytest.mark.parametrize("name", list(MIXERS))
def test_every_parameter_of_a_mixer_gets_a_gradient(name):
    torch.manual_seed(1)
    mixer = make_mixer(name, 16, 2)
    mixer(inputs()).square().mean().backward()
    missing = [n for n, p in mixer.named_parameters() if p.grad is None or not p.grad.any()]
    assert missing == []


def test_the_short_convolution_reads_the_last_width_positions():
    conv = ShortConvolution(16, width=3)
    x = inputs()
    changed = x.clone()
    changed[:, 5] += 1.0
    moved = (conv(changed) - conv(x)).abs().amax(dim=(0, 2))  # (n,)
    assert (moved[:5] == 0).all() and (moved[5:8] > 0).all() and (moved[8:] == 0).all()


def test_make_mixer_names_the_choices():
    with pytest.raises(ValueError, match="unknown mixer 'mamba'; choose one of 'softmax'"):
        make_mixer("mamba", 16, 2)
    with pytest.raises(ValueError, match="num_heads=3 does not divide d_model=16"):
        make_mixer("delta", 16, 3)
