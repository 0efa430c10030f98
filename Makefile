# commsim developer commands. Needs only python3 (>= 3.11) and make: the first target run
# creates .venv and installs commsim into it; it re-installs only when pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: help demo test lint bench docs clean

help:
	@echo "make demo   all-reduce on 4 DGX H100 nodes (1 KiB to 1 GiB) and on a TPU v5e pod"
	@echo "make test   run the whole test suite"
	@echo "make lint   ruff and mypy"
	@echo "make bench  rerun the benchmarks the docs quote and write their output into the docs"
	@echo "make docs   rerun every command of README.md and docs/ and rewrite the outputs that changed"
	@echo "make clean  remove .venv and caches"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,torch,sweep,notebooks]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/commsim run all_reduce --topology dgx-h100x4 --size 1KiB:1GiB:4
	@echo "# the same 1 GiB all_reduce, each algorithm with its best NCCL protocol:"
	@for algo in ring double_binary_tree nvls hierarchical hierarchical_rabenseifner \
			rabenseifner; do \
		$(BIN)/commsim run all_reduce --topology dgx-h100x4 --size 1GiB --algorithm $$algo \
			| grep -v '^#'; \
	done
	@echo "# a TPU v5e pod (16x16 ICI torus), 1 GiB all_reduce: torus-native vs flat ring:"
	@for algo in torus ring_bidirectional ring; do \
		$(BIN)/commsim run all_reduce --topology tpu-v5e-256 --size 1GiB --engine analytic \
			--algorithm $$algo | grep -v '^#'; \
	done

# one pytest worker per core (pytest-xdist); worksteal evens out the long tests at the end
test: $(STAMP)
	$(BIN)/python -m pytest -n auto --dist worksteal --durations=25

lint: $(STAMP)
	$(BIN)/ruff check commsim tests benchmarks
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

docs: $(STAMP)
	$(BIN)/python tests/docs_blocks.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
