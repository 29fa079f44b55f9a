# Two commands on a fresh machine: `make lab` opens the lessons, `make test` runs every check.
# Each creates .venv from requirements.txt first when it is missing or out of date.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# Keep Jupyter, IPython and matplotlib state inside the project (git-ignored), not in $HOME.
STATE := $(CURDIR)/.jupyter
export JUPYTER_CONFIG_DIR  := $(STATE)/config
export JUPYTER_DATA_DIR    := $(STATE)/data
export JUPYTER_RUNTIME_DIR := $(STATE)/runtime
export IPYTHONDIR          := $(STATE)/ipython
export MPLCONFIGDIR        := $(STATE)/matplotlib
export PYDEVD_DISABLE_FILE_VALIDATION := 1

# Jupyter refuses to start as root unless told it may.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

# pytest and strict nbval run one worker per core (at most 2: the notebooks pin one torch thread
# each); for nbval, --dist loadfile keeps a notebook's cells in one kernel.
NBVAL_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 2 ] && n=2; echo $$n)
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg \
	--nbval-cell-timeout 300 -n $(NBVAL_WORKERS) --dist loadfile
# "Another CPU": PyTorch's generic kernels, MKL held to SSE4.2, oneDNN to SSE4.1 (on a CPU with
# AVX-512, float32 F.gelu runs in oneDNN's AVX-512 code, which an AVX2 CPU never runs),
# one OpenMP thread. Floats that depend on summation order change in their last digits here; what
# nbval compares must not.
PORTABLE_ENV := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41 \
	OMP_NUM_THREADS=1

.PHONY: setup lab test lint pytest nbval test-portable bench execute clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-compile -r requirements.txt
	$(PY) -m pip install --quiet --no-compile --no-deps -e .
	@# Bytecode: pip compiles every installed module one file at a time (half of a fresh setup's
	@# time); compileall does the same on every core. Like pip, it leaves a file that does not
	@# compile as source (torch ships one written for Python 3.12): hence -qq and || true.
	$(PY) -m compileall -qq -j 0 $$($(PY) -c "import sysconfig as s; \
		print(*{s.get_path('purelib'), s.get_path('platlib')})") || true
	mkdir -p $(JUPYTER_CONFIG_DIR) $(JUPYTER_DATA_DIR) $(JUPYTER_RUNTIME_DIR) $(IPYTHONDIR) $(MPLCONFIGDIR)
	touch $@

lab: setup
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(ROOT_FLAG)

lint: setup
	$(VENV)/bin/ruff check normlib tools tests notebooks

pytest: setup sandbox
	$(PY) -m pytest tests -n $(NBVAL_WORKERS)

# The classroom grader runs every answer inside a bubblewrap sandbox (normlib/classroom/ISOLATION.md).
# As root with apt (CI, a hub server) this installs Debian's package when it is missing; elsewhere it
# says how, and the grader's tests are skipped (under CI=true they fail instead).
.PHONY: sandbox
sandbox:
	@command -v bwrap >/dev/null || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null 2>&1 || \
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; }; \
		else echo "note: bubblewrap (bwrap) is not installed; the grader's tests are skipped" \
			"(Debian/Ubuntu: sudo apt-get install bubblewrap)" >&2; fi; }

nbval: setup
	$(PY) -m pytest $(NBVAL) notebooks

# Every notebook again under strict nbval, with the numerics of another CPU (CONTRIBUTING.md, "Tests").
test-portable: setup
	$(PORTABLE_ENV) $(PY) -m pytest $(NBVAL) notebooks

# Speed is measured, never asserted: widget callbacks and notebook cell times, each beside a
# reference measured in the same run (tools/bench.py). All notebooks, or: make bench NB=notebooks/04_*.ipynb
bench: setup
	$(PY) tools/bench.py $(if $(filter command line,$(origin NB)),$(NB))

test: check-exercises check-translations lint pytest nbval

# Re-run notebooks top to bottom in a fresh kernel and save them with their outputs (what nbval
# compares). All of them, or some: make execute NB="notebooks/03_*.ipynb"
NB ?= notebooks/*.ipynb
execute: setup
	$(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
		--ExecutePreprocessor.timeout=300 $(NB)

# Lesson 04's warmup explorer browses 96 cached training runs, normlib/data/warmup_grid.json
# (tools/warmup_grid.py), which also keeps lesson 11's 6 Peri-LN runs; this recomputes them all,
# about two minutes of CPU on one thread.
.PHONY: warmup-grid
warmup-grid: setup
	$(PY) -m tools.warmup_grid

# Lesson 05's alpha/beta widget reads 30 cached model-update measurements,
# normlib/data/model_update_grid.json (tools/model_update_grid.py); this recomputes them.
.PHONY: model-update-grid
model-update-grid: setup
	$(PY) -m tools.model_update_grid

# Every notebook's first code cell installs normlib where it is missing (Colab) and does nothing
# elsewhere; tools/notebook_setup.py holds it and writes it into the lessons, solutions and the drill.
.PHONY: notebook-setup test-install
notebook-setup: setup
	$(PY) -m tools.notebook_setup

# normlib as a learner installs it: Binder's steps (binder/) replayed in a fresh virtual environment
# outside the repository, then a checker and lessons 00, 03 and practice 01 under nbval there.
test-install: setup
	$(PY) -m pytest -v tests/install/check_install.py

# Hand-implementation practice (README, "Practice"). `exercises` copies the practice notebooks
# into the git-ignored workspace/ (the Chinese ones, notebooks/zh/exercises/, into workspace/zh/)
# and never overwrites a file already there; `practice` opens JupyterLab on it. The practice
# notebooks are generated from notebooks/exercises/solutions/: `generate-exercises` rebuilds and
# executes the ones whose sources changed, `check-exercises` (part of `make test`) fails when one
# is out of date.
.PHONY: exercises practice generate-exercises check-exercises
exercises: setup
	$(PY) -m tools.workspace

practice: exercises
	$(VENV)/bin/jupyter lab --notebook-dir=workspace $(ROOT_FLAG)

# The repository a class clones (docs/classroom.md, "Preparing the course repository"): the lessons,
# editable practice notebooks with a classroom banner, normlib; no solutions, tests or tools. DEST
# is a new folder outside this repository, or an earlier build: each run adds one commit there and
# never rewrites a practice notebook it released (tools/course.py).
.PHONY: course
course: setup
	@test -n "$(DEST)" || { echo "usage: make course DEST=folder" >&2; exit 2; }
	$(PY) -m tools.course "$(DEST)"

generate-exercises: setup
	$(PY) -m tools.generate_exercises --execute

check-exercises: setup
	$(PY) -m tools.generate_exercises --check

# docs/mistakes.md lists every mistake code with its English and Chinese message, generated from
# the checkers' catalogues (tests/test_exercises_tools.py fails when it is out of date).
.PHONY: mistake-codes
mistake-codes: setup
	$(PY) -m tools.mistake_codes

# Grade a class (normlib/classroom/): SUBMISSIONS holds one folder per student, as
# `python -m normlib.classroom collect` snapshots them; OUT (outside any git work tree) gets
# gradebook.csv, report.html, feedback/, results.jsonl, gradescope/. The assignment goes in
# GRADE_ARGS, e.g. GRADE_ARGS="--exercises 01_layer_norm,03_rms_norm --roster roster.csv
# --format canvas" (docs/classroom.md). Each answer runs in a sandbox (normlib/classroom/ISOLATION.md).
.PHONY: grade
grade: setup
	@test -n "$(SUBMISSIONS)" -a -n "$(OUT)" || \
		{ echo "usage: make grade SUBMISSIONS=folder-of-student-folders OUT=folder [GRADE_ARGS=...]" >&2; exit 2; }
	$(PY) -m normlib.classroom grade "$(SUBMISSIONS)" --out "$(OUT)" $(GRADE_ARGS)

# The Chinese edition (README.zh-CN.md): notebooks/zh/ is generated from the English notebooks and
# the translation files in notebooks/zh/_translations/. `translations` regenerates it (after the
# English notebooks are re-executed, say); `check-translations` (part of `make test`) fails when an
# English markdown cell or code comment has no translation or changed since it was translated, when
# the Chinese prose keeps an English word (not in _translations/english-words.txt), or when a Chinese
# page (*.zh-CN.md, the cheat sheet) misses a Chinese lesson or has a broken link, naming the place.
.PHONY: translations check-translations
translations: setup
	$(PY) -m tools.translations --write

check-translations: setup
	$(PY) -m tools.translations --check

# Browser test (CONTRIBUTING.md, "Browser test"): every notebook in JupyterLab, driven in Debian's Chromium
# (`chromium` on PATH; skipped without it, a failure when CI=true), and every slide deck offline.
# One worker per core, as nbval: each worker runs its own JupyterLab and Chromium. The latencies it
# prints are then measured beside a second notebook; E2E_WORKERS=1 measures one notebook at a time.
E2E_WORKERS ?= $(NBVAL_WORKERS)
.PHONY: e2e slides
e2e: setup slides
	E2E=1 $(PY) -m pytest tests/e2e -v --timeout 900 -n $(E2E_WORKERS)

# reveal.js decks of the lessons in build/slides/, viewable offline (docs/teaching.md, "Presenting"). The
# scripts, styles and fonts come from the npm packages locked in tools/slides/package-lock.json.
SLIDES_NPM := tools/slides/node_modules/.package-lock.json
slides: setup $(SLIDES_NPM)
	$(PY) tools/build_slides.py --out build/slides

$(SLIDES_NPM): tools/slides/package.json tools/slides/package-lock.json
	cd tools/slides && npm ci --no-audit --no-fund
	touch $@

clean:
	rm -rf $(VENV) $(STATE) normlib.egg-info build/site build/site-doctrees build/site-frames build/site-vendor

# The classroom kit (classroom/, docs/classroom.md). `hub`: a trial JupyterHub on 127.0.0.1 for a
# laptop (test users, one password, everyone as your Unix user: never for a real class).
# `e2e-classroom`: a graded week on that hub (tests/e2e_classroom): a course built by tools.course
# behind a .git URL, two students in Chromium and a roster of three, nbgitpuller links, an
# instructor's update, then collect at a deadline, grade, the Canvas CSV, feedback returned. The hub's packages (classroom/requirements.txt) go into .venv on
# first use, with requirements.txt as constraints; the proxy comes from classroom/package-lock.json.
HUB_STAMP := $(VENV)/.installed-hub
HUB_NPM   := classroom/node_modules/.package-lock.json
HUB_PORT  ?= 8000
HUB_USERS ?= alice,bob,carol
HUB_PASSWORD ?= normlib
.PHONY: hub e2e-classroom
hub: setup $(HUB_STAMP) $(HUB_NPM)
	@echo "Trial hub: http://127.0.0.1:$(HUB_PORT)/  users: $(HUB_USERS)  password: $(HUB_PASSWORD)"
	@echo "Homes in build/hub/homes/. Ctrl+C stops it (and the students' servers)."
	NORMLIB_HUB_DIR=$(CURDIR)/build/hub NORMLIB_HUB_PORT=$(HUB_PORT) NORMLIB_HUB_USERS=$(HUB_USERS) \
		NORMLIB_HUB_PASSWORD=$(HUB_PASSWORD) $(VENV)/bin/jupyterhub -f classroom/jupyterhub_config_trial.py

e2e-classroom: setup $(HUB_STAMP) $(HUB_NPM)
	E2E=1 $(PY) -m pytest tests/e2e_classroom -v -s --timeout 600

$(HUB_STAMP): $(STAMP) classroom/requirements.txt
	$(PY) -m pip install --quiet -r classroom/requirements.txt -c requirements.txt
	touch $@

$(HUB_NPM): classroom/package.json classroom/package-lock.json
	cd classroom && npm ci --no-audit --no-fund
	touch $@

# The lessons as one offline website in build/site/ (README, "Read it without installing"): English
# and Chinese editions, practice notebooks (never a solution), cheat sheet, mistake codes and guides,
# from the stored outputs; each lesson widget moves over frames pre-rendered in the lesson's own
# kernel (tools/site/frames.py, rebuilt when a lesson or normlib changes). Sphinx and jieba
# (site/requirements.txt) go into .venv on first use; MathJax, require.js and the widget manager come
# from site/package-lock.json. Open build/site/index.html, or serve it:
# python -m http.server --bind 127.0.0.1 --directory build/site 8000
SITE_STAMP := $(VENV)/.installed-site
SITE_NPM   := site/node_modules/.package-lock.json
SITE_FRAMES := build/site-frames/frames/manifest.js
SITE_VENDOR := build/site-vendor/jieba_user_dict.txt
.PHONY: site e2e-site
site: setup $(SITE_STAMP) $(SITE_FRAMES) $(SITE_VENDOR)
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html -c site -d build/site-doctrees . build/site
	@echo "site: open build/site/index.html ($$(du -sh build/site | cut -f1))"

$(SITE_FRAMES): $(STAMP) notebooks/[0-9]*.ipynb notebooks/zh/[0-9]*.ipynb normlib/*.py normlib/data/*.json \
		tools/site/*.py
	OMP_NUM_THREADS=1 $(PY) -m tools.site.frames --out build/site-frames

$(SITE_VENDOR): $(SITE_NPM) tools/site/vendor.py tools/site/jieba_dict.py notebooks/zh/_translations/glossary.md
	$(PY) -m tools.site.vendor --out build/site-vendor
	$(PY) -m tools.site.jieba_dict $@

$(SITE_STAMP): $(STAMP) site/requirements.txt
	$(PY) -m pip install --quiet -r site/requirements.txt -c requirements.txt
	touch $@

$(SITE_NPM): site/package.json site/package-lock.json
	cd site && npm ci --no-audit --no-fund
	touch $@

# The site in Chromium (tests/e2e_site): every page offline, each pre-rendered widget moved once,
# Chinese and English search; first tests/test_site.py with the site's packages installed (make
# pytest skips its Sphinx and jieba tests when they are not).
e2e-site: site
	$(PY) -m pytest tests/test_site.py -q -n 0
	E2E=1 $(PY) -m pytest tests/e2e_site -v --timeout 900 -n $(E2E_WORKERS)
