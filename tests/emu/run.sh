#!/usr/bin/env bash
# tests/emu/run.sh (make cuda-emu): the CUDA backend's tests, run on this
# machine's CPU through the emulator in tests/emu (README.md there: what it
# checks and what it cannot). The same tests as tests/gpu/check.sh, minus
# the timings, after the emulator's own checks (test_emu.cu):
#   1. tests/unit/test_backend_ops: every op on the CPU, on CUDA and on CUDA
#      --no-fold against the same references; again with each of the
#      backend's switches (MR_CUDA_SYNC, MR_CUDA_FUSED_Z, MR_CUDA_CONV_FIND,
#      MR_CUDA_HOST_POST),
#      with cuDNN refusing every fused call (the two-pass fallback), on an
#      sm_75 device (no TF32), and with the emulated threads and blocks run
#      in reverse and shuffled order (a result that changes is a race);
#   2. test_cuda_fp16 and test_cuda_graphs, also shuffled and with the
#      fallback (fp16 also with MR_CUDA_CONV_FIND);
#   3. out of device memory at load: one error line, exit 2; a GPU older than
#      the build's kernels (sm_70): an error by name, the CPU with a notice
#      under --device auto;
#   4. mixed_batch.py: a folder of 24 images of 12 sizes, PNG and JPEG, through
#      detect --device cuda (decoding ahead, CUDA graphs per input size)
#      against detect --device cpu, image by image; again on 6 sizes under
#      mmdetection's conventions with class-agnostic box and mask heads;
#      mmdet_parity.py: mmdetection's own predictor (build/venv-mmdet) against
#      detect --device cuda, its R-101 config at 800x1203 and a class-agnostic
#      training config (test_mmdet_e2e.py's cases);
#   5. whole_pass.py: the forward pass from the backbone to the mask
#      probabilities as one CUDA graph (the shapes model and seeded R-101):
#      one capture that nothing in it broke (no sync, allocation or pageable
#      copy), holding every op of the span; a replayed image runs only the
#      preprocessing and the paste outside it; results byte for byte those
#      of the op-by-op and counts-on-the-host runs; with no device memory
#      left for graphs (each instantiation refused), op by op, same results;
#      in_flight.py: 3 execution contexts at once against one at a time, byte
#      for byte, a bad image in flight, too little memory for the contexts
#      (fewer, with a notice) or for any graph, a canvas's one graph, Ctrl-C;
#   6. tests/gpu/gpu_parity.py --ours cuda --torch-device cpu: the whole model
#      on CUDA against our CPU backend stage by stage and torchvision's
#      detections and masks in strict fp32 (also --no-fold, and a 4-image
#      batch whose later images are CUDA-graph replays), then fp16 against
#      fp32 on random and trained weights; the same at 320x480 for the strong
#      baselines' architectures (--arch v2: batchnorm in the trunk, FPN and
#      heads, two RPN convs, 4conv1fc; --arch gn: GroupNorm throughout, with
#      100 proposals and strict fp32 only: the emulator runs GroupNorm's
#      thousands of small blocks about 15x slower than a conv's work, 3 min
#      an image at 1000 RoIs).
# Every step runs; a table at the end; exit 1 if any failed. About 5 minutes
# on 2 cores. Needs build/ (make all, the unit tests) and build-emu/ (make
# cuda-emu-lib); `make cuda-emu` builds both first.
set -u
cd "$(dirname "$0")/../.."
. scripts/test_env.sh  # pycocotools on PYTHONPATH, run by make or by hand
export MR_CUDA_LIBRARY="$PWD/build-emu/libdetect_cuda.so"
export LD_LIBRARY_PATH="$PWD/build-emu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
PY=${PYTHON:-/usr/bin/python3}
LOGS=build-emu/logs
mkdir -p "$LOGS"
for f in "$MR_CUDA_LIBRARY" build-emu/libcuda.so.1 build-emu/test_emu build/tests/test_backend_ops build/tests/test_cuda_fp16 \
         build/tests/test_cuda_graphs build/detect build/stage_runner; do
    [ -e "$f" ] || { echo "tests/emu/run.sh: $f is missing: run make cuda-emu" >&2; exit 2; }
done

# step NAME LOG [VAR=VALUE...] COMMAND...: runs it in the background with
# the settings, output to build-emu/logs/LOG; it fails on a non-zero exit or
# when the CUDA cases skipped (the emulated backend did not load). The
# emulator runs a kernel's blocks one after another on the calling thread,
# so a step keeps about one core busy: EMU_JOBS steps (default: the core
# count) run at once. Each has its own work folder and log, so none sees
# another; the longest are started first. The table at the end follows the
# order of the steps below.
names=() logs=()
running=0
JOBS=${EMU_JOBS:-$(nproc 2>/dev/null || echo 1)}
run_step() { # LOG [VAR=VALUE...] COMMAND...: writes "EXIT SECONDS" to LOG.result
    local log="$LOGS/$1" t0=$SECONDS rc=0
    shift
    env "$@" >"$log" 2>&1 || rc=$?
    if [ $rc -eq 0 ] && grep -qE "^SKIP [a-z_0-9-]+: no (GPU|fp16 context|CUDA backend)" "$log"; then rc=99; fi
    echo "$rc $((SECONDS - t0))" >"$log.result"
    echo "  done: $(basename "$log") (exit $rc, $((SECONDS - t0)) s)"
}
step() {
    local name=$1 log=$2
    shift 2
    names+=("$name") logs+=("$log")
    rm -f "$LOGS/$log.result"
    if [ "$running" -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
    run_step "$log" "$@" &
    running=$((running + 1))
}

# The emulator runs each kernel on the calling thread, between oneDNN's
# OpenMP GEMMs (its cuDNN and cuBLAS); OpenMP's workers spin-waiting after
# each GEMM take a core from it: mixed_batch.py took 18.5 s spinning and
# 15.1 s passive on a quiet 2-core machine, and spinning cost 2x with other
# jobs on the cores (bench/NOTES.md section 26).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

step "the whole pass as one graph (whole_pass.py)" whole_pass.log $PY tests/emu/whole_pass.py \
    --work build-emu/whole_pass
step "end to end (gpu_parity.py, torchvision on CPU)" parity.log $PY tests/gpu/gpu_parity.py \
    --work build-emu/parity --ours cuda --torch-device cpu --threads "$(nproc)"
step "strong baselines, batchnorm heads (gpu_parity.py --arch v2)" parity_v2.log $PY tests/gpu/gpu_parity.py \
    --work build-emu/parity_v2 --ours cuda --torch-device cpu --threads 1 --arch v2
step "strong baselines, GroupNorm (gpu_parity.py --arch gn)" parity_gn.log $PY tests/gpu/gpu_parity.py \
    --work build-emu/parity_gn --ours cuda --torch-device cpu --threads 1 --arch gn --rois 100 --fp32-only
step "several images in flight (in_flight.py)" in_flight.log $PY tests/emu/in_flight.py --work build-emu/in_flight
step "a folder of mixed sizes, PNG and JPEG, vs the CPU" mixed.log $PY tests/emu/mixed_batch.py \
    --work build-emu/mixed
step "mmdetection's conventions, class-agnostic heads, vs the CPU" mixed_mmdet.log $PY tests/emu/mixed_batch.py \
    --work build-emu/mixed_mmdet --conventions mmdet-agnostic
step "mmdetection's own predictor vs CUDA (mmdet_parity.py)" mmdet.log $PY tests/emu/mmdet_parity.py \
    --work build-emu/mmdet
step "the emulator's own checks (test_emu.cu)" emu.log build-emu/test_emu
ops=build/tests/test_backend_ops
step "backend ops" ops.log $ops
step "backend ops, MR_CUDA_SYNC=1" ops_sync.log MR_CUDA_SYNC=1 $ops
step "backend ops, MR_CUDA_FUSED_Z=1" ops_z.log MR_CUDA_FUSED_Z=1 $ops
step "backend ops, MR_CUDA_CONV_FIND=1" ops_find.log MR_CUDA_CONV_FIND=1 $ops
step "backend ops, MR_CUDA_HOST_POST=1" ops_host.log MR_CUDA_HOST_POST=1 $ops
step "backend ops, cuDNN refuses fused calls" ops_refuse.log MR_EMU_CUDNN_REFUSE_FUSED=1 $ops
step "backend ops, an sm_75 device" ops_sm75.log MR_EMU_SM=75 $ops
step "backend ops, threads in reverse order" ops_reverse.log MR_EMU_ORDER=reverse $ops
step "backend ops, threads shuffled" ops_shuffle.log MR_EMU_ORDER=shuffle $ops
step "fp16 ops (MR_CUDA_SYNC=1)" fp16.log MR_CUDA_SYNC=1 build/tests/test_cuda_fp16
step "fp16 ops, MR_CUDA_CONV_FIND=1" fp16_find.log MR_CUDA_SYNC=1 MR_CUDA_CONV_FIND=1 build/tests/test_cuda_fp16
step "fp16 ops, shuffled, cuDNN refuses fused" fp16_alt.log MR_EMU_ORDER=shuffle MR_EMU_CUDNN_REFUSE_FUSED=1 \
    build/tests/test_cuda_fp16
step "CUDA graphs" graphs.log build/tests/test_cuda_graphs
step "CUDA graphs, shuffled" graphs_shuffle.log MR_EMU_ORDER=shuffle build/tests/test_cuda_graphs
# Out of device memory at load (the emulated device holds 50 MB: the
# shapes model's weights fit, its activations do not): one error line, exit 2.
oom_check='out=build-emu/logs/oom.out rc=0
MR_EMU_DEVICE_MEMORY=50000000 build/detect --device cuda -q --config configs/mask_rcnn_R-101-FPN_shapes.json \
    --weights models/shapes_r101_narrow.safetensors examples/shapes/scene_1.png >"$out" 2>&1 || rc=$?
cat "$out"; echo "exit $rc"
[ $rc -eq 2 ] && [ "$(wc -l <"$out")" -eq 1 ] && grep -q "out of GPU memory" "$out"'
step "out of device memory at load: one line, exit 2" oom.log bash -c "$oom_check"
# A GPU too old for this build's kernels (an emulated sm_70; the build's oldest is sm_75): asked for by
# name, one error line naming the cause and exit 2; under --device auto, the CPU with a notice saying why.
old_gpu_check='out=build-emu/logs/old_gpu.out rc=0
run() { MR_EMU_SM=70 build/detect -q --config configs/mask_rcnn_R-101-FPN_shapes.json \
    --weights models/shapes_r101_narrow.safetensors "$@" examples/shapes/scene_1.png; }
run --device cuda >"$out" 2>&1 || rc=$?
cat "$out"; echo "exit $rc"
[ $rc -eq 2 ] && [ "$(wc -l <"$out")" -eq 1 ] && grep -q "device cuda: cuda:0: too old a GPU: compute capability 7.0" "$out" || exit 1
run --device auto -v >"$out" 2>&1 || exit 1
cat "$out"
grep -q "notice: --device auto: cuda:0: too old a GPU" "$out" && grep -q "device cpu" "$out"'
step "a GPU too old for the build: error by name, CPU under auto" old_gpu.log bash -c "$old_gpu_check"

wait

# what the long steps checked, then the table
details() { # LOG PATTERN: the log's lines that say what its step checked
    echo "$1:"
    grep -E "$2" "$LOGS/$1" | sed 's/^/    /'
}
details whole_pass.log "^  (OK|FAIL)|outside its graph"
details in_flight.log "^  (OK|FAIL)"
details parity.log "^  (OK|FAIL)|fp16 vs|shapes model|parity checks"
details parity_v2.log "^  (OK|FAIL)|fp16 vs|parity checks"
details parity_gn.log "^  (OK|FAIL)|fp16 vs|parity checks"
echo
echo "cuda-emu: the CUDA backend on the emulator (tests/emu), $JOBS steps at once"
failed=0
for i in "${!names[@]}"; do
    log="$LOGS/${logs[$i]}" rc=? secs=?
    [ -f "$log.result" ] && read -r rc secs <"$log.result"
    if [ "$rc" = 0 ]; then result=ok; else result="FAILED (exit $rc)"; failed=1; fi
    printf '  %-48s %-18s %4s s\n' "${names[$i]}" "$result" "$secs"
done
for i in "${!names[@]}"; do
    log="$LOGS/${logs[$i]}"
    [ "$(cut -d' ' -f1 "$log.result" 2>/dev/null)" = 0 ] && continue
    echo "---- ${names[$i]}: FAILED, the end of $log:"
    grep -E "FAIL|ERROR|emu:|SKIP" "$log" | head -20
    tail -5 "$log"
done
[ $failed -eq 0 ] && echo "cuda-emu: all passed" || echo "cuda-emu: FAILED" >&2
exit $failed
