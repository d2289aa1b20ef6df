# detect: Mask R-CNN R-101-FPN inference in C (CPU: oneDNN + OpenMP; CUDA: see cuda/).
#
#   make            build build/detect and build/libdetect.{a,so}
#   make check      the README's test command and CI's: make test, make sanitize, make fuzz, make cuda-emu (~25 min)
#   make test       unit tests (cmocka) + parity tests against torchvision (pytest)
#   make bench      CPU time per stage beside torchvision's: one full-size image, a mixed-size batch
#   make bench-peers  the same images beside current PyTorch, ONNX Runtime and OpenVINO (venv in build/, ~20 min)
#   make demo       the README's first command: install what is missing, run on an example
#   make sanitize   unit and end-to-end tests under AddressSanitizer + UBSan (build-san/)
#   make valgrind   one full image through memcheck: no errors, no leaks
#   make fuzz       every fuzz target for FUZZ_SECONDS each (default 60)
#   make cuda-report  registers, stack, spills and shared memory of every CUDA kernel (no GPU needed)
#   make cuda-emu   the CUDA backend run on the CPU through tests/emu's emulator, and its tests (no GPU needed)
#   CUDA=0          build without the CUDA backend even where nvcc exists

CC      ?= gcc
PYTHON  ?= /usr/bin/python3
BUILD   ?= build
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -Wall -Wextra -fopenmp -fPIC -Iengine -MMD -MP -D_GNU_SOURCE
LDLIBS  += -ldnnl -lcjson -lpng -ljpeg -lm
LDFLAGS += -fopenmp

NVCC    ?= $(shell command -v nvcc 2>/dev/null)
CUDA    ?= $(if $(NVCC),1,0)

ENGINE_SRC := $(wildcard engine/*.c)
ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
CMD_SRC    := $(wildcard cmd/*.c)
CMD_OBJ    := $(CMD_SRC:%.c=$(BUILD)/%.o)
TEST_SRC   := $(wildcard tests/unit/test_*.c)
TEST_BIN   := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)

ifeq ($(CUDA),1)
# The CUDA backend (cuda/): cuDNN, cuBLAS and kernels for sm_75..sm_90, plus
# compute_90 PTX for later GPUs. -fmad=false keeps our kernels' float
# arithmetic unfused, as the CPU's (roi_align.h: bitwise-equal RoIAlign);
# cuDNN and cuBLAS are unaffected. Objects are named *.cu.o so that
# cuda/roi_align.cu and engine/roi_align.c stay distinct members of libdetect.a.
CUDA_HOME  ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_SRC   := $(wildcard cuda/*.cu)
CUDA_CSRC  := $(wildcard cuda/*.c)
CUDA_ARCHS ?= 75 80 86 89 90
NVCCFLAGS  ?= -O2 -std=c++17 -Iengine -Icuda $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
              -gencode arch=compute_90,code=compute_90 -fmad=false -Xcompiler -fPIC,-Wall,-Wextra -MMD -MP
# The backend is its own shared library, loaded on first use by
# engine/backend_cuda_loader.c: only it links the CUDA libraries, so a CPU
# run does not map them (about 200 MB resident).
CUDA_OBJ   := $(CUDA_SRC:%.cu=$(BUILD)/%.cu.o) $(CUDA_CSRC:%.c=$(BUILD)/%.o)
CUDA_SO    := $(BUILD)/libdetect_cuda.so
# CUDA_INC_DIRS, CUDA_LIB_DIRS: more folders for the CUDA libraries' headers
# and libraries, after the toolkit's own, where the toolkit lacks cuDNN or
# cuBLAS (a GPU machine whose cuDNN came with PyTorch's pip wheels:
# tests/gpu/setup.sh finds them there).
CUDA_INC_DIRS ?=
CUDA_LIB_DIRS ?=
CUDA_LIBS  := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 $(foreach d,$(CUDA_LIB_DIRS),-L$(d) -Wl,-rpath,$(d)) \
              -lcudnn -lcublas -lcudart -lstdc++
CFLAGS     += -DMR_HAVE_CUDA=1 -Icuda -isystem $(CUDA_HOME)/include $(foreach d,$(CUDA_INC_DIRS),-isystem $(d))
NVCCFLAGS  += $(foreach d,$(CUDA_INC_DIRS),-isystem $(d))
LDLIBS     += -ldl
endif

.PHONY: all check test unit-test parity-test bench bench-peers demo deps clean sanitize valgrind fuzz cuda-report
FUZZ_SECONDS ?= 60
all: $(BUILD)/detect $(BUILD)/libdetect.so $(BUILD)/stage_runner $(CUDA_SO)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/cmd/%.o: cmd/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Icmd -c $< -o $@

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/libdetect.a: $(ENGINE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libdetect.so: $(ENGINE_OBJ)
	$(CC) -shared $(LDFLAGS) $^ $(LDLIBS) -o $@

# The engine's own objects it uses are copied in from libdetect.a, not exported.
$(BUILD)/libdetect_cuda.so: $(CUDA_OBJ) $(BUILD)/libdetect.a
	$(CC) -shared $(LDFLAGS) -Wl,--exclude-libs,ALL $(CUDA_OBJ) $(BUILD)/libdetect.a $(LDLIBS) $(CUDA_LIBS) -o $@

$(BUILD)/detect: $(CMD_OBJ) $(BUILD)/libdetect.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/stage_runner: $(BUILD)/tests/stage_runner.o $(BUILD)/libdetect.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libdetect.a $(CUDA_SO)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libdetect.a $(LDFLAGS) $(LDLIBS) -lcmocka -o $@

deps:
	@scripts/install_deps.sh

unit-test: $(TEST_BIN)
	@status=0; for t in $(TEST_BIN); do echo "== $$t"; $$t || status=1; done; exit $$status

parity-test: all
	$(PYTHON) -m pytest -q -rs tests/parity

# Installs what is missing first, so a fresh clone needs nothing else.
test: deps
	$(MAKE) all
	$(MAKE) -k unit-test parity-test

# Everything CI must run, each step even after a failure; a summary table at the end.
check: deps
	MAKE="$(MAKE)" scripts/check.sh $(FUZZ_SECONDS)

bench: deps
	$(MAKE) all
	$(PYTHON) bench/bench_cpu.py

PEERS_VENV ?= $(BUILD)/venv-peers
$(PEERS_VENV)/.installed: bench/requirements-peers.txt
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install -q -r $<
	touch $@

bench-peers: deps $(PEERS_VENV)/.installed
	$(MAKE) all
	$(PEERS_VENV)/bin/python bench/bench_peers.py $(BENCH_PEERS_ARGS)

demo: deps
	$(MAKE) all
	scripts/demo.sh

sanitize: deps
	scripts/sanitize.sh

valgrind: deps
	scripts/valgrind.sh

fuzz: deps
	scripts/fuzz.sh $(FUZZ_SECONDS)

# CUDA_REPORT_ARCH: the SM the report compiles for (90: the H200 of tests/gpu).
CUDA_REPORT_ARCH ?= 90
cuda-report:
	scripts/cuda_report.sh $(CUDA_REPORT_ARCH)

clean:
	rm -rf $(BUILD) build-san

-include $(ENGINE_OBJ:.o=.d) $(CUDA_OBJ:.o=.d) $(CMD_OBJ:.o=.d) $(BUILD)/tests/stage_runner.d

ifeq ($(CUDA),1)
include tests/emu/emu.mk
endif
