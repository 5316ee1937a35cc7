# The two entry points (see README): `make serve` runs the main job (the explorer web app on a
# built-in example), `make test` the whole suite. `make demo` walks a matmul in the terminal.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: serve demo test venv toolchain browser lint soak bench bench-tune bench-cpu bench-gpu clean

# gcc compiles the CPU kernels; install it when a fresh machine lacks it (Debian, as root).
toolchain:
	@command -v gcc >/dev/null 2>&1 || { \
	  echo "gcc not found: installing it with apt-get"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libgomp1; }

# The browser tests drive Debian's chromium through Playwright (never `playwright install`: it
# downloads browsers). Install it when a fresh machine lacks it (Debian, as root).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "chromium not found: installing Debian's chromium with apt-get (browser tests)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# the extensions under extensions/ are installed too: tests/test_extensions.py and the
# notebooks use them through schedlab's entry points (docs/extending.md)
EXTENSIONS := extensions/schedlab_pool extensions/schedlab_presets extensions/schedlab_npz

$(STAMP): $(BIN)/python pyproject.toml $(addsuffix /pyproject.toml,$(EXTENSIONS))
	$(BIN)/pip install -q -e '.[dev,cuda,opencl]' $(addprefix -e ,$(EXTENSIONS))
	touch $(STAMP)

venv: $(STAMP)

serve: toolchain venv
	$(BIN)/schedlab serve --port $(or $(PORT),5006) --address $(or $(ADDRESS),127.0.0.1)

demo: toolchain venv
	$(BIN)/schedlab demo

test: toolchain browser venv
	$(BIN)/python -m pytest -n 2 -q --doctest-modules tests schedlab/schedule

soak: toolchain venv
	SCHEDLAB_SOAK=1 $(BIN)/python -m pytest -q tests/schedule/test_property.py

lint: venv
	$(BIN)/ruff check schedlab tests
	$(BIN)/ruff format --check schedlab tests

bench: toolchain venv
	$(BIN)/schedlab bench gemm --size 1024

# The tuner's goals (gemm, dense+bias+ReLU, softmax, two CNNs), ratios to numpy and onnxruntime
# in one run; OpenBLAS's slow-kernel overrides are unset for this command only.
bench-tune: toolchain venv
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/schedlab bench-tune

# The untuned CPU code's goals (shipped and default gemm schedules, conv layers, two CNNs),
# ratios to numpy and onnxruntime in one run on this machine, whatever its ISA.
bench-cpu: toolchain venv
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/schedlab bench-cpu

# The Dlight GPU kernels' goals (fp32 and fp16 gemm, fp16 GEMV) next to cuBLAS, on the NVIDIA
# GPU here (needs cupy: pip install cupy-cuda12x); without one, every kernel is compiled to PTX
# and no figure is measured.
bench-gpu: venv
	$(BIN)/schedlab bench-gpu $(if $(TARGET),--target $(TARGET))

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .schedlab_cache
