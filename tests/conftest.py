"""Shared test settings: a non-interactive matplotlib backend and one CPU thread."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def close_figures():
    """Close every figure a test opened, so memory does not grow across the suite."""
    yield
    plt.close("all")
