# The CUDA emulator (tests/emu/README.md), included by the Makefile when
# CUDA=1: build-emu/libdetect_cuda.so is the CUDA backend built from the same
# sources, its kernels compiled by g++ (launches rewritten by
# rewrite_launches.py) and linked against the fakes in tests/emu instead of
# the CUDA runtime, cuDNN and cuBLAS; build-emu/libcuda.so.1 is an empty
# stand-in for the driver, so the loader believes a GPU is there.
#
#   make cuda-emu        build both, then run the CUDA tests on them (tests/emu/run.sh)

EMU        := build-emu
EMU_CU_CC  := $(CUDA_SRC:cuda/%.cu=$(EMU)/gen/%.cc)
EMU_TEST_OBJ := $(EMU)/gen/test_emu.o
EMU_CU_OBJ := $(EMU_CU_CC:%.cc=%.o)
EMU_RT_SRC := $(wildcard tests/emu/*.cc)
EMU_RT_OBJ := $(EMU_RT_SRC:tests/emu/%.cc=$(EMU)/%.o)
EMU_CXX    ?= g++
EMU_CXXFLAGS := -std=c++17 -O2 -g -fPIC -fopenmp -Wall -Wno-unused-function -Iengine -Icuda -Itests/emu \
                -Itests/emu/include -isystem $(CUDA_HOME)/include $(foreach d,$(CUDA_INC_DIRS),-isystem $(d))
EMU_HEADERS := $(wildcard tests/emu/*.h tests/emu/include/cub/device/*.cuh cuda/*.cuh cuda/*.h engine/*.h engine/*/*.h)

.PHONY: cuda-emu cuda-emu-lib
cuda-emu-lib: $(EMU)/libdetect_cuda.so $(EMU)/libcuda.so.1 $(EMU)/test_emu

cuda-emu:
	$(MAKE) -j$(BUILD_JOBS) all cuda-emu-lib $(TEST_BIN)
	tests/emu/run.sh

$(EMU)/gen/%.cc: cuda/%.cu tests/emu/rewrite_launches.py
	@mkdir -p $(dir $@)
	$(PYTHON) tests/emu/rewrite_launches.py $< $@

# the rewritten sources stay, to read beside a compiler message
.PRECIOUS: $(EMU)/gen/%.cc

$(EMU)/gen/test_emu.cc: tests/emu/test_emu.cu tests/emu/rewrite_launches.py
	@mkdir -p $(dir $@)
	$(PYTHON) tests/emu/rewrite_launches.py $< $@

$(EMU)/gen/%.o: $(EMU)/gen/%.cc $(EMU_HEADERS)
	$(EMU_CXX) $(EMU_CXXFLAGS) -include tests/emu/emu_device.h -c $< -o $@

$(EMU)/%.o: tests/emu/%.cc $(EMU_HEADERS)
	@mkdir -p $(dir $@)
	$(EMU_CXX) $(EMU_CXXFLAGS) -c $< -o $@

# The backend's .c files are the very objects of build/libdetect_cuda.so.
$(EMU)/libdetect_cuda.so: $(EMU_CU_OBJ) $(EMU_RT_OBJ) $(CUDA_CSRC:%.c=$(BUILD)/%.o) $(BUILD)/libdetect.a
	$(EMU_CXX) -shared $(LDFLAGS) -Wl,--exclude-libs,ALL $(EMU_CU_OBJ) $(EMU_RT_OBJ) $(CUDA_CSRC:%.c=$(BUILD)/%.o) \
	    $(BUILD)/libdetect.a $(LDLIBS) -o $@

$(EMU)/libcuda.so.1: tests/emu/libcuda_stub.c
	@mkdir -p $(dir $@)
	$(CC) -shared -fPIC -Wl,-soname,libcuda.so.1 $< -o $@

# The emulator's own checks (tests/emu/test_emu.cu).
$(EMU)/test_emu: $(EMU_TEST_OBJ) $(EMU_RT_OBJ)
	$(EMU_CXX) $(LDFLAGS) $^ -ldnnl -lcmocka -o $@
