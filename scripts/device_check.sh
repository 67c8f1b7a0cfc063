#!/usr/bin/env bash
# One call on a lent GPU machine (16 cores): the GPU captures of samples/capture (issue 9) and
# the many-core benchmark (issue 7). From the repository root, after
#
#     cargo build --release --examples
#     mkdir -p .devbin && strip -o .devbin/memlens target/release/memlens \
#         && strip -o .devbin/pass1 target/release/examples/pass1
#
# run it through the device tool with carry [".devbin"] and timeout_s 480:
#
#     bash scripts/device_check.sh            # captures and benchmark
#     bash scripts/device_check.sh bench      # benchmark only (timeout_s 300)
#
# Files back in $OUT (7, under the tool's limit of 8): captured.tar.gz, manifest.json,
# run_all.log, nvidia-smi.txt (from run_on_gpu.sh), capture.txt, bench.txt, machine.txt.
# Every phase has its own time limit, so a slow one cannot take the others' results with it.
set -u
export PYTHONUNBUFFERED=1
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
BIN="${MEMLENS_BIN:-$PWD/.devbin/memlens}"
PASS1="${PASS1_BIN:-$PWD/.devbin/pass1}"
{ date -u; nproc; lscpu 2>/dev/null | head -20; free -g 2>/dev/null; python3 -c "import torch; print('torch', torch.__version__)"; } \
  > "$OUT/machine.txt" 2>&1

MODE="${1:-all}"
if [ "$MODE" != bench ]; then
  echo "== captures"
  # Issue 21's captures alone (the first twelve are committed); the full set, and the
  # ~1M-entry scale_big, need `bash samples/capture/run_on_gpu.sh` in a call of its own.
  CAPTURE_ONLY="${CAPTURE_ONLY:-alloc_settings,recording_modes,scale,autograd_all}" CAPTURE_WITH= \
    CAPTURE_BUDGET=300 timeout 340 bash samples/capture/run_on_gpu.sh > "$OUT/capture.txt" 2>&1
  echo "captures: exit $?"
fi
REAL_SECONDS=20
[ "$MODE" = bench ] && REAL_SECONDS=12

echo "== generated 1 GB, shared layout, protocol 4"
{
  MEMLENS_BIN="$BIN" timeout 150 python3 scripts/bench --sizes 1000 --threads 1,2,4,8,16 --runs 2 \
    --no-python --workdir /tmp/mb
  echo "bench: exit $?"
  for i in 1 2; do timeout 20 "$PASS1" /tmp/mb/big-1000MiB-shared-p4.pickle; done
  # An earlier build for comparison, when one was carried (.devbin/memlens-before).
  if [ -x "$PWD/.devbin/memlens-before" ]; then
    echo "before:"
    MEMLENS_BIN="$PWD/.devbin/memlens-before" timeout 60 python3 scripts/bench --sizes 1000 \
      --threads 1,2,16 --runs 1 --no-python --workdir /tmp/mb
  fi
} > "$OUT/bench.txt" 2>&1

echo "== real snapshot written by torch itself"
{
  timeout 80 python3 scripts/capture_big.py --out /tmp/real-big.pickle --seconds "$REAL_SECONDS" --max-entries 6000000
  echo "capture_big: exit $?"
  [ -f /tmp/real-big.pickle ] && MEMLENS_BIN="$BIN" timeout 60 python3 scripts/bench \
    --files /tmp/real-big.pickle --threads 1,2,4,8,16 --runs 2
  echo "bench real: exit $?"
  [ -f /tmp/real-big.pickle ] && timeout 10 "$BIN" summary /tmp/real-big.pickle | head -30
} >> "$OUT/bench.txt" 2>&1
cat "$OUT/bench.txt"
ls -l "$OUT"
