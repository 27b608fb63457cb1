# seqlab: `make demo` trains on the bundled corpus, `make test` runs the tests, `make typecheck` checks the family
# contract with mypy. All set up .venv.
VENV ?= .venv
PYTHON ?= python3
BIN = $(VENV)/bin
DATA ?= ../shared/data

.PHONY: install demo test test-slow test-browser docs docs-figures lint typecheck bench clean docker docker-check

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0          # the CPU build; install it before anything needing torch
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

demo: install
	$(BIN)/seqlab train lm --config configs/demo.yaml --overwrite
	@echo "---- a sample from the trained model:"
	$(BIN)/seqlab generate runs/demo --prompt "ROMEO:" --max-tokens 300 --temperature 0.8 --seed 1

# the default suite spread over the machine's cores (pytest-xdist, a whole file to one worker so that its trained
# fixtures are made once), at most 4 workers (each holds PyTorch); TEST_WORKERS=0 runs it in this process
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ "$$n" -gt 4 ] && n=4; echo $$n)
test: install
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test-slow: install
	$(BIN)/python -m pytest -q -m slow

# the web page in a real headless Chromium: needs Debian's chromium (sudo apt-get install chromium)
CHROMIUM ?= /usr/bin/chromium
test-browser: install
	@test -x $(CHROMIUM) || { echo "make test-browser needs Chromium at $(CHROMIUM): apt-get install chromium"; exit 2; }
	$(BIN)/pip install -q -e '.[browser]'
	SEQLAB_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest -q -m 'browser and not slow' tests/test_serve_page.py \
		tests/test_explore_page.py tests/test_compare_page.py tests/test_serve_docs_page.py tests/test_serve_families.py
	SEQLAB_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest -q -m slow tests/test_docs_site.py    # the built site

# the documentation site (mkdocs.yml, docs/): built into site/, strict (a broken link or anchor fails), readable
# offline (open site/index.html); the reference and benchmark tables are generated from the code and results
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# every page of the site run as a notebook, its figures copied into docs/ (CI runs the pages: make test-slow)
docs-figures: install
	$(BIN)/python docs/hooks/notebooks.py --figures $$(grep -rl '](figures/' docs --include='*.md')

# the serving images (Dockerfile; needs a running Docker daemon): seqlab (run directories on CPU PyTorch) and
# seqlab:onnx (ONNX exports, no PyTorch); docker-check serves a tiny export in seqlab:onnx until it is healthy
IMAGE ?= seqlab
docker:
	docker build -t $(IMAGE) .
	docker build --target onnx -t $(IMAGE):onnx .

docker-check: install
	bash .ci/container-check $(IMAGE):onnx

lint: install
	$(BIN)/ruff check src tests benchmarks docs/hooks

# the family contract checked by mypy (pyproject.toml's [tool.mypy]): every family's parts against their protocols
# (seqlab.contract.parts; the checking module written from the registry into build/), and the shared modules that
# call them; its cache (.mypy_cache) keeps a second run to seconds
typecheck: install
	PYTHONPATH=src $(BIN)/python tests/typecheck_parts.py build/typecheck/seqlab_family_parts.py
	PYTHONPATH=src $(BIN)/mypy

clean:
	rm -rf $(VENV) runs site .pytest_cache .ruff_cache .mypy_cache build/typecheck
