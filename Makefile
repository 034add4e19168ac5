# Two commands: `make demo` and `make test`. Each sets itself up on a fresh machine
# (.venv, pinned dependencies, Java check) and starts at once when already set up.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup demo test test-all fuzz bench lint typecheck check lock clean

setup: $(STAMP)

$(STAMP): pyproject.toml requirements.lock scripts/bootstrap.sh
	@scripts/bootstrap.sh

demo: setup
	@scripts/check_java.sh
	$(PY) -m dyntables demo $(ARGS)

test: setup
	@scripts/check_java.sh
	$(PY) -m pytest $(ARGS)

test-all: setup
	$(PY) -m pytest -m "slow or not slow" $(ARGS)

fuzz: setup
	$(PY) -m tests.differential.fuzz $(ARGS)

bench: setup $(VENV)/.bench-installed
	@scripts/check_java.sh
	$(PY) -m bench $(ARGS)

# plotting is only needed by the benchmarks: kept out of the test set-up
$(VENV)/.bench-installed: requirements-bench.lock $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-bench.lock
	@touch $@

lint: setup
	$(VENV)/bin/ruff check dyntables tests bench
	$(VENV)/bin/ruff format --check dyntables tests bench

typecheck: setup
	$(VENV)/bin/mypy dyntables

check: lint typecheck test

lock: setup
	$(PY) -m pip freeze --exclude-editable | grep -v '^dyntables' > requirements.lock

clean:
	rm -rf warehouse spark-warehouse metastore_db derby.log .pytest_cache .mypy_cache .ruff_cache
