#!/usr/bin/env bash
# One-call body for the GPU machine.  From the repository root:
#
#     bash samples/capture/run_on_gpu.sh          # device tool: timeout_s 600
#
# Runs every capture (the 12 of issue 9 and those of issue 21: alloc_settings, recording_modes,
# scale, autograd_all) plus the optional scale_big (~1M entries, written to the scratch folder,
# never packed: only its size and sha256 reach the manifest), within a 480 s budget.  Expected
# on one H200: about 5 minutes (17 capture processes + 5 alloc_settings children of ~10 s each,
# scale_big ~1 minute).  Environment knobs: CAPTURE_BUDGET (seconds, default 480),
# CAPTURE_ONLY (comma-separated names: run only those), CAPTURE_WITH (optional captures,
# default scale_big; set it empty to skip), CAPTURE_BIG_ENTRIES (default 1000000).
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
  --budget "${CAPTURE_BUDGET:-480}" --only "${CAPTURE_ONLY:-}" --with "${CAPTURE_WITH-scale_big}" \
  --big-path "$WORK/scale_big/scale_big.pickle" --big-entries "${CAPTURE_BIG_ENTRIES:-1000000}" \
  2>&1 | tee "$OUT/run_all.log"
rc=${PIPESTATUS[0]}
cp "$WORK/captured/manifest.json" "$OUT/manifest.json" 2>/dev/null || true
echo "run_on_gpu: exit $rc; files in $OUT:"; ls -l "$OUT"
exit "$rc"
