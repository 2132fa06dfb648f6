#!/usr/bin/env bash
# The prepared device check of issue 25: what to run on a lent GPU, in one go, in <= 8 minutes.
#
#   bash benchmarks/device_check.sh                 # on the GPU machine (DEVICE=cuda, PRESET=igb-like)
#   DEVICE=cpu PRESET=tiny bash benchmarks/device_check.sh   # dry run of everything but CUDA, anywhere
#
# Steps, each timed into $OUT/steps.tsv, every result JSON into $OUT (default results/device-check):
#   1. environment: python, torch, CUDA, GPU, cgroup version, cores, pyg-lib / torch-sparse, pynvml
#   2. wheels: pip install --no-deps $WHEELS/*.whl when the folder holds any (a failing wheel is skipped)
#   3. the CUDA tests (they skip without a GPU; on one they must pass): pytest -k cuda
#   4. warm-up: one tiny-preset epoch of outre-part on $DEVICE (numba compiles its kernels, ~1 min cold)
#   5. the $PRESET dataset generated into $DATA (reused when there: pass DATA= a folder that has it)
#   6. $PRESET epochs of outre-part, outre-auto and pyg-workers on $DEVICE under the preset's host cap,
#      one suite per system (one repeat, no compute-only runs): outre bench ... --out $OUT/<system>
#
# On the lent H200 of wave 4 (first session): carry liburing and bloom-filter2 wheels (pip download
# --python-version 3.12 ... into .whl/, WHEELS=.whl); the tiny warm-up needed more than 50 s cold; the
# igb-like data took 14 s, each outre epoch 22-26 s plus ~10-15 s of start-up; cgroup v2 still refused.
#
# What the lent machine of issue 25 lacked (one H200, 16 cores, torch 2.11 + CUDA 13, Python 3.12):
#   - pyg-lib and torch-sparse for its torch: PyG's NeighborLoader cannot sample, so pyg-workers is
#     recorded as skipped with the install hint unless a matching wheel is carried in $WHEELS (the
#     cp311 / torch 2.13 CPU wheels of ../shared/wheels do not fit it; a source build of torch-sparse
#     did not finish in 2 minutes on 8 jobs).
#   - the cgroup v2 memory controller for the process's own group: the bench now writes "+memory" into
#     each ancestor's cgroup.subtree_control itself (bench/_cgroup.py, as root); where the kernel refuses
#     (EBUSY: a group holding processes), the runs are recorded "uncapped (why)" and still run.
#   - nvidia-ml-py (pynvml): without it the GPU's utilisation is recorded as skipped with the reason;
#     step 2 installs it when a wheel is carried, and `pip install nvidia-ml-py` needs the network.
#
# Budget: the steps' timeouts add up to 8 minutes (10 + 20 + 80 + 80 + 60 + 80 + 100 + 50 s); a step
# that times out is recorded in steps.tsv (rc 124/137) and the next one runs.  Expected on the lent H200 box (16 cores, a virtio
# disk): tests < 1 min, warm-up < 1 min (numba's cache=True: once per machine), igb-like generation
# 1-1.5 min (77 s on 2 cores here), partitioning 17 s + profile 53 s (2 cores), three epochs of 13-25 s
# plus ~10 s of child start-up each.
set -uo pipefail

cd "$(dirname "$0")/.."
DEVICE=${DEVICE:-cuda}
PRESET=${PRESET:-igb-like}
OUT=${OUT:-results/device-check}
DATA=${DATA:-${HOME}/.cache/outre-async/bench}
WHEELS=${WHEELS:-shared/wheels}
PY=${PYTHON:-python}
SCALE=${SCALE:-1}   # multiplies every step's timeout (a slow or shared machine's dry run: SCALE=3)
STEP_MS=${STEP_MS:-0}
mkdir -p "$OUT" "$DATA"
STEPS="$OUT/steps.tsv"
printf 'step\trc\tseconds\n' > "$STEPS"

export PY WHEELS
step() {  # step NAME TIMEOUT_S CMD...: run (a function of this script too), log to $OUT/NAME.log, record rc and seconds
  local name=$1 limit=$(( $2 * SCALE ))
  shift 2
  local start rc
  if [[ " $SKIP " == *" $name "* ]]; then
    printf '%s\tskipped\t0\n' "$name" >> "$STEPS"
    return 0
  fi
  start=$(date +%s)
  echo "== $name (at most ${limit} s): $*"
  if declare -F "$1" > /dev/null; then
    export -f "$1"
    timeout --kill-after=10 "$limit" bash -c "$*" > "$OUT/$name.log" 2>&1
  else
    timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  fi
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - start ))" >> "$STEPS"
  tail -n 5 "$OUT/$name.log"
  return 0  # a failed step is recorded; the next still runs
}

environment() {
  "$PY" - <<'EOF'
import importlib.util, json, os, platform, sys
import torch
facts = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda,
         "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else [],
         "cores": len(os.sched_getaffinity(0)), "machine": platform.machine(),
         "cgroup_v2": os.path.exists("/sys/fs/cgroup/cgroup.controllers"),
         "modules": {m: importlib.util.find_spec(m) is not None for m in ("pyg_lib", "torch_sparse", "pynvml", "outre_async")}}
print(json.dumps(facts, indent=1))
EOF
}

# The bench runs its systems in `python -P -m outre_async.bench.child` children: the current folder is
# not on their path, so "import outre_async" from the root proves nothing.  A bare machine has no
# network, so pip's isolated build (it fetches setuptools) fails there: build without isolation, and
# where even that fails, put this checkout on PYTHONPATH (which -P keeps).
if ! (cd / && "$PY" -c "import outre_async" 2>/dev/null); then
  "$PY" -m pip install -q --no-deps --no-build-isolation -e . || echo "could not install this checkout"
  if ! (cd / && "$PY" -c "import outre_async" 2>/dev/null); then
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
    echo "outre_async from PYTHONPATH=$PYTHONPATH"
  fi
fi
SKIP=${SKIP:-}   # step names to leave out, space-separated (a rerun of the steps that failed for want of time)
step environment 10 environment

install_wheels() {
  local any=0
  for wheel in "$WHEELS"/*.whl; do
    [ -e "$wheel" ] || continue
    any=1
    "$PY" -m pip install -q --no-deps "$wheel" || echo "skipped $wheel (does not fit this python/torch)"
  done
  [ $any = 1 ] || echo "no wheels in $WHEELS"
}
step wheels 20 install_wheels

step cuda_tests 80 "$PY" -m pytest -q -p no:cacheprovider -k cuda \
  tests/plan/test_profile.py tests/loader/test_device_copy.py tests/test_device.py \
  tests/loader/test_history.py tests/loader/test_history_device.py tests/distributed/test_session.py

step warmup 80 "$PY" -m outre_async.cli bench --preset tiny --systems outre-part --repeats 1 --max-batches 4 \
  --no-compute-only --probe-seconds 1 --device "$DEVICE" --data-dir "$DATA" --out "$OUT/warmup"

generate() {  # the preset's dataset where outre bench looks for it (reused when there)
  "$PY" -c "import sys; from pathlib import Path; from outre_async.bench._presets import get_preset
from outre_async.bench._runner import ensure_dataset
print(ensure_dataset(get_preset(sys.argv[1]), Path(sys.argv[2]), 0, print))" "$PRESET" "$DATA"
}
export PRESET DATA
step data 60 generate

bench() {  # bench NAME SYSTEM: one system per suite, so a timeout loses that system's run only
  "$PY" -m outre_async.cli bench --preset "$PRESET" --systems "$2" --repeats 1 --no-compute-only \
    --probe-seconds 2 --device "$DEVICE" --step-ms "$STEP_MS" --data-dir "$DATA" --out "$OUT/$1"
}
export DEVICE STEP_MS OUT
step outre_part 80 bench outre_part outre-part      # partitions the dataset (reused by outre-auto)
step outre_auto 100 bench outre_auto outre-auto     # profiles, then its epoch
step pyg 50 bench pyg pyg-workers                   # skipped at once without pyg-lib / torch-sparse

echo "== steps ($STEPS)"
cat "$STEPS"
ls "$OUT"
