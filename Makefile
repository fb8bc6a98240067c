# The two commands a newcomer needs (README):  make demo   and   make test
VENV := .venv
PY   := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup demo test bench clean

setup:
	bash scripts/setup.sh

demo: setup
	bash examples/demo/run-demo.sh $(CURDIR)/demo-work

test: setup
	$(PY) -m pytest -ra --durations=20 $(PYTEST_ARGS)

bench: setup
	$(PY) bench/overhead.py
	$(PY) bench/attach.py

clean:
	rm -rf demo-work .pytest_cache
