"""normlib installed as a learner installs it, outside the repository (``make test-install``).

Not part of ``make test`` (it creates a virtual environment: a minute or two of pip): CI runs it.
The steps are Binder's (repo2docker): ``pip install -r binder/requirements.txt``, then
``binder/postBuild``, which installs normlib from a wheel of this repository with its declared
dependencies under the constraints of requirements.txt. Then, from a folder outside the repository:
a checker runs from plain Python, and lessons 00 and 03 and practice notebook 01, copied there, pass
strict nbval. The wheel itself must carry normlib (its checkers, helpers and data) and none of the
project's tools.

    python -m pytest tests/install/check_install.py     (a file pytest collects only when named)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ["00_tour.ipynb", "03_layernorm_and_rmsnorm.ipynb", "exercises/01_layer_norm.ipynb"]


def _run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A fresh virtual environment outside the repository with Binder's steps replayed in it."""
    home = tmp_path_factory.mktemp("learner")
    env_dir = home / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bindir = env_dir / "bin"
    # A clean environment: nothing of the project's .venv, nothing on PYTHONPATH.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    env["VIRTUAL_ENV"] = str(env_dir)
    for key in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR",
                "MPLCONFIGDIR"):
        env[key] = str(home / "state" / key.lower())
    pip = [str(bindir / "python"), "-m", "pip", "install", "--quiet", "--no-compile"]
    # The repository is copied (without .venv and build outputs) so that postBuild's workspace
    # copy and pip's build write nowhere in the checkout under test.
    repo = home / "repo"
    shutil.copytree(ROOT, repo, ignore=shutil.ignore_patterns(
        ".venv", ".jupyter", "build", "workspace", "node_modules", "__pycache__", "*.egg-info", ".git"))
    _run(pip + ["-r", "binder/requirements.txt"], repo, env)
    _run(["bash", "binder/postBuild"], repo, env)
    _run(pip + ["-c", "requirements.txt", "pytest", "nbval"], repo, env)
    return home, env


def test_the_wheel_carries_normlib_and_no_tool(tmp_path):
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
          "-w", str(tmp_path), str(ROOT)], ROOT, dict(os.environ))
    (wheel,) = tmp_path.glob("normlib-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.startswith("normlib-")}
    assert tops == {"normlib"}, f"the wheel holds more than normlib: {sorted(tops)}"
    for needed in ("normlib/norms.py", "normlib/exercises/layer_norm.py", "normlib/viz.py",
                   "normlib/data/warmup_grid.json"):
        assert needed in names, f"{needed} is missing from {wheel.name}"
    for tool in ("translations", "generate", "workspace", "bench", "build_slides"):
        assert not [n for n in names if tool in n], f"a build tool ({tool}) ships in {wheel.name}"
    metadata = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    for dep in ("torch", "numpy", "matplotlib", "ipywidgets"):
        assert f"Requires-Dist: {dep}" in metadata, f"{dep} is not declared in the wheel's metadata"


def test_a_checker_runs_from_plain_python(installed):
    home, env = installed
    script = (
        "import torch, normlib\n"
        "from normlib.exercises import check_layer_norm\n"
        "assert 'site-packages' in normlib.__file__, normlib.__file__\n"
        "def good(x, weight, bias, eps=1e-5):\n"
        "    h = x.float()\n"
        "    mu = h.mean(-1, keepdim=True)\n"
        "    var = ((h - mu) ** 2).mean(-1, keepdim=True)\n"
        "    return ((h - mu) / torch.sqrt(var + eps) * weight + bias).to(x.dtype)\n"
        "def bad(x, weight, bias, eps=1e-5):\n"
        "    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) * weight + bias\n"
        "r = check_layer_norm(good)\n"
        "assert r.passed, r\n"
        "r = check_layer_norm(bad)\n"
        "assert not r.passed and r.diagnosis, r\n"
        "print('version', normlib.__version__)\n"
    )
    out = _run([str(Path(env["VIRTUAL_ENV"]) / "bin" / "python"), "-c", script], home, env)
    assert out.startswith("version ")


def test_lessons_and_practice_run_under_nbval_outside_the_repository(installed):
    home, env = installed
    folder = home / "notebooks"
    for name in NOTEBOOKS:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "notebooks" / name, folder / name)
    shutil.copy(ROOT / "tests" / "nbval_sanitize.cfg", home / "nbval_sanitize.cfg")
    python = str(Path(env["VIRTUAL_ENV"]) / "bin" / "python")
    _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
          "--nbval-sanitize-with", "nbval_sanitize.cfg", "--nbval-cell-timeout", "300",
          *[f"notebooks/{n}" for n in NOTEBOOKS]], home, env)
