"""Fixtures for the site's browser test (`make e2e-site`): build/site/ served on 127.0.0.1, one
Debian Chromium driven by Playwright (never `playwright install`), every request off the loopback
refused and recorded. Runs only with E2E=1, as tests/e2e does, so that `make pytest` stays fast."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

collect_ignore_glob = [] if os.environ.get("E2E") == "1" else ["test_*.py"]

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "build" / "site"


@pytest.fixture(scope="session")
def server():
    """http://127.0.0.1:PORT serving build/site/ (built by `make site`)."""
    if not (SITE / "index.html").exists():
        pytest.fail("build/site/ is missing: run `make site` (make e2e-site does)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1",
                             "--directory", str(SITE), str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    for _ in range(100):
        try:
            urllib.request.urlopen(url, timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="session")
def context():
    from playwright.sync_api import sync_playwright

    from tests.e2e.e2e_support import CHROMIUM_ARGS, is_loopback
    path = shutil.which("chromium")
    if path is None:
        msg = "Chromium not found on PATH (apt-get install -y chromium); the test never downloads one"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, args=[
            *CHROMIUM_ARGS, "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1;localhost"])
        ctx = browser.new_context(viewport={"width": 1300, "height": 900})
        # Chromium's proxy is a dead port for every host but the loopback, so nothing leaves the
        # machine; listening (not routing each request through Python) records what tried to.
        ctx.refused = []
        ctx.on("request", lambda r: None if is_loopback(r.url) else ctx.refused.append(r.url))
        yield ctx
        ctx.close()
        browser.close()
