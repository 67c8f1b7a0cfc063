#!/usr/bin/env bash
# One-call body for the GPU machine.  From the repository root:
#
#     bash samples/capture/run_on_gpu.sh
#
# $OUT is the folder whose files come back (at most 8 files, 16 MB each, 2 folder levels).
# The ~30 capture files are therefore written to a scratch folder and only these come back:
#   $OUT/captured.tar.gz   everything (snapshots, truth files, manifest, README, logs) under captured/
#   $OUT/manifest.json     copy of captured/manifest.json, for a quick look
#   $OUT/run_all.log       progress lines
#   $OUT/nvidia-smi.txt    GPU/driver state before the run
# Unpack later with:  tar -xzf captured.tar.gz -C samples/     (-> samples/captured/)
set -u
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
PY=""
for cand in ${PYTHON:-} python3 python; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "import torch" >/dev/null 2>&1; then PY="$cand"; break; fi
done
PY="${PY:-python3}"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
WORK="$(mktemp -d "${TMPDIR:-/tmp}/memlens_capture.XXXXXX")"
"$PY" samples/capture/run_all.py --out "$WORK/captured" --tar "$OUT/captured.tar.gz" \
  --budget "${CAPTURE_BUDGET:-300}" 2>&1 | tee "$OUT/run_all.log"
rc=${PIPESTATUS[0]}
cp "$WORK/captured/manifest.json" "$OUT/manifest.json" 2>/dev/null || true
echo "run_on_gpu: exit $rc; files in $OUT:"; ls -l "$OUT"
exit "$rc"
