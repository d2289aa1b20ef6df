# tests/gpu/setup.sh: sourced by tests/gpu/check.sh and tests/gpu/bench.sh
# on the GPU machine, before they build. It makes a bare GPU machine able to
# build the CUDA backend, or says in one line what is missing:
#   gpu_setup_deps    oneDNN, cJSON, libpng, libjpeg-turbo and cmocka from
#                     tests/gpu/deps/*.deb where their headers are missing
#                     (tests/gpu/fetch_deps.sh fetches them; carry the folder);
#   gpu_setup_cuda    cuDNN, cuBLAS and the CUDA runtime: the toolkit's own
#                     (nvcc's folder) when a probe program compiles and links
#                     against them; else the copies PyTorch's pip wheels
#                     installed (site-packages/nvidia/*), which have no
#                     unversioned libcudnn.so etc.: links to them go into
#                     $WORK/cudalib. Sets GPU_MAKE_ARGS (CUDA_INC_DIRS,
#                     CUDA_LIB_DIRS for the Makefile) and LD_LIBRARY_PATH
#                     (cuDNN 9 loads its parts by name at run time);
#   gpu_build ARGS    make -j$(nproc) CUDA=1 CUDA_ARCHS=90 BUILD=build-gpu ARGS.
# Each returns non-zero, after one line naming what is missing, on failure.
# env: PY (python with torch), WORK (scratch folder); NVIDIA_SITE overrides
# where the wheels' nvidia/ folder is looked for (tests of this script).

command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
GPU_MAKE_ARGS=()

gpu_missing_headers() {
    local h
    for h in dnnl.h cjson/cJSON.h png.h jpeglib.h cmocka.h; do
        printf '#include <stdarg.h>\n#include <stddef.h>\n#include <stdio.h>\n#include <setjmp.h>\n#include <stdint.h>\n#include <%s>\n' "$h" |
            gcc -E -x c - >/dev/null 2>&1 || echo "$h"
    done
}

gpu_setup_deps() {
    local missing f
    missing=$(gpu_missing_headers)
    if [ -n "$missing" ] && compgen -G "tests/gpu/deps/*.deb" >/dev/null; then
        echo "missing: $missing; unpacking tests/gpu/deps/*.deb"
        for f in tests/gpu/deps/*.deb; do dpkg -x "$f" / || { echo "unpacking $f failed"; return 1; }; done
        ldconfig
        missing=$(gpu_missing_headers)
    fi
    if [ -n "$missing" ]; then
        echo "missing build headers: $missing: run tests/gpu/fetch_deps.sh where there is a network and carry tests/gpu/deps"
        return 2
    fi
    echo "build dependencies present"
}

# Compiles and links a program that calls cuDNN, cuBLAS and the runtime,
# with the include and library folders given as -isystem/-L arguments.
gpu_cuda_probe() {
    printf '#include <cudnn.h>\n#include <cublas_v2.h>\n#include <cuda_runtime.h>\nint main(void) { cublasHandle_t h; return (int)(cudnnGetVersion() == 0) + (int)(cublasCreate(&h) == 99) + (int)(cudaFree(0) == 99); }\n' |
        gcc -x c - -o "$WORK/cuda_probe" "$@" -lcudnn -lcublas -lcudart >"$WORK/cuda_probe.log" 2>&1
}

gpu_setup_cuda() {
    local home site name hit dir inc=() lib=() args=() f
    mkdir -p "$WORK"
    # The toolkit the Makefile will use: CUDA_HOME, else nvcc's folder.
    home=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
    if gpu_cuda_probe -isystem "$home/include" -L"$home/lib64"; then
        echo "cuDNN, cuBLAS, CUDA runtime: the toolkit's ($home)"
        return 0
    fi
    site=${NVIDIA_SITE:-$(${PY:-python3} -c 'import nvidia, os; print(os.path.realpath(list(nvidia.__path__)[0]))' 2>/dev/null)}
    if [ -z "$site" ] || [ ! -d "$site" ]; then
        echo "cuDNN/cuBLAS not usable from $home ($(grep -m1 -i 'error' "$WORK/cuda_probe.log")) and no nvidia/ pip packages found"
        return 2
    fi
    # Headers: each one the toolkit lacks, from the first wheel that has it.
    for name in cudnn.h cublas_v2.h cuda_runtime.h; do
        [ -e "$home/include/$name" ] && continue
        hit=$(find "$site" -name "$name" -path '*include*' 2>/dev/null | head -1)
        [ -n "$hit" ] && inc+=("$(dirname "$hit")")
    done
    # Libraries: an unversioned link in $WORK/cudalib to each one the
    # toolkit lacks; the wheel's folder goes on the run-time path.
    rm -rf "$WORK/cudalib" && mkdir -p "$WORK/cudalib"
    for name in cudnn cublas cublasLt cudart; do
        [ -e "$home/lib64/lib$name.so" ] && continue
        hit=$(find "$site" -name "lib$name.so*" 2>/dev/null | sort | head -1)
        [ -n "$hit" ] || continue
        ln -sf "$hit" "$WORK/cudalib/lib$name.so"
        dir=$(dirname "$hit")
        case " ${lib[*]} " in *" $dir "*) ;; *) lib+=("$dir") ;; esac
    done
    lib=("$WORK/cudalib" "${lib[@]}")
    args=(-isystem "$home/include")
    for f in "${inc[@]}"; do args+=(-isystem "$f"); done
    args+=(-L"$home/lib64")
    for f in "${lib[@]}"; do args+=(-L"$f"); done
    if ! gpu_cuda_probe "${args[@]}"; then
        echo "cuDNN/cuBLAS not usable from $home nor from $site: $(grep -m1 -i 'error' "$WORK/cuda_probe.log")"
        return 2
    fi
    GPU_MAKE_ARGS=("CUDA_INC_DIRS=${inc[*]}" "CUDA_LIB_DIRS=${lib[*]}")
    export LD_LIBRARY_PATH="$(IFS=:; echo "${lib[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "cuDNN, cuBLAS, CUDA runtime: from $site (headers: ${inc[*]:-none needed}; libraries: ${lib[*]})"
}

gpu_build() {
    make -j"$(nproc)" CUDA=1 CUDA_ARCHS=90 BUILD=build-gpu "${GPU_MAKE_ARGS[@]}" "$@"
}
