"""nbval settings for the chapters.

nbval 0.11 gives up on a cell when its output messages pause for 5 seconds, a fixed limit
that a busy 2-core CI machine can hit while a training cell's progress messages drain. A
longer pause is still a failure, just not a spurious one.
"""

OUTPUT_TIMEOUT_SECONDS = 60


def pytest_collection_modifyitems(items):
    """Raise nbval's per-message output timeout on every notebook cell item."""
    for item in items:
        if hasattr(item, "output_timeout"):
            item.output_timeout = OUTPUT_TIMEOUT_SECONDS
