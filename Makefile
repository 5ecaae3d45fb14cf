PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test fuzz bench loc clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

test: $(STAMP)
	$(BIN)/python -m pytest

# The compiler's differential fuzzer (tests/fuzz/run.py): counts, then one minimised
# reproduction per failure bucket in fuzz-out/. FUZZ_FEATURES=default leaves out the
# constructs of known, not yet fixed bugs (tests/fuzz/gen.py KNOWN_BUGS).
FUZZ_N ?= 10000
FUZZ_SEED ?= 1
FUZZ_FEATURES ?= all
fuzz: $(STAMP)
	$(BIN)/python -m tests.fuzz.run --n $(FUZZ_N) --seed $(FUZZ_SEED) --features $(FUZZ_FEATURES) --jobs 2 --out fuzz-out

bench: $(STAMP)
	$(BIN)/pip install -q -e '.[test,bench]'
	$(BIN)/python -m benchmarks.run

loc:
	@for d in llgrad runtime tracer transform codegen; do printf '%-10s %6s\n' $$d "$$(cat $$(find $$d -name '*.py') | wc -l)"; done

clean:
	rm -rf $(VENV)
