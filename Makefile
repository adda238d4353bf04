# Two commands do all set-up on a fresh machine (Python 3.11 as python3):
#   make demo   - create .venv, install megtrace (+ the tune extra), run the end-to-end demo
#   make test   - create .venv, install megtrace + tune and test deps, prepare MegEngine Lite,
#                 run pytest
# Both install the `tune` extra (xgboost, ...) so that the README's snippet, which tunes, runs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,tune]"
	touch $@

demo: $(VENV)/.installed
	$(PY) -m megtrace.demo --out $(VENV)/net.mge

test: $(VENV)/.installed
	$(PY) tests/lite_runtime.py --prepare
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) .pytest_cache
