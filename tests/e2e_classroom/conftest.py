"""The classroom's end-to-end test (`make e2e-classroom`): runs only with ``E2E=1``, like tests/e2e,
so that `make pytest` never starts a hub. It reuses the browser test's helpers (tests/e2e)."""

import os
import pathlib
import sys

collect_ignore_glob = [] if os.environ.get("E2E") == "1" else ["test_*.py"]

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "e2e"))
