"""JupyterLab end to end: open chapter 01, run every cell, play with the ipywidgets explorer.

The server runs from this venv on a free local port with a random token, serving a temporary
copy of the notebook (outputs cleared, so the explorer on screen is the one this run draws);
the committed notebook is never touched. JupyterLab's settings and workspaces live in the
temporary folder too, with news and update checks off, so nothing is fetched from outside.
"""

from __future__ import annotations

import json
import math
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
import pytest

from attnlib import reference

from .conftest import LOCAL_HOST, ROOT, WatchedPage
from .helpers import expect_cells

NOTEBOOK = ROOT / "notebooks" / "01_self_attention_by_hand.ipynb"
NOTEBOOK_BYTES = NOTEBOOK.read_bytes()  # to check that nothing here writes to it
START_TIMEOUT_S = 30
RUN_ALL_TIMEOUT_MS = 60_000
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
SLIDER_STEP = 0.05  # the explorer's FloatLogSlider: exponent from -1.5 to 1.5 in steps of 0.05


@dataclass
class Lab:
    url: str  # base URL, ending in '/'
    token: str
    notebook: Path  # the temporary copy
    log: Path

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
    notebook = clean_copy(NOTEBOOK, root_dir)
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
        "IPYTHONDIR": str(base / "ipython"),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        "PYTHONUNBUFFERED": "1",
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
    running = Lab(url, token, notebook, log)
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


def run_started(page) -> bool:
    """Whether some code cell has been queued or run: its prompt is no longer the blank ``[ ]:``
    of a cleared notebook."""
    return any(re.fullmatch(r"\[(\*|\d+)\]:", text.strip()) for text in prompts(page))


def run_all_cells(page, n_code_cells: int) -> None:
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
            break
        except PlaywrightTimeoutError:
            # On a loaded machine the click can land and still time out; clicking again would
            # run every cell a second time, so retry only if no cell has been queued.
            page.wait_for_timeout(2_000)  # time for a landed click to queue the first cell
            if run_started(page):
                break
            page.keyboard.press("Escape")
            if attempt == 9:
                raise AssertionError("Run → Run All Cells stayed disabled") from None
            page.locator(".jp-Notebook .jp-Cell").first.click()
    try:
        wait_until_run(page, n_code_cells)
    except PlaywrightTimeoutError:
        status = page.locator(".jp-Notebook-ExecutionIndicator").get_attribute("data-status")
        raise AssertionError(
            f"Run All Cells did not finish in {RUN_ALL_TIMEOUT_MS / 1000:.0f} s; kernel "
            f"{status}; prompts {prompts(page)}"
        ) from None


def wait_until_run(page, n_code_cells: int) -> None:
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
        timeout=RUN_ALL_TIMEOUT_MS,
    )


def wait_for_idle_kernel(page, timeout: float = 45_000) -> None:
    page.wait_for_function(
        """() => document.querySelector(
            '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator')
          ?.getAttribute("data-status") === "idle" """,
        timeout=timeout,
    )


def slider_exponent(readout_text: str) -> float:
    """The slider's exponent, read off its readout (3 significant digits), snapped to its grid."""
    shown = float(readout_text)
    exponent = round(math.log10(shown) / SLIDER_STEP) * SLIDER_STEP
    # d3's ".3g" keeps trailing zeros ("2.00"), Python's drops them: compare the numbers.
    assert float(f"{10**exponent:.3g}") == shown, f"readout {readout_text!r}, exponent {exponent}"
    return exponent


def test_chapter_01_runs_and_its_explorer_recomputes(
    lab: Lab, watched_page: WatchedPage, screenshots: Path
) -> None:
    page = watched_page.page
    n_code_cells = sum(
        cell.cell_type == "code" for cell in nbformat.read(lab.notebook, as_version=4).cells
    )
    page.goto(f"{lab.url}lab/tree/{lab.notebook.name}?token={lab.token}", wait_until="load")
    page.wait_for_function(  # every cell drawn
        "(n) => document.querySelectorAll('.jp-CodeCell .jp-InputPrompt').length === n",
        arg=n_code_cells,
        timeout=45_000,
    )
    wait_for_idle_kernel(page)

    run_all_cells(page, n_code_cells)
    errors = page.locator(f".jp-Notebook {ERROR_OUTPUT}")
    assert errors.count() == 0, f"a cell raised:\n{errors.first.inner_text()[:2000]}"
    numbers = [int(t.strip()[1:-2]) for t in prompts(page)]
    assert numbers == list(range(1, n_code_cells + 1)), f"execution counts {numbers}"

    # The explorer: four matrix editors, the √d_k checkbox, the temperature slider, a readout.
    explorer = page.locator(".jp-OutputArea-output .widget-vbox").filter(
        has=page.locator(".widget-hslider")
    )
    explorer.wait_for(state="visible", timeout=30_000)
    assert explorer.locator("textarea").count() == 4
    checkbox = explorer.locator(".widget-checkbox input[type=checkbox]")
    assert "divide scores by √d_k" in explorer.locator(".widget-checkbox").inner_text()
    slider = explorer.locator(".widget-hslider")
    assert "temperature" in slider.locator(".widget-label").inner_text()
    readout = slider.locator(".widget-readout")
    weights = explorer.locator(".widget-html-content table").filter(
        has=page.locator("caption", has_text=re.compile(r"^\s*attention weights\s*$"))
    )
    captions = explorer.locator(".widget-html-content table caption").all_inner_texts()
    assert [c.strip() for c in captions] == [
        "scores (query · key)",
        "attention weights",
        "outputs",
    ]
    cells = weights.locator("td")
    assert float(readout.inner_text()) == 1.0
    expect_cells(cells, reference.worked_example().weights, "Lab, at start")
    explorer.scroll_into_view_if_needed()

    # Move the slider with the keyboard: 6 steps right, exponent 0 → 0.3.
    handle = slider.locator(".noUi-handle")
    handle.focus()
    for _ in range(6):
        handle.press("ArrowRight")
    page.wait_for_function(
        "(el) => parseFloat(el.textContent) !== 1", arg=readout.element_handle(), timeout=10_000
    )
    exponent = slider_exponent(readout.inner_text())
    assert exponent == pytest.approx(0.30)
    expected = reference.worked_example(temperature=10**exponent)
    expect_cells(cells, expected.weights, f"Lab, temperature {readout.inner_text()}", 20_000)

    # Tick "divide scores by √d_k": the kernel recomputes with scale=True, same temperature.
    checkbox.check()
    expected = reference.worked_example(scale=True, temperature=10**exponent)
    expect_cells(cells, expected.weights, "Lab, scaled", 20_000)
    before = readout.inner_text().strip()
    handle.press("ArrowLeft")
    page.wait_for_function(
        "([el, before]) => el.textContent.trim() !== before",
        arg=[readout.element_handle(), before],
        timeout=10_000,
    )
    exponent = slider_exponent(readout.inner_text())
    assert exponent == pytest.approx(0.25)
    expected = reference.worked_example(scale=True, temperature=10**exponent)
    expect_cells(cells, expected.weights, f"Lab, scaled, temperature {exponent}", 20_000)

    # The chapter's kernel-free explorer (attnlib.live) runs in JupyterLab's output too.
    live = page.locator('.jp-OutputArea-output .attnlib-live[data-explorer="worked-example"]')
    assert live.count() == 1, "no kernel-free explorer in chapter 01's outputs"
    live_weights = live.locator('[data-readout="weights"] td')
    expect_cells(live_weights, reference.worked_example().weights, "Lab, live explorer")
    live.locator('[data-control="temperature"]').fill("1")
    expected = reference.worked_example(temperature=10.0)
    expect_cells(live_weights, expected.weights, "Lab, live explorer at temperature 10")

    wait_for_idle_kernel(page)  # the heatmap is redrawn after the tables
    explorer.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "jupyterlab_01.png"))
    watched_page.watch.assert_clean("JupyterLab", scripts_only=True)
    assert NOTEBOOK.read_bytes() == NOTEBOOK_BYTES, f"{NOTEBOOK} changed during the test"
