"""JupyterLab end to end: open a chapter, play with its explorer.

Chapter 01 runs every cell from the menu (outputs cleared first, so the explorer on screen is the
one this run draws). The explorers of chapters 02, 07-09, 12, 15 and 16 are kernel-free
(attnlib.live), the same as the book's: they are checked in a trusted copy of the stored
notebook, as a learner sees it on opening the chapter, without running it again (nbval runs
every chapter). No chapter carries an ipywidgets copy that would freeze in the book.

The server runs from this venv on a free local port with a random token, serving temporary
copies of the notebooks; the committed notebooks are never touched. JupyterLab's settings,
workspaces and notebook signatures live in the temporary folder too, with news and update checks
off, so nothing is fetched from outside.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbformat.sign import NotebookNotary

from attnlib import reference

from .conftest import LOCAL_HOST, ROOT, WatchedPage
from .helpers import expect_cells
from .part5_checks import check_online_softmax_explorer, check_rotary_explorer
from .recipe_checks import check_recipe_explorer
from .test_live_explorers import (
    Explorer,
    attribute_json,
    expect_heads,
    expect_masks,
    expect_positions,
    heads_inputs,
    scores_shown,
    set_range,
)

NOTEBOOK = ROOT / "notebooks" / "01_self_attention_by_hand.ipynb"
# Part V's explorers: the notebook, its explorer's name, and the check of part5_checks.py.
PART5 = {
    "15": (
        ROOT / "notebooks" / "15_flash_attention.ipynb",
        "online-softmax",
        check_online_softmax_explorer,
    ),
    "16": (ROOT / "notebooks" / "16_modern_attention.ipynb", "rotary", check_rotary_explorer),
}
# Chapters 02, 07, 08 and 09: their explorers, checked with test_live_explorers's oracles.
PART3 = {
    "02": ROOT / "notebooks" / "02_scaled_dot_product.ipynb",
    "07": ROOT / "notebooks" / "07_multi_head_attention.ipynb",
    "08": ROOT / "notebooks" / "08_positional_encoding.ipynb",
    "09": ROOT / "notebooks" / "09_masking.ipynb",
}
EXPLORER_NAMES = {"02": "temperature", "07": "heads", "08": "positions", "09": "masks"}
# Chapter 12's explorer: schedules and label smoothing, checked by recipe_checks.py.
CHAPTER_12 = ROOT / "notebooks" / "12_training_recipe.ipynb"
STORED = [*PART3.values(), CHAPTER_12] + [path for path, _, _ in PART5.values()]
NOTEBOOK_BYTES = {path: path.read_bytes() for path in [NOTEBOOK, *STORED]}  # never written
START_TIMEOUT_S = 30
# Chapter 01 runs in seconds on an idle 2-core machine.
RUN_ALL_TIMEOUT_MS = {NOTEBOOK.name: 60_000}
# JupyterLab user settings: all cells kept in the DOM, no news, no update checks.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
        "doNotDisturbMode": True,
    },
}
ERROR_OUTPUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]'


@dataclass
class Lab:
    url: str  # base URL, ending in '/'
    token: str
    folder: Path  # the server's root: the temporary copies of the notebooks
    log: Path
    data_dir: Path  # JUPYTER_DATA_DIR: where the server looks up trusted notebooks

    def log_tail(self, chars: int = 3_000) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOCAL_HOST, 0))
        return sock.getsockname()[1]


def api(lab_url: str, token: str, path: str, method: str = "GET") -> int:
    request = urllib.request.Request(
        f"{lab_url}{path}", method=method, headers={"Authorization": f"token {token}"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.status


def clean_copy(source: Path, folder: Path) -> Path:
    """``source`` without outputs, execution counts or saved widget state, in ``folder``."""
    notebook = nbformat.read(source, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    notebook.metadata.pop("widgets", None)
    copy = folder / source.name
    nbformat.write(notebook, copy)
    return copy


def stop(process: subprocess.Popen, lab_url: str, token: str) -> None:
    """Ask the server to shut down (kernels included); then terminate, then kill, its group."""
    if process.poll() is None:
        try:
            api(lab_url, token, "api/shutdown", method="POST")
            process.wait(timeout=15)
        except (OSError, urllib.error.URLError, subprocess.TimeoutExpired):
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)  # the server's own process group (start_new_session)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=10)
            break
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    base = tmp_path_factory.mktemp("jupyterlab")
    root_dir = base / "notebooks"
    root_dir.mkdir()
    clean_copy(NOTEBOOK, root_dir)
    settings = base / "lab-settings"
    for name, values in LAB_SETTINGS.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")
    token = secrets.token_hex(24)
    port = free_port()
    url = f"http://{LOCAL_HOST}:{port}/"
    env = {
        **os.environ,
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(base / "lab-workspaces"),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "JUPYTER_DATA_DIR": str(base / "data"),
        "IPYTHONDIR": str(base / "ipython"),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "PYTHONUNBUFFERED": "1",
        "ATTNLIB_QUICK": "1",
    }
    env.pop("JUPYTER_TOKEN", None)
    command = [
        str(Path(sys.executable).with_name("jupyter")),
        "lab",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.ip={LOCAL_HOST}",
        f"--IdentityProvider.token={token}",  # ServerApp.token is its deprecated name
        f"--ServerApp.root_dir={root_dir}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # CI containers run as root
        command.append("--allow-root")
    log = base / "jupyterlab.log"
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            command,
            cwd=root_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = Lab(url, token, root_dir, log, base / "data")
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"jupyter lab exited with {process.returncode}:\n{running.log_tail()}")
            try:
                if api(url, token, "api/status") == 200:
                    break
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"jupyter lab did not answer in {START_TIMEOUT_S} s:\n{running.log_tail()}"
                )
            time.sleep(0.25)  # polling the server's status, not waiting for the page
        yield running
    finally:
        stop(process, url, token)
        shutil.rmtree(base / "runtime", ignore_errors=True)


def prompts(page) -> list[str]:
    return page.locator(".jp-Notebook .jp-CodeCell .jp-InputPrompt").all_inner_texts()


def run_started(page, timeout_ms: float) -> bool:
    """Whether some code cell is queued or has run within ``timeout_ms``: its prompt is no longer
    the blank ``[ ]:`` of a cleared notebook (JupyterLab queues the first cell as soon as a Run
    command executes, however busy the kernel)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    try:
        page.wait_for_function(
            """() => Array.from(
                document.querySelectorAll(".jp-Notebook .jp-CodeCell .jp-InputPrompt"))
              .some((p) => /^\\[(\\*|\\d+)\\]:$/.test(p.textContent.trim()))""",
            timeout=timeout_ms,
        )
    except PlaywrightTimeoutError:
        return False
    return True


def run_all_cells(page, n_code_cells: int, timeout_ms: float) -> None:
    """Run → Run All Cells from the menu bar; wait until every code cell has run."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    # The menu item is disabled until the notebook is JupyterLab's current widget: click into
    # the notebook first, and open the menu again while the item is still greyed out.
    page.locator(".jp-Notebook .jp-Cell").first.click()
    menu = page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$"))
    label = page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$"))
    enabled = page.locator(".lm-Menu-item:not(.lm-mod-disabled)", has=label)
    for attempt in range(10):
        menu.click()
        try:
            enabled.click(timeout=1_000)
        except PlaywrightTimeoutError:
            pass  # on a loaded machine the click can land and still time out
        # A click can also "succeed" and run nothing (CI once saw every prompt blank and the
        # kernel idle for 120 s). Retry only when no cell was queued: clicking again after a
        # landed click would run every cell a second time.
        if run_started(page, 5_000):
            break
        page.keyboard.press("Escape")
        if attempt == 9:
            raise AssertionError("Run → Run All Cells queued no cell in 10 tries")
        page.locator(".jp-Notebook .jp-Cell").first.click()
    try:
        wait_until_run(page, n_code_cells, timeout_ms)
    except PlaywrightTimeoutError:
        status = page.locator(".jp-Notebook-ExecutionIndicator").get_attribute("data-status")
        raise AssertionError(
            f"Run All Cells did not finish in {timeout_ms / 1000:.0f} s; kernel "
            f"{status}; prompts {prompts(page)}"
        ) from None


def wait_until_run(page, n_code_cells: int, timeout_ms: float) -> None:
    page.wait_for_function(
        """([n, ERROR_OUTPUT]) => {
          const prompts = Array.from(
            document.querySelectorAll(".jp-Notebook .jp-CodeCell .jp-InputPrompt"));
          const text = prompts.map((p) => p.textContent.trim());
          const done = text.filter((t) => /^\\[\\d+\\]:$/.test(t)).length;
          const error = document.querySelector(`.jp-Notebook ${ERROR_OUTPUT}`);
          return prompts.length === n && (done === n || (error && !text.includes("[*]:")));
        }""",
        arg=[n_code_cells, ERROR_OUTPUT],
        timeout=timeout_ms,
    )


def wait_for_idle_kernel(page, timeout: float = 45_000) -> None:
    page.wait_for_function(
        """() => document.querySelector(
            '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator')
          ?.getAttribute("data-status") === "idle" """,
        timeout=timeout,
    )


def open_and_run_all(lab: Lab, page, notebook: Path) -> None:
    """Open the copy of ``notebook`` alone (a workspace of its own), run every cell, and check
    that each ran once, in order, without an error and without an ipywidgets control."""
    n_code_cells = sum(
        cell.cell_type == "code"
        for cell in nbformat.read(lab.folder / notebook.name, as_version=4).cells
    )
    workspace = f"lab/workspaces/{notebook.stem}/tree/{notebook.name}"
    page.goto(f"{lab.url}{workspace}?token={lab.token}", wait_until="load")
    page.wait_for_function(  # every cell drawn
        "(n) => document.querySelectorAll('.jp-CodeCell .jp-InputPrompt').length === n",
        arg=n_code_cells,
        timeout=45_000,
    )
    wait_for_idle_kernel(page)

    run_all_cells(page, n_code_cells, RUN_ALL_TIMEOUT_MS[notebook.name])
    errors = page.locator(f".jp-Notebook {ERROR_OUTPUT}")
    assert errors.count() == 0, f"a cell raised:\n{errors.first.inner_text()[:2000]}"
    numbers = [int(t.strip()[1:-2]) for t in prompts(page)]
    assert numbers == list(range(1, n_code_cells + 1)), f"execution counts {numbers}"

    # No ipywidgets explorer: in the book its controls would move while its tables stayed.
    assert page.locator(".jp-OutputArea-output .jupyter-widgets").count() == 0


def trusted_copy(lab: Lab, source: Path) -> Path:
    """``source`` with its stored outputs, signed as trusted for the lab's server (so that its
    explorers' scripts run, as after `jupyter trust`), in the lab's folder as stored-NAME."""
    notebook = nbformat.read(source, as_version=4)
    NotebookNotary(data_dir=str(lab.data_dir)).sign(notebook)
    copy = lab.folder / f"stored-{source.name}"
    nbformat.write(notebook, copy)
    return copy


def open_stored(lab: Lab, page, notebook: Path, explorer: str) -> None:
    """Open a trusted copy of ``notebook`` alone (a workspace of its own), run nothing, and wait
    until its ``explorer`` has mounted in the stored output; no output is an error and none is
    an ipywidgets control."""
    copy = trusted_copy(lab, notebook)
    workspace = f"lab/workspaces/{copy.stem}/tree/{copy.name}"
    page.goto(f"{lab.url}{workspace}?token={lab.token}", wait_until="load")
    mounted = f'.jp-OutputArea-output .attnlib-live[data-explorer="{explorer}"][data-mounted]'
    page.wait_for_selector(mounted, state="attached", timeout=45_000)
    wait_for_idle_kernel(page)
    errors = page.locator(f".jp-Notebook {ERROR_OUTPUT}")
    assert errors.count() == 0, f"a stored output is an error:\n{errors.first.inner_text()[:2000]}"
    assert page.locator(".jp-OutputArea-output .jupyter-widgets").count() == 0


def test_chapter_01_runs_and_its_explorer_recomputes(
    lab: Lab, watched_page: WatchedPage, screenshots: Path
) -> None:
    page = watched_page.page
    open_and_run_all(lab, page, NOTEBOOK)

    # The kernel-free explorer runs in JupyterLab's output as in the book.
    live = page.locator('.jp-OutputArea-output .attnlib-live[data-explorer="worked-example"]')
    assert live.count() == 1, "no kernel-free explorer in chapter 01's outputs"
    live.scroll_into_view_if_needed()
    weights = live.locator('[data-readout="weights"] td')
    expect_cells(weights, reference.worked_example().weights, "Lab, live explorer")
    live.locator('[data-control="temperature"]').fill("1")
    expected = reference.worked_example(temperature=10.0)
    expect_cells(weights, expected.weights, "Lab, live explorer at temperature 10")

    # The keyboard moves the slider in steps of 0.05 (JupyterLab's shortcuts keep off it).
    slider = live.locator('[data-control="temperature"]')
    slider.fill("0")
    slider.focus()
    for _ in range(6):
        slider.press("ArrowRight")
    assert float(slider.input_value()) == pytest.approx(0.30)
    live.locator('[data-control="scale"]').check()
    expected = reference.worked_example(scale=True, temperature=10**0.30)
    expect_cells(weights, expected.weights, "Lab, scaled, temperature 10**0.3")

    # Typing a matrix, Enter included, edits it (JupyterLab would otherwise eat the Enter).
    editor = live.locator('[data-control="inputs"]')
    editor.fill("")
    editor.press_sequentially("1 0 1 0")
    editor.press("Enter")
    editor.press_sequentially("0 1 0 1")
    editor.press("Enter")
    editor.press_sequentially("1 1 1 1")
    assert editor.input_value() == "1 0 1 0\n0 1 0 1\n1 1 1 1"
    inputs = reference.WORKED_INPUTS.copy()
    inputs[1] = [0, 1, 0, 1]
    expected = reference.worked_example(inputs=inputs, scale=True, temperature=10**0.30)
    expect_cells(weights, expected.weights, "Lab, input 2 shortened, typed with Enter")

    wait_for_idle_kernel(page)
    live.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "jupyterlab_01.png"))
    watched_page.watch.assert_clean("JupyterLab", scripts_only=True)
    assert NOTEBOOK.read_bytes() == NOTEBOOK_BYTES[NOTEBOOK], f"{NOTEBOOK} changed during the test"


@pytest.mark.parametrize("chapter", list(PART5))
def test_part5_explorer_recomputes_in_jupyterlab(
    lab: Lab, watched_page: WatchedPage, screenshots: Path, chapter: str
) -> None:
    """Chapters 15 and 16 as stored; part5_checks drives the explorer in the output."""
    notebook, name, check = PART5[chapter]
    page = watched_page.page
    open_stored(lab, page, notebook, name)
    live = page.locator(
        f'.jp-OutputArea-output .attnlib-live[data-explorer="{name}"][data-mounted]'
    )
    assert live.count() == 1, f"{live.count()} {name} explorers in chapter {chapter}'s outputs"
    live.scroll_into_view_if_needed()
    check(live)
    # The keyboard reaches the explorer's own controls, not JupyterLab's shortcuts.
    if name == "online-softmax":  # back to a row of several blocks
        live.locator('[data-control="example"]').first.click()
    slider = live.locator(
        '[data-control="step"]' if name == "online-softmax" else '[data-control="offset"]'
    )
    before = slider.input_value()
    slider.focus()
    slider.press("ArrowLeft" if before != slider.get_attribute("min") else "ArrowRight")
    assert slider.input_value() != before, (
        f"chapter {chapter}: the arrow key did not move the slider"
    )

    wait_for_idle_kernel(page)
    live.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / f"jupyterlab_{chapter}.png"))
    watched_page.watch.assert_clean("JupyterLab", scripts_only=True)
    assert notebook.read_bytes() == NOTEBOOK_BYTES[notebook], f"{notebook} changed during the test"


@pytest.mark.parametrize("chapter", list(PART3))
def test_part3_explorer_recomputes_in_jupyterlab(
    lab: Lab, watched_page: WatchedPage, screenshots: Path, chapter: str
) -> None:
    """Chapters 02 and 07-09 as stored: the explorer in their output computes what
    attnlib.reference does."""
    notebook, name = PART3[chapter], EXPLORER_NAMES[chapter]
    page = watched_page.page
    open_stored(lab, page, notebook, name)
    explorer = Explorer(watched_page, name)
    assert page.locator(f'.attnlib-live[data-explorer="{name}"][data-mounted]').count() == 1
    explorer.root.scroll_into_view_if_needed()
    if name == "temperature":
        scores = scores_shown(explorer)
        for exponent in (-1.0, 0.5):
            temperature = explorer.set_temperature_exponent(exponent)
            expected = reference.softmax(scores, temperature=temperature)
            expect_cells(explorer.cells("weights"), expected, f"Lab, T={temperature:.3g}")
    elif name == "positions":
        d_model = int(explorer.root.get_attribute("data-d-model") or 0)
        for k, pos, i in [(1, 0, 0), (7, 3, 1)]:
            set_range(explorer, "offset", k)
            set_range(explorer, "position", pos)
            set_range(explorer, "pair", i)
            expect_positions(explorer, d_model, k, pos, i)
    elif name == "heads":
        data = heads_inputs(explorer)
        counts = [int(o) for o in explorer.control("heads").locator("option").all_inner_texts()]
        for heads in (counts[0], counts[-1]):
            explorer.control("heads").select_option(str(heads))
            explorer.control("head").select_option(str(heads))
            expect_heads(explorer, data, heads, heads, "head")
        explorer.control("scale-model").check()
        expect_heads(explorer, data, counts[-1], counts[-1], "model")
    else:
        scores = np.array(attribute_json(explorer, "scores"))
        n = scores.shape[0]
        for kind in ("padding", "causal"):
            explorer.control("kind").select_option(kind)
            set_range(explorer, "length", max(1, n - 3))
            expect_masks(explorer, scores, kind, max(1, n - 3), "-inf", None)
        explorer.control("fill").select_option("0")
        expect_masks(explorer, scores, "causal", max(1, n - 3), "0", None)
    wait_for_idle_kernel(page)
    page.screenshot(path=str(screenshots / f"jupyterlab_{chapter}.png"))
    watched_page.watch.assert_clean("JupyterLab", scripts_only=True)
    assert notebook.read_bytes() == NOTEBOOK_BYTES[notebook], f"{notebook} changed during the test"


def test_chapter_12_explorer_recomputes_in_jupyterlab(
    lab: Lab, watched_page: WatchedPage, screenshots: Path
) -> None:
    """Chapter 12 as stored; recipe_checks moves every control in the output."""
    page = watched_page.page
    open_stored(lab, page, CHAPTER_12, "recipe")
    live = page.locator('.jp-OutputArea-output .attnlib-live[data-explorer="recipe"][data-mounted]')
    assert live.count() == 1, f"{live.count()} recipe explorers in chapter 12's outputs"
    live.scroll_into_view_if_needed()
    check_recipe_explorer(live)
    # The keyboard reaches the explorer's own sliders, not JupyterLab's shortcuts.
    for name in ("step", "epsilon"):
        slider = live.locator(f'[data-control="{name}"]')
        before = slider.input_value()
        slider.focus()
        slider.press("ArrowLeft" if before != slider.get_attribute("min") else "ArrowRight")
        assert slider.input_value() != before, f"the arrow key did not move the {name} slider"

    wait_for_idle_kernel(page)
    live.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "jupyterlab_12.png"))
    watched_page.watch.assert_clean("JupyterLab", scripts_only=True)
    assert CHAPTER_12.read_bytes() == NOTEBOOK_BYTES[CHAPTER_12], f"{CHAPTER_12} changed"
