"""Run-wide settings: quick mode from the environment, seeding, device choice."""

import pytest
import torch

from attnlib.config import QUICK_ENV, choose_device, describe_mode, quick_mode, seed_everything


@pytest.mark.parametrize("value", ["1", "true", "YES", " on "])
def test_quick_mode_on(monkeypatch, value):
    monkeypatch.setenv(QUICK_ENV, value)
    assert quick_mode() is True


@pytest.mark.parametrize("value", ["0", "", "false", "no"])
def test_quick_mode_off(monkeypatch, value):
    monkeypatch.setenv(QUICK_ENV, value)
    assert quick_mode() is False


def test_quick_mode_off_when_unset(monkeypatch):
    monkeypatch.delenv(QUICK_ENV, raising=False)
    assert describe_mode() == "default configuration"


def test_describe_mode_in_quick_mode(monkeypatch):
    monkeypatch.setenv("ATTNLIB_QUICK", "1")
    assert describe_mode() == "quick mode (ATTNLIB_QUICK=1)"


def test_seed_everything_repeats_torch_randn():
    seed_everything(123)
    first = torch.randn(5)
    seed_everything(123)
    assert torch.equal(torch.randn(5), first)


def test_seed_everything_rejects_negative_seed():
    with pytest.raises(ValueError, match="seed must be a non-negative int, got -1"):
        seed_everything(-1)


def test_choose_cpu_when_asked():
    assert choose_device("cpu") == torch.device("cpu")


def test_choose_device_default_is_cpu_without_gpu():
    if torch.cuda.is_available() or torch.backends.mps.is_available():
        pytest.skip("a GPU is present")
    assert choose_device() == torch.device("cpu")


def test_choose_cuda_without_gpu_raises():
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(RuntimeError, match="device 'cuda' was asked for but torch sees no CUDA"):
        choose_device("cuda")
