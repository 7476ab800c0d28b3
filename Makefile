# One entry point for humans and CI. Every target sets itself up first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_VENV := .venv-demo

.PHONY: report-png docs-site setup demo test test-slow test-all fuzz test-network test-browser test-ray e2e e2e-proxy bench-proxy lint fix bench eval eval-peers clean schema docs dist

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@# The distribution was called ctxcli before it took its own name (ctxcli on PyPI is
	@# another project): drop an old editable install of it and its metadata in src/.
	-@$(BIN)/pip uninstall --quiet --yes ctxcli >/dev/null 2>&1
	rm -rf src/ctxcli.egg-info
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# What a user gets: the package alone (no dev toolchain) in a venv of its own, rebuilt
# when the sources change; then one reduction of a bundled sample, and its one number.
$(DEMO_VENV)/.installed: pyproject.toml $(shell find src -name '*.py' -o -name '*.toml' -o -name '*.json')
	$(PY) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/pip install --quiet .
	touch $@

demo: $(DEMO_VENV)/.installed
	@mkdir -p build
	$(DEMO_VENV)/bin/ctx reduce sample_transcripts/openai_chat_support.jsonl -o build/demo.reduced.jsonl --force
	$(DEMO_VENV)/bin/ctx restore build/demo.reduced.jsonl -o build/demo.restored.jsonl
	cmp build/demo.restored.jsonl sample_transcripts/openai_chat_support.jsonl && echo "restored byte for byte"

# The default suite: every test not marked slow (a few minutes on 2 cores). The slow tests
# (whole real transcripts, property runs, subprocesses) and the suites that need the
# network, a browser, the real clients or Ray have targets of their own; `make test-all`
# (what CI runs) runs them all. Tests on ../shared/transcripts skip without it
# (CTX_REQUIRE_SHARED=1 makes them fail instead).
test: $(STAMP)
	$(BIN)/python -m pytest

# The slow tests the default run leaves out (those of the other suites stay in theirs).
test-slow: $(STAMP)
	$(BIN)/python -m pytest -m 'slow and not e2e and not browser and not ray and not network'

# The wheel installed into a fresh virtualenv with its dependencies from PyPI, and the
# pre-commit hooks installed from this checkout.
test-network: $(STAMP)
	$(BIN)/python -m pytest -m network

# Ray Data in local mode (2 CPUs): the `ray` extra, then the tests marked `ray`, under a
# timeout so a hung Ray never outlives the run.
$(VENV)/.ray-installed: $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,ray]'
	touch $@

test-ray: $(VENV)/.ray-installed
	timeout 1800 $(BIN)/python -m pytest -m ray -p no:cacheprovider

test-all: test test-slow fuzz test-network test-browser test-ray e2e-proxy e2e docs-site

# The model of ctx's user surface (tests/api/test_user_surface_model.py) run on new random
# sequences of commands for CTX_FUZZ_SECONDS (default 600; `make test` runs a short,
# derandomized search). Hypothesis keeps what it found in .hypothesis/ctx-fuzz
# (CTX_FUZZ_DB elsewhere) and tries it first next time; a failure prints the shrunk
# sequence of commands. With CTX_FUZZ_DERANDOMIZE=1 (as .ci/run sets) it is instead one fixed
# search of CTX_FUZZ_EXAMPLES sequences, the same on every machine.
fuzz: $(STAMP)
	CTX_FUZZ_SECONDS=$${CTX_FUZZ_SECONDS:-600} $(BIN)/python -m pytest -m fuzz -p no:cacheprovider \
		tests/api/test_user_surface_model.py

# The ctx report pages in a real headless Chromium: Debian's chromium (apt-get, as root,
# when it is missing) driven by Playwright for Python (the `browser` extra); Playwright's
# own browser download is never used. Screenshots land in build/.
$(VENV)/.browser-installed: $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,browser]'
	touch $@

# The README's picture (docs/report.png): ctx report of the bundled Claude Code sample,
# drawn in the same headless Chromium (scripts/report_png.py).
report-png: $(VENV)/.browser-installed
	$(BIN)/python scripts/report_png.py

test-browser: $(VENV)/.browser-installed
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		echo "test-browser: could not install chromium; the browser tests will skip"
	$(BIN)/python -m pytest -m browser

# Real-client end-to-end tests (pytest -m e2e): the pinned Claude Code and Codex CLIs and
# ccusage from npm (scripts/install_clients.sh caches them in $$CTX_E2E_CACHE, else
# ~/.cache/ctx-e2e) resume real sessions against loopback fake APIs. Skip if npm is missing.
e2e: $(STAMP)
	scripts/install_clients.sh
	$(BIN)/python -m pytest -m e2e tests/e2e

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts sample_transcripts
	$(BIN)/ruff format --check src tests scripts sample_transcripts
	$(BIN)/mypy
	$(BIN)/lint-imports

fix: $(STAMP)
	$(BIN)/ruff check --fix src tests scripts sample_transcripts
	$(BIN)/ruff format src tests scripts sample_transcripts

# The peers (LangChain, reasonblocks) come from the optional `bench` extra; if they
# cannot be installed the bench says so and measures ctx alone. BENCH_MB=100 for more;
# BENCH_DATASET_MB=1000 for the ~1 GB dataset case (default 20 MiB).
$(VENV)/.bench-installed: $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,bench,ray]' || echo "bench: peers not installed"
	touch $@

# Each run is kept for the manual (scripts/record_bench.py: docs/bench/, docs/benchmarks.md).
RECORD = $(BIN)/python scripts/record_bench.py

bench: $(VENV)/.bench-installed
	$(RECORD) bench -- $(BIN)/python benchmarks/bench.py
	$(RECORD) bench_live -- $(BIN)/python benchmarks/bench_live.py
	$(RECORD) bench_proxy -- $(BIN)/python benchmarks/bench_proxy.py
	$(RECORD) bench_cost -- $(BIN)/python benchmarks/bench_cost.py
	$(RECORD) bench_hooks -- $(BIN)/python benchmarks/bench_hooks.py

# The real Claude Code CLI through ctx wrap / direct / headroom (npm into CTX_E2E_CACHE).
# BENCH_TURNS=N for a shorter or longer scripted run (default 40).
bench-proxy: $(STAMP)
	$(BIN)/python benchmarks/bench_proxy.py

# The real Claude Code and Codex CLIs (npm, pinned) through ctx wrap against fake APIs.
e2e-proxy: $(STAMP)
	$(BIN)/python -m pytest -m e2e tests/proxy/test_proxy_e2e.py

# eval.py: tokens saved and referenced-term recall of every ctx stage/preset and every
# peer (reasonblocks, LangChain, cozempic, headroom-ai) on ../shared/transcripts, one table
# (~10 s). eval-peers: the detail tables (clear vs LangChain at equal settings, masking,
# the Claude Code preset vs cozempic). headroom-ai is tried; if it does not install the
# table says "not installed".
$(VENV)/.eval-installed: $(VENV)/.bench-installed
	$(BIN)/pip install --quiet -e '.[dev,bench,headroom]' || echo "eval: headroom-ai not installed"
	touch $@

eval: $(VENV)/.eval-installed
	$(RECORD) eval -- $(BIN)/python benchmarks/eval.py

eval-peers: $(VENV)/.bench-installed
	$(BIN)/python benchmarks/eval_peers.py

# Regenerate src/ctxcli/ctx.schema.json after changing a stage's options or a setting.
schema: $(STAMP)
	$(BIN)/python scripts/generate_schema.py

# Regenerate the marked blocks of README.md (stage table, ctx --help, the plugins, and the
# output of every `$` line in a run block: the README runs in a scratch checkout).
docs: $(STAMP)
	$(BIN)/python scripts/gen_docs.py

# The manual: the pages generated from the code (a page per command, stage and preset),
# then mkdocs build --strict into build/site (the `docs` extra: MkDocs and Material).
$(VENV)/.docs-installed: $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,docs]'
	touch $@

docs-site: $(VENV)/.docs-installed
	$(BIN)/python scripts/gen_site.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# sdist and wheel in dist/ (the wheel is built from the sdist, so the sdist is complete).
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache $(DEMO_VENV)
