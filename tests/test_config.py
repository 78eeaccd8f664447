"""Run-wide settings: quick mode from the environment, seeding, device choice."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from attnlib.config import (
    QUICK_ENV,
    choose_device,
    describe_mode,
    quick_mode,
    seed_everything,
    setup_notebook,
)


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


@pytest.fixture
def restore_print_options():
    numpy_options, threads = np.get_printoptions(), torch.get_num_threads()
    yield
    np.set_printoptions(**numpy_options)
    torch.set_printoptions(profile="default")
    torch.set_num_threads(threads)


def test_setup_notebook_seeds_fixes_threads_and_print_options(monkeypatch, restore_print_options):
    monkeypatch.delenv(QUICK_ENV, raising=False)
    line = setup_notebook(seed=3, threads=1, precision=2)
    first = torch.rand(1).item()
    kernels = torch.backends.cpu.get_cpu_capability()
    assert line.endswith(f"default configuration, seed 3, 1 thread, CPU kernels {kernels}")
    assert torch.get_num_threads() == 1
    assert np.array2string(np.array([1 / 3, 1e-9, 0.5])) == "[0.33 0.00 0.50]"
    assert np.array2string(np.array([2.0, -1.0])) == "[ 2. -1.]"
    assert str(torch.tensor([1 / 3])) == "tensor([0.33])"
    setup_notebook(seed=3, threads=1, precision=2)
    assert torch.rand(1).item() == first


def test_setup_notebook_names_quick_mode(monkeypatch, restore_print_options):
    monkeypatch.setenv(QUICK_ENV, "1")
    assert "quick mode (ATTNLIB_QUICK=1)" in setup_notebook(threads=1)


def test_cpu_kernels_names_the_pinned_set_in_a_fresh_process():
    # ATEN_CPU_CAPABILITY is read once, when torch loads: only a new process sees a change.
    command = "from attnlib.config import cpu_kernels; print(cpu_kernels())"
    environment = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    result = subprocess.run(
        [sys.executable, "-c", command], env=environment, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "DEFAULT"
