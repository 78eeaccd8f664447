"""Run-wide settings: quick mode, seeding, device choice and the one notebook set-up call."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

QUICK_ENV = "ATTNLIB_QUICK"


def quick_mode() -> bool:
    """Whether ``ATTNLIB_QUICK`` asks for the shrunken configuration (``1``, ``true``, ``yes``)."""
    return os.environ.get(QUICK_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def describe_mode() -> str:
    """One line a notebook prints so the reader knows which configuration ran."""
    return "quick mode (ATTNLIB_QUICK=1)" if quick_mode() else "default configuration"


def cpu_kernels() -> str:
    """The set of CPU kernels torch dispatches to here (``AVX2``, ``AVX512``, ``DEFAULT``, ...).

    Trained numbers differ in their last digits from one set to another: CI pins one with
    ``ATEN_CPU_CAPABILITY=avx2`` so that stored outputs reproduce (see CONTRIBUTING.md).
    """
    return torch.backends.cpu.get_cpu_capability()


def seed_everything(seed: int, threads: int | None = None) -> None:
    """Seed Python, NumPy and torch; optionally fix torch's CPU threads for reproducibility."""
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if threads is not None:
        torch.set_num_threads(threads)


def setup_notebook(
    seed: int = 0, threads: int | None = 1, precision: int = 4, linewidth: int | None = None
) -> str:
    """Set up a chapter: seed everything, fix torch's CPU threads, set NumPy's and torch's print
    options (up to ``precision`` decimals, no scientific notation); return the line naming
    the mode and the CPU kernel set in use.

    One thread and one seed make CPU training reproducible, and short printed floats keep the
    stored outputs stable, so that every chapter starts the same way.
    """
    from attnlib import __version__  # the package imports this module, so not at the top

    seed_everything(seed, threads)
    # "maxprec_equal": the entries of an array share one number of decimals, at most
    # ``precision``, so columns line up (0.5370, not 0.537) and whole numbers stay short (2., 4.).
    np.set_printoptions(
        precision=precision, suppress=True, floatmode="maxprec_equal", linewidth=linewidth
    )
    torch.set_printoptions(precision=precision, sci_mode=False, linewidth=linewidth)
    threads_used = torch.get_num_threads()
    plural = "" if threads_used == 1 else "s"
    return (
        f"attnlib {__version__}, {describe_mode()}, seed {seed}, {threads_used} thread{plural}, "
        f"CPU kernels {cpu_kernels()}"
    )


def choose_device(prefer: str | None = None) -> torch.device:
    """The best available device, cuda then mps then cpu, or ``prefer`` if it is available."""
    if prefer is not None:
        device = torch.device(prefer)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' was asked for but torch sees no CUDA GPU")
        if device.type == "mps" and not _mps_available():
            raise RuntimeError("device 'mps' was asked for but torch sees no Apple GPU")
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if _mps_available():
        return torch.device("mps")
    return torch.device("cpu")


def training_precision(device: torch.device) -> torch.dtype | None:
    """The autocast dtype for training on ``device``: bfloat16 on GPUs that have it natively
    (compute capability 8 and up: A100, RTX 30xx, H100), float16 on older ones (T4, V100, RTX
    20xx: they emulate bfloat16, slowly), and None, plain float32, on Apple's MPS and the CPU."""
    if device.type != "cuda":
        return None
    major, _ = torch.cuda.get_device_capability(device)
    return torch.bfloat16 if major >= 8 else torch.float16


# Dense bf16 tensor-core peaks from the vendors' data sheets (no sparsity), in TFLOP/s.
PEAK_BF16_TFLOPS = {"H100 SXM": 989.0, "H100 80GB HBM3": 989.0, "H100 PCIe": 756.0, "H200": 989.0}


def peak_of(name: str) -> float | None:
    """The dense bf16 peak in TFLOP/s of the GPU CUDA calls `name`; None when unknown."""
    return next((peak for key, peak in PEAK_BF16_TFLOPS.items() if key in name), None)


def device_peak(device: torch.device) -> tuple[str, float | None]:
    """The device's name and its dense bf16 peak in TFLOP/s (None when unknown)."""
    if device.type != "cuda":
        return device.type, None
    name = torch.cuda.get_device_name(device)
    return name, peak_of(name)


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())
