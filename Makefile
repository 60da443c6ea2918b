# casstore set-up. Needs only Python >= 3.12 and make: uv is bootstrapped into .tools/,
# and uv never downloads a Python (UV_PYTHON_DOWNLOADS=never).
SHELL := /bin/sh
export UV_PYTHON_DOWNLOADS := never
PYTHON := $(shell scripts/find-python)
UV := .tools/bin/uv
VENV := .venv
PYTEST_ARGS ?=

.PHONY: demo test lint bench bench-report clean

demo: $(VENV)/.synced
	$(VENV)/bin/casstore demo

test: $(VENV)/.synced
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.synced
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: $(VENV)/.synced
	$(VENV)/bin/python -m pytest benchmarks --benchmark-enable --benchmark-only $(PYTEST_ARGS)

bench-report: $(VENV)/.synced
	$(VENV)/bin/python -m benchmarks.report $(PYTEST_ARGS)

$(UV):
	"$(PYTHON)" -m venv .tools
	.tools/bin/python -m pip install --quiet uv

$(VENV)/.synced: $(UV) pyproject.toml uv.lock
	$(UV) sync --frozen --python "$(PYTHON)"
	touch $@

clean:
	rm -rf .tools $(VENV)
