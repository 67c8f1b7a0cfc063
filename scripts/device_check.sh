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
#     bash scripts/device_check.sh
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

echo "== captures"
CAPTURE_BUDGET=170 timeout 220 bash samples/capture/run_on_gpu.sh > "$OUT/capture.txt" 2>&1
echo "captures: exit $?"

echo "== generated 1 GB, shared layout, protocol 4"
{
  MEMLENS_BIN="$BIN" timeout 110 python3 scripts/bench --sizes 1000 --threads 1,2,4,8,16 --runs 3 \
    --no-python --workdir /tmp/mb
  echo "bench: exit $?"
  for i in 1 2; do timeout 20 "$PASS1" /tmp/mb/big-1000MiB-shared-p4.pickle; done
} > "$OUT/bench.txt" 2>&1

echo "== real snapshot written by torch itself"
{
  timeout 80 python3 scripts/capture_big.py --out /tmp/real-big.pickle --seconds 20 --max-entries 2000000
  echo "capture_big: exit $?"
  [ -f /tmp/real-big.pickle ] && MEMLENS_BIN="$BIN" timeout 60 python3 scripts/bench \
    --files /tmp/real-big.pickle --threads 1,2,4,8,16 --runs 2
  echo "bench real: exit $?"
  [ -f /tmp/real-big.pickle ] && timeout 10 "$BIN" summary /tmp/real-big.pickle | head -30
} >> "$OUT/bench.txt" 2>&1
cat "$OUT/bench.txt"
ls -l "$OUT"
