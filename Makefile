# casstore set-up. Needs only Python >= 3.12 and make: uv is bootstrapped into .tools/,
# and uv never downloads a Python (UV_PYTHON_DOWNLOADS=never).
# Set-up prints one line per step; a step's own output (pip's and uv's progress, warnings,
# the packages installed) is shown only when the step fails, in full (scripts/quietly).
# Every module a command loads runs from bytecode, as from a pip install, even under
# PYTHONDONTWRITEBYTECODE=1: scripts/compile-bytecode compiles the project's packages and
# imports them and their lazily loaded dependencies with bytecode writing on (uv does not
# compile on install; compiling all of site-packages would cost ~25 s), again whenever a
# source changes. Python checks a .pyc against its source's mtime and size, so a stale one
# is never used, only recompiled.
SHELL := /bin/sh
export UV_PYTHON_DOWNLOADS := never
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export PIP_ROOT_USER_ACTION := ignore
PYTHON := $(shell scripts/find-python)
UV := .tools/bin/uv
VENV := .venv
QUIETLY := scripts/quietly
PACKAGES := ls -d $(VENV)/lib/python*/site-packages/*.dist-info | wc -l
OWN := casstore cli scoring
SOURCES := $(shell find $(OWN) -name '*.py')
PYTEST_ARGS ?=

.PHONY: demo test lint bench bench-report clean

demo: $(VENV)/.runtime $(VENV)/.compiled
	@$(VENV)/bin/casstore demo

test: $(VENV)/.synced $(VENV)/.compiled
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

lint: $(VENV)/.synced
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: $(VENV)/.synced $(VENV)/.compiled
	$(VENV)/bin/python -m pytest benchmarks --benchmark-enable --benchmark-only $(PYTEST_ARGS)

bench-report: $(VENV)/.synced $(VENV)/.compiled
	$(VENV)/bin/python -m benchmarks.report $(PYTEST_ARGS)

$(UV):
	@echo "casstore: bootstrapping uv into .tools/"
	@$(QUIETLY) scripts/bootstrap-uv "$(PYTHON)"

# The demo needs the runtime packages only; test, lint and bench the dev group too.
# --inexact: a runtime sync leaves the dev packages of an earlier full sync in place.
$(VENV)/.runtime: $(UV) pyproject.toml uv.lock Makefile
	@printf '%s' "casstore: building .venv/ from uv.lock (runtime packages) ... "
	@$(QUIETLY) $(UV) sync --frozen --no-dev --inexact --python "$(PYTHON)"
	@echo "$$($(PACKAGES) | tr -d ' ') packages"
	@touch $@

$(VENV)/.synced: $(UV) pyproject.toml uv.lock Makefile
	@printf '%s' "casstore: building .venv/ from uv.lock (with the dev tools) ... "
	@$(QUIETLY) $(UV) sync --frozen --python "$(PYTHON)"
	@echo "$$($(PACKAGES) | tr -d ' ') packages"
	@touch $@ $(VENV)/.runtime

# A rerun compiles the changed modules only (a current .pyc is kept).
$(VENV)/.compiled: $(VENV)/.runtime $(SOURCES) scripts/compile-bytecode
	@printf '%s' "casstore: compiling the modules casstore loads to bytecode ... "
	@$(QUIETLY) $(VENV)/bin/python scripts/compile-bytecode
	@echo "done"
	@touch $@

clean:
	rm -rf .tools $(VENV)
