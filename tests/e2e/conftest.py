"""Fixtures for the browser test (`make e2e`): one JupyterLab server and one Chromium for the run.

JupyterLab listens on 127.0.0.1 at a free port with a random token (``--allow-root`` when run as
root) and keeps its state in ``.jupyter/`` as the Makefile sets it; its user settings, workspaces
and checkpoints live in a temporary folder, with autosave off, so the test never writes into
notebooks/ and never reopens its tabs in your next ``make lab`` (each test also checks that its
notebook is unchanged on disk). Chromium is Debian's (``chromium`` on PATH), driven by Playwright
from Python; nothing is downloaded, and every request to an address other than the loopback is
refused.

These tests run only with ``E2E=1`` (``tests/conftest.py`` ignores this folder otherwise), so that
``make pytest`` stays a kernel-side test.
"""

from __future__ import annotations

import json
import os
import pathlib
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error

import pytest
from e2e_support import (
    CHROMIUM_ARGS,
    NOTEBOOKS,
    RESULT_KEY,
    ROOT,
    SCREENSHOTS,
    STATE,
    Lab,
    block_non_loopback,
)

LAB_START_TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _state_env() -> dict[str, str]:
    """The environment the Makefile exports (kept when already set, e.g. by make)."""
    env = dict(os.environ)
    for key, sub in [("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                     ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython"),
                     ("MPLCONFIGDIR", "matplotlib")]:
        env.setdefault(key, str(STATE / sub))
        pathlib.Path(env[key]).mkdir(parents=True, exist_ok=True)
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    return env


def _write_settings(folder: pathlib.Path) -> None:
    """User settings of the test's JupyterLab: no autosave, no news or update checks."""
    files = {
        "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings":
            {"fetchNews": "false", "checkForUpdates": False},
    }
    for rel, content in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))


@pytest.fixture(scope="session")
def chromium_path() -> str:
    path = shutil.which("chromium")
    if path is None:
        msg = ("Chromium not found on PATH: the browser test drives Debian's Chromium "
               "(apt-get install -y chromium) and never downloads a browser")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + "; CI=true, so this is a failure, not a skip.")
        pytest.skip(msg + ".")
    return path


@pytest.fixture(scope="session")
def browser(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def context(browser):
    """One browser context (one cache) for every page; requests off the machine are refused."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.refused = block_non_loopback(ctx)
    yield ctx
    ctx.close()


@pytest.fixture(scope="session")
def lab(tmp_path_factory, chromium_path):
    """One JupyterLab for the whole run, serving notebooks/; stopped (and checked) at the end."""
    tmp = tmp_path_factory.mktemp("jupyterlab")
    _write_settings(tmp / "settings")
    port, token = _free_port(), secrets.token_hex(24)
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser",
           f"--ServerApp.root_dir={NOTEBOOKS}", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}",
           f"--LabApp.user_settings_dir={tmp / 'settings'}",
           f"--LabApp.workspaces_dir={tmp / 'workspaces'}",
           f"--FileCheckpoints.checkpoint_dir={tmp / 'checkpoints'}",   # not notebooks/
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.news_url=",
           # window.jupyterapp: the test opens and closes notebooks in one page with app commands
           # (loading JupyterLab once instead of once per notebook); everything it checks, it
           # does as a reader would: menus, key presses, what is on screen.
           "--LabApp.expose_app_in_browser=True"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = tmp / "jupyterlab.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=NOTEBOOKS, env=_state_env(), stdout=out,
                                stderr=subprocess.STDOUT)
    server = Lab(port, token, proc, log)
    deadline = time.monotonic() + LAB_START_TIMEOUT_S
    while True:
        try:
            server.api("GET", "status")
            break
        except (urllib.error.URLError, OSError):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                pytest.fail(f"JupyterLab did not start within {LAB_START_TIMEOUT_S} s "
                            f"(exit code {proc.poll()}); its log:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
    yield server
    try:
        server.shutdown_kernels()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


RESULTS: dict[str, dict] = {}         # notebook -> its numbers, from the tests' reports


def pytest_runtest_logreport(report):
    if report.when == "call":
        for key, value in report.user_properties:
            if key == RESULT_KEY:
                name, numbers = value
                RESULTS[name] = numbers


def pytest_terminal_summary(terminalreporter):
    if not RESULTS:
        return
    tr = terminalreporter
    tr.section("browser test, per notebook")
    tr.write_line(f"{'notebook':46s} {'run all -> idle':>16s} {'control -> output':>18s} "
                  f"{'whole check':>12s}")

    def fmt(value, unit, digits):
        return "-" if value is None else f"{value:.{digits}f} {unit}"

    for name, r in RESULTS.items():
        tr.write_line(f"{name:46s} {fmt(r.get('run_s'), 's', 1):>16s} "
                      f"{fmt(r.get('latency_ms'), 'ms', 0):>18s} {fmt(r.get('total_s'), 's', 1):>12s}")
    try:
        shots = SCREENSHOTS.relative_to(ROOT)
    except ValueError:
        shots = SCREENSHOTS
    tr.write_line(f"screenshots in {shots}/")
