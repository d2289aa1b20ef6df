#!/usr/bin/env bash
# tests/gpu/check.sh: the CUDA backend's verification on a machine with an
# NVIDIA GPU, nvcc, cuDNN and PyTorch with CUDA (made for an H200; nothing
# needs the network). One run, under 8 minutes:
#   1. builds everything with the CUDA backend (sm_90 only, to save time; the
#      full sm_75..sm_90 + PTX build is `make` on any machine with nvcc);
#   2. build-gpu/tests/test_backend_ops: every backend op on the CPU, on CUDA
#      (folded) and on CUDA --no-fold, from one table of cases against the same
#      references (normalised error per op, fixed printed seed, boxes outside
#      the image, empty inputs); fails if the CUDA cases were skipped; then
#      once more with MR_CUDA_FUSED_Z=1 (residual as cuDNN's z input, in place)
#      to tell whether that fusion can become the default, with
#      MR_CUDA_SYNC=1 (every launch checked at once), and (with the fp16 ops)
#      with MR_CUDA_CONV_FIND=1 (algorithms measured by cuDNN's Find: whether
#      every algorithm it may pick is within tolerance; informational);
#   2b. build-gpu/tests/test_cuda_fp16: --precision fp16 op by op on
#      fp16-rounded inputs against double-precision references (fails if
#      skipped); and
#      build-gpu/tests/test_cuda_graphs: replayed stages against op by op;
#   3. tests/gpu/gpu_parity.py: end-to-end parity, strict fp32 (TF32 off in
#      torch too), of CUDA against our CPU backend (every stage) and against
#      torchvision on the same GPU (final detections and masks), then the
#      fp16's accuracy against fp32 (box IoU, score difference, mask IoU; and
#      torchvision autocast's beside it), then the latency table per stage for
#      an 800x1216 image: ours fp32/tf32 with and without folding and fp16,
#      torchvision fp32 eager; warm-up, medians of 20 runs;
#   4. the parity suite's end-to-end test (tests/parity/test_e2e.py) with our
#      stages on CUDA against torchvision's CPU reference, synthetic case.
# Weights are generated on the machine (tests/parity/oracle.py): only the
# source tree travels. Build dependencies missing there (oneDNN, cJSON, png,
# jpeg, cmocka) are unpacked from tests/gpu/deps/*.deb when carried: run
# tests/gpu/fetch_deps.sh first and carry tests/gpu/deps. cuDNN and cuBLAS
# come from the toolkit, else from PyTorch's pip wheels (tests/gpu/setup.sh).
#
#   device run:  bash tests/gpu/check.sh   (timeout 540 s; carry tests/gpu/deps)
#   env:         PYTHON (default python3, must have torch with CUDA),
#                BENCH_RUNS (default 20), WORK (default /tmp/gpucheck)
# Debugging switches of the backend (cuda/cuda_internal.h): MR_CUDA_SYNC=1,
# MR_CUDA_FUSED_Z=1 (residual as cuDNN's z), MR_CUDA_CONV_FIND=1 (measured
# algorithms), MR_CUDA_HOST_POST=1 (RPN
# selection and box post-processing wholly on the host).
set -uo pipefail
cd "$(dirname "$0")/../.."
T0=$(date +%s)
PY=${PYTHON:-python3}
BENCH_RUNS=${BENCH_RUNS:-20}
WORK=${WORK:-/tmp/gpucheck}
# A build folder of its own: sm_90-only objects must not end up in build/.
export DETECT_BUILD="$PWD/build-gpu"
failed=()
step() { echo; echo "== [$(($(date +%s) - T0)) s] $*"; }
fail() { echo "FAIL: $*"; failed+=("$*"); }

source tests/gpu/setup.sh

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader || fail "nvidia-smi"
nvcc --version | tail -2
$PY -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__, \
'cuda available', torch.cuda.is_available())" || fail "python with torch"

step "build dependencies"
gpu_setup_deps || exit 2
gpu_setup_cuda || exit 2

step "build (CUDA=1 CUDA_ARCHS=90, into build-gpu/)"
if gpu_build all build-gpu/tests/test_backend_ops build-gpu/tests/test_cuda_fp16 build-gpu/tests/test_cuda_graphs >"$WORK.build.log" 2>&1; then
    grep -i "warning" "$WORK.build.log" && fail "build warnings" || echo "built, no warnings"
else
    tail -30 "$WORK.build.log"
    fail "build"
    exit 1
fi

step "backend ops: CPU, CUDA, CUDA --no-fold (tests/unit/test_backend_ops.c)"
build-gpu/tests/test_backend_ops >"$WORK.ops.log" 2>&1
rc=$?
grep -E "^test_backend_ops: seed|^  (cpu|cuda|cuda-nofold) [a-z_0-9]+: |FAIL|^SKIP" "$WORK.ops.log"
[ $rc -eq 0 ] || fail "test_backend_ops (exit $rc)"
grep -qE "^SKIP cuda[a-z-]*: no GPU" "$WORK.ops.log" && fail "the CUDA cases were skipped: no GPU found by the backend"

step "fp16 ops against double-precision references (tests/unit/test_cuda_fp16.c)"
MR_CUDA_SYNC=1 build-gpu/tests/test_cuda_fp16 >"$WORK.fp16.log" 2>&1
rc=$?
grep -E "^  |ERROR|FAIL|SKIP|PASSED" "$WORK.fp16.log" | head -60
[ $rc -eq 0 ] || fail "test_cuda_fp16 (exit $rc)"
grep -q "^SKIP test_cuda_fp16" "$WORK.fp16.log" && fail "the fp16 cases were skipped"

step "CUDA graphs: replayed stages against op by op (tests/unit/test_cuda_graphs.c)"
build-gpu/tests/test_cuda_graphs >"$WORK.graphs.log" 2>&1
rc=$?
grep -E "^  |ERROR|FAIL|SKIP|PASSED" "$WORK.graphs.log" | head -30
[ $rc -eq 0 ] || fail "test_cuda_graphs (exit $rc)"
grep -q "^SKIP test_cuda_graphs" "$WORK.graphs.log" && fail "the graph cases were skipped"

step "backend ops with MR_CUDA_SYNC=1 (a sync and check after every launch)"
MR_CUDA_SYNC=1 build-gpu/tests/test_backend_ops >"$WORK.ops_sync.log" 2>&1 || {
    grep -E "FAIL" "$WORK.ops_sync.log" | head -20
    fail "test_backend_ops with MR_CUDA_SYNC=1"
}

step "backend ops with MR_CUDA_FUSED_Z=1 (informational: residual as cuDNN's z, aliasing y)"
if MR_CUDA_FUSED_Z=1 build-gpu/tests/test_backend_ops >"$WORK.ops_z.log" 2>&1; then
    if grep -qE "^SKIP cuda[a-z-]*: no GPU" "$WORK.ops_z.log"; then
        echo "MR_CUDA_FUSED_Z=1: the CUDA cases were skipped: nothing learnt"
    else
        echo "MR_CUDA_FUSED_Z=1: all cases pass: the fused residual can be made the default"
    fi
else
    grep -E "FAIL" "$WORK.ops_z.log" | head -20
    echo "MR_CUDA_FUSED_Z=1: failures above: keep the two-pass residual (the default)"
fi

step "backend ops with MR_CUDA_CONV_FIND=1 (informational: algorithms measured by cuDNN's Find, NOTES 27)"
if MR_CUDA_CONV_FIND=1 build-gpu/tests/test_backend_ops >"$WORK.ops_find.log" 2>&1 &&
    MR_CUDA_CONV_FIND=1 build-gpu/tests/test_cuda_fp16 >>"$WORK.ops_find.log" 2>&1; then
    echo "MR_CUDA_CONV_FIND=1: all cases pass (fp32, TF32 and fp16 ops on the measured algorithms)"
else
    grep -E "FAIL" "$WORK.ops_find.log" | head -20
    echo "MR_CUDA_CONV_FIND=1: failures above: a measured algorithm is out of tolerance; keep the heuristic"
fi

step "end-to-end parity and latency (tests/gpu/gpu_parity.py)"
timeout 360 $PY tests/gpu/gpu_parity.py --work "$WORK" --bench-runs "$BENCH_RUNS" || fail "gpu_parity.py"
for arch in v2 gn; do # the strong baselines' architectures (issue 48), 320x480, with their latency table
    timeout 240 $PY tests/gpu/gpu_parity.py --work "$WORK/$arch" --arch "$arch" --bench-runs "$BENCH_RUNS" ||
        fail "gpu_parity.py --arch $arch"
done

step "parity suite, our stages on CUDA vs torchvision's CPU reference (test_e2e.py, synthetic case)"
if [ $(($(date +%s) - T0)) -lt 360 ] && $PY -c "import pytest" 2>/dev/null; then
    (cd tests/parity && DETECT_STAGE_ARGS="--device cuda" timeout 110 $PY -m pytest -q -x -k synthetic test_e2e.py) ||
        fail "test_e2e.py on CUDA"
else
    echo "SKIPPED: no pytest, or too little time left"
fi

step "done"
if [ ${#failed[@]} -eq 0 ]; then echo "check.sh: all passed"; else printf 'check.sh: FAILED: %s\n' "${failed[@]}"; fi
[ ${#failed[@]} -eq 0 ]
