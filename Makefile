PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench loc clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

test: $(STAMP)
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/pip install -q -e '.[test,bench]'
	$(BIN)/python -m benchmarks.run

loc:
	@for d in llgrad runtime tracer transform codegen; do printf '%-10s %6s\n' $$d "$$(cat $$(find $$d -name '*.py') | wc -l)"; done

clean:
	rm -rf $(VENV)
