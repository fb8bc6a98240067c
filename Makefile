# The two commands a newcomer needs (README):  make demo   and   make test
VENV := .venv
PY   := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup demo test bench clean

setup:
	bash scripts/setup.sh

demo: setup
	bash examples/demo/run-demo.sh $(CURDIR)/demo-work

# Two passes: the tests that need no eBPF on every CPU (pytest-xdist; at most 4 workers, each may hold
# an angr analysis), then the eBPF ones alone on a quiet machine (they time programs; their timing
# assertions are not made beside a second worker).  Exit 5 is "no test selected" (PYTEST_ARGS may
# pick tests of one kind only).
test: setup
	$(PY) -m pytest -ra -m "not ebpf" -n auto --maxprocesses 4 --durations=10 $(PYTEST_ARGS) || [ $$? -eq 5 ]
	$(PY) -m pytest -ra -m ebpf --durations=20 $(PYTEST_ARGS) || [ $$? -eq 5 ]

bench: setup
	$(PY) bench/overhead.py
	$(PY) bench/attach.py

clean:
	rm -rf demo-work .pytest_cache
