# detect: Mask R-CNN R-101-FPN inference in C (CPU: oneDNN + OpenMP; CUDA: see cuda/).
#
#   make            build build/detect, build/libdetect.so (the public library) and build/libdetect.a
#   make install    PREFIX=/usr/local (DESTDIR too): bin/detect, lib/libdetect.so.*, include/detect.h,
#                   lib/pkgconfig/detect.pc, share/detect/configs; make uninstall removes them
#   make python-test  the Python package: pip install . into a temporary venv, then its tests
#   make cluster-test detect --shard, detect merge, the Slurm and Kubernetes recipes, and the Ray
#                   pipeline on a local Ray cluster (Ray from PyPI into build/venv-ray; ~5 min)
#   make check      the README's test command and CI's: make test, the layer check, make sanitize, make fuzz,
#                   make cuda-emu (~20 min on 2 cores)
#   make check-layers  includes against docs/architecture.md's folder rules, and no file-level call cycles
#   make test       unit tests (cmocka), parity tests against torchvision (pytest), python-test,
#                   cluster-test
#   make bench      CPU time per stage beside torchvision's: one full-size image, a mixed-size batch
#   make bench-peers  the same images beside current PyTorch, ONNX Runtime and OpenVINO, fp32 and int8, and the
#                   demo model's AP in each (venv in build/, ~40 min)
#   make demo       the README's first command: install what is missing, run on an example
#   make sanitize   unit and end-to-end tests under AddressSanitizer + UBSan (build-san/)
#   make valgrind   one full image through memcheck: no errors, no leaks
#   make fuzz       every fuzz target, reproducibly: a fixed mutation seed and run count (~5 min)
#   make fuzz-explore  every fuzz target from fresh seeds for FUZZ_SECONDS each (default 60): new finds
#   make cuda-report  registers, stack, spills and shared memory of every CUDA kernel (no GPU needed)
#   make cuda-emu   the CUDA backend run on the CPU through tests/emu's emulator, and its tests (no GPU needed)
#   make fresh-debian  the README's two commands in a clean Debian 12 root (scripts/fresh_debian.sh;
#                   root and mmdebstrap; ~45 min): run it when install steps or test paths change
#   make image      the container image detect:VERSION as OCI and docker archives in build/image/,
#                   from clean Debian roots (scripts/build_image.sh; root, mmdebstrap, umoci, skopeo)
#   make image-test the image's own root file system: the demo, shards and merge, Python, against
#                   build/detect (tests/image/run.sh)
#   CUDA=0          build without the CUDA backend even where nvcc exists

CC      ?= gcc
PYTHON  ?= /usr/bin/python3
# pycocotools, the tests' one package from PyPI, lives in build/venv-test (scripts/install_deps.sh,
# which make deps runs): its site-packages go on every recipe's PYTHONPATH, so Debian's python3, the
# venvs the tests make from it and their subprocesses all import it. scripts/test_env.sh names the
# folder, a fixed path whether it exists yet or not (no $(wildcard): make caches folders, so one
# taken before deps made the venv stayed empty); the scripts source the same file.
TEST_SITE := $(shell scripts/test_env.sh --site)
PYTHONPATH_OUTER := $(filter-out $(TEST_SITE),$(subst :, ,$(PYTHONPATH)))
export PYTHONPATH := $(subst $() ,:,$(strip $(TEST_SITE) $(PYTHONPATH_OUTER)))
BUILD   ?= build
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -Wall -Wextra -fopenmp -fPIC -Iinclude -Iengine -MMD -MP -D_GNU_SOURCE
LDLIBS  += -ldnnl -lcjson -lpng -ljpeg -lwebp -lwebpdemux -ltiff -lgif -lm
LDFLAGS += -fopenmp

NVCC    ?= $(shell command -v nvcc 2>/dev/null)
CUDA    ?= $(if $(NVCC),1,0)

ENGINE_SRC := $(wildcard engine/*.c engine/*/*.c)
ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
CMD_SRC    := $(wildcard cmd/*.c)
CMD_OBJ    := $(CMD_SRC:%.c=$(BUILD)/%.o)
TEST_SRC   := $(wildcard tests/unit/test_*.c)
TEST_BIN   := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)

# The public library: include/detect.h's symbols only (engine/api/libdetect.map),
# soname libdetect.so.ABI, which changes only when the ABI does (detect.h says when).
DETECT_ABI     := $(shell sed -n 's/^\#define DETECT_ABI_VERSION \([0-9]*\).*/\1/p' include/detect.h)
DETECT_VERSION := $(shell sed -n 's/^\#define DETECT_VERSION_STRING "\(.*\)"/\1/p' include/detect.h)
LIB_SONAME     := libdetect.so.$(DETECT_ABI)
LIB_REAL       := libdetect.so.$(DETECT_VERSION)

ifeq ($(CUDA),1)
# The CUDA backend (cuda/): cuDNN, cuBLAS and kernels for sm_75..sm_90, plus
# compute_90 PTX for later GPUs. -fmad=false keeps our kernels' float
# arithmetic unfused, as the CPU's (roi_align.h: bitwise-equal RoIAlign);
# cuDNN and cuBLAS are unaffected. Objects are named *.cu.o so that
# cuda/roi_align.cu and engine/ops/roi_align.c stay distinct members of libdetect.a.
CUDA_HOME  ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_SRC   := $(wildcard cuda/*.cu)
CUDA_CSRC  := $(wildcard cuda/*.c)
# Ascending: the first is the oldest device the backend accepts (MR_CUDA_MIN_SM below).
CUDA_ARCHS ?= 75 80 86 89 90
NVCCFLAGS  ?= -O2 -std=c++17 -Iengine -Icuda $(foreach a,$(CUDA_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
              -gencode arch=compute_90,code=compute_90 -fmad=false -Xcompiler -fPIC,-Wall,-Wextra -MMD -MP
# The backend is its own shared library, loaded on first use by
# engine/backend/backend_cuda_loader.c: only it links the CUDA libraries, so a CPU
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
# MR_CUDA_MIN_SM: the backend refuses a device older than the first (lowest) of CUDA_ARCHS.
CFLAGS     += -DMR_HAVE_CUDA=1 -DMR_CUDA_MIN_SM=$(firstword $(CUDA_ARCHS)) -Icuda -isystem $(CUDA_HOME)/include $(foreach d,$(CUDA_INC_DIRS),-isystem $(d))
NVCCFLAGS  += $(foreach d,$(CUDA_INC_DIRS),-isystem $(d))
LDLIBS     += -ldl
endif

.PHONY: fresh-debian image image-test check-layers deps-run all lib install uninstall python-test doc-test cluster-test check test unit-test parity-test bench bench-peers demo deps clean sanitize valgrind fuzz fuzz-explore cuda-report
FUZZ_SECONDS ?= 60
all: $(BUILD)/detect $(BUILD)/libdetect.so $(BUILD)/libdetect_internal.so $(BUILD)/stage_runner $(CUDA_SO)

# What the Python package needs (setup.py runs it).
lib: $(BUILD)/libdetect.so $(CUDA_SO)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The command is a client of include/detect.h like any other: engine/ and
# cuda/ are not on its include path.
$(BUILD)/cmd/%.o: cmd/%.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -Iengine -Icuda,$(CFLAGS)) -Icmd -c $< -o $@

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/libdetect.a: $(ENGINE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/$(LIB_REAL): $(ENGINE_OBJ) engine/api/libdetect.map
	$(CC) -shared $(LDFLAGS) -Wl,-soname,$(LIB_SONAME) -Wl,--version-script=engine/api/libdetect.map \
	    $(ENGINE_OBJ) $(LDLIBS) -o $@

$(BUILD)/libdetect.so: $(BUILD)/$(LIB_REAL)
	ln -sf $(LIB_REAL) $(BUILD)/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $@

# Every engine symbol, for the tests that call internals through ctypes
# (tests/parity: image decoding, resizes, ops). Never installed.
$(BUILD)/libdetect_internal.so: $(ENGINE_OBJ)
	$(CC) -shared $(LDFLAGS) $^ $(LDLIBS) -o $@

# The engine's own objects it uses are copied in from libdetect.a, not exported.
$(BUILD)/libdetect_cuda.so: $(CUDA_OBJ) $(BUILD)/libdetect.a
	$(CC) -shared $(LDFLAGS) -Wl,--exclude-libs,ALL $(CUDA_OBJ) $(BUILD)/libdetect.a $(LDLIBS) $(CUDA_LIBS) -o $@

# Found beside it in build/, and in ../lib once installed.
$(BUILD)/detect: $(CMD_OBJ) $(BUILD)/libdetect.so
	$(CC) $(LDFLAGS) $(CMD_OBJ) -L$(BUILD) -ldetect -lcjson -lm -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib' -o $@

$(BUILD)/stage_runner: $(BUILD)/tests/stage_runner.o $(BUILD)/libdetect.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libdetect.a $(CUDA_SO)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(BUILD)/libdetect.a $(LDFLAGS) $(LDLIBS) -lcmocka -o $@

# The reduced-precision conversions' float compares become vector selects only where they may
# not trap (bench/NOTES.md section 36: the int8 quantizing loop ran scalar, 12% of a run).
$(BUILD)/engine/cpu/backend_cpu_gemm.o: CFLAGS += -fno-trapping-math

# test_signals names the function a signal interrupted with dladdr, which sees only dynamic symbols.
$(BUILD)/tests/test_signals: LDFLAGS += -rdynamic

# What building and running need (make demo), and that plus the test tools (make test, check, bench).
deps-run:
	@scripts/install_deps.sh run

deps:
	@scripts/install_deps.sh test

# test_cpu_int8 runs again on oneDNN's AVX2 kernels: the int8 rules without VNNI.
unit-test: $(TEST_BIN)
	@status=0; for t in $(TEST_BIN); do echo "== $$t"; $$t || status=1; done; \
	echo "== $(BUILD)/tests/test_cpu_int8 with ONEDNN_MAX_CPU_ISA=AVX2"; \
	ONEDNN_MAX_CPU_ISA=AVX2 $(BUILD)/tests/test_cpu_int8 || status=1; exit $$status

parity-test: all
	$(PYTHON) -m pytest -q -rs tests/parity

# Installs what is missing first, so a fresh clone needs nothing else. The builds run on every
# core (BUILD_JOBS); the tests after them one target at a time.
BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
test: deps
	$(MAKE) -j$(BUILD_JOBS) all $(TEST_BIN)
	$(MAKE) -k unit-test parity-test python-test cluster-test doc-test

# Everything CI must run, each step even after a failure; a summary table at the end.
check: deps
	MAKE="$(MAKE)" scripts/check.sh

bench: deps
	$(MAKE) -j$(BUILD_JOBS) all
	$(PYTHON) bench/bench_cpu.py

PEERS_VENV ?= $(BUILD)/venv-peers
$(PEERS_VENV)/.installed: bench/requirements-peers.txt
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install -q -r $<
	touch $@

bench-peers: deps $(PEERS_VENV)/.installed
	$(MAKE) -j$(BUILD_JOBS) all
	$(PEERS_VENV)/bin/python bench/bench_peers.py $(BENCH_PEERS_ARGS)
	$(PEERS_VENV)/bin/python bench/peers_demo_ap.py

demo: deps-run
	$(MAKE) -j$(BUILD_JOBS) all
	scripts/demo.sh

check-layers: all
	$(PYTHON) scripts/check_layers.py --calls $(BUILD)

sanitize: deps
	scripts/sanitize.sh

valgrind: deps
	scripts/valgrind.sh

fuzz: deps
	scripts/fuzz.sh

fuzz-explore: deps
	scripts/fuzz.sh explore $(FUZZ_SECONDS)

# CUDA_REPORT_ARCH: the SM the report compiles for (90: the H200 of tests/gpu).
CUDA_REPORT_ARCH ?= 90
cuda-report:
	scripts/cuda_report.sh $(CUDA_REPORT_ARCH)

PREFIX  ?= /usr/local
LIBDIR  ?= $(PREFIX)/lib
INSTALL_LIB := $(DESTDIR)$(LIBDIR)
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(INSTALL_LIB)/pkgconfig $(DESTDIR)$(PREFIX)/include \
	    $(DESTDIR)$(PREFIX)/share/detect/configs
	install -m 755 $(BUILD)/detect $(DESTDIR)$(PREFIX)/bin/detect
	install -m 755 $(BUILD)/$(LIB_REAL) $(INSTALL_LIB)/$(LIB_REAL)
	ln -sf $(LIB_REAL) $(INSTALL_LIB)/$(LIB_SONAME)
	ln -sf $(LIB_SONAME) $(INSTALL_LIB)/libdetect.so
	$(if $(CUDA_SO),install -m 755 $(CUDA_SO) $(INSTALL_LIB)/libdetect_cuda.so)
	install -m 644 include/detect.h $(DESTDIR)$(PREFIX)/include/detect.h
	install -m 644 configs/*.json $(DESTDIR)$(PREFIX)/share/detect/configs/
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@LIBDIR@|$(LIBDIR)|; s|@VERSION@|$(DETECT_VERSION)|' \
	    engine/api/detect.pc.in > $(INSTALL_LIB)/pkgconfig/detect.pc

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/detect $(INSTALL_LIB)/$(LIB_REAL) $(INSTALL_LIB)/$(LIB_SONAME) \
	    $(INSTALL_LIB)/libdetect.so $(INSTALL_LIB)/libdetect_cuda.so $(DESTDIR)$(PREFIX)/include/detect.h \
	    $(INSTALL_LIB)/pkgconfig/detect.pc
	rm -rf $(DESTDIR)$(PREFIX)/share/detect

# Every example in README.md and docs/*.md runs (tests/docs/test_docs.py).
doc-test: all
	$(PYTHON) -m pytest -q -rs -p no:cacheprovider tests/docs

# The Python package and the library's tests against the installed tree
# (examples/embed.c, the Python API), each compared with detect --json.
python-test: all
	PYTHON=$(PYTHON) MAKE="$(MAKE)" tests/library/run.sh

# Sharded runs and their merge, the cluster recipes (examples/), and the Ray
# pipeline (python/detect/ray_pipeline.py) against detect --json.
cluster-test: all
	PYTHON=$(PYTHON) tests/cluster/run.sh

# Checks of the install steps and of the image, each from a clean Debian root (docs/testing.md).
fresh-debian:
	scripts/fresh_debian.sh

image:
	scripts/build_image.sh

image-test: all
	tests/image/run.sh

clean:
	rm -rf $(BUILD) build-san

-include $(ENGINE_OBJ:.o=.d) $(CUDA_OBJ:.o=.d) $(CMD_OBJ:.o=.d) $(BUILD)/tests/stage_runner.d

ifeq ($(CUDA),1)
include tests/emu/emu.mk
endif
