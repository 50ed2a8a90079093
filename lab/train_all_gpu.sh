#!/bin/bash
# `make models-gpu`: train the nine checkpoints at once on one GPU with the project's own
# `python -m engine train`, each for MINUTES of wall time. No --steps: every run derives its cosine
# horizon from its own measured step rate (lab/train.py, Schedule), so all nine end on their
# learning-rate floor as the budget runs out. Adapted from ../shared/checkpoints/train_all.sh, which
# needed a separate 45 s probe of each job to pick --steps; the trainer now does that itself.
#
# usage: lab/train_all_gpu.sh            (env: MINUTES=15 OUT=runs/models-gpu PY=python3
#                                              DEVICE=cuda EXTRA="" DOMAINS="text code protein"
#                                              JOBS="name:kind:domain:hidden:layers:heads:ffn:batch ...")
# Default JOBS: an AS-ARM, a hybrid and a judge for each of the studio's domains (engine/inputs/domains.py,
# `python -m engine domains --names`), at the sizes below.
# Needs the corpora (`make data`; INFILL_DATA_DIR) and assets/tokenizers. Outputs OUT/<name>/ (a
# checkpoint saved every 3 minutes and at the end, with trainer.pt for --resume) and OUT/logs/.
# Adopt a model only after `python -m engine eval` on it beats the bundled one.
set -u
MINUTES=${MINUTES:-15}
OUT=${OUT:-runs/models-gpu}
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
EXTRA=${EXTRA:-}
if [ -z "${JOBS:-}" ]; then
  DOMAINS=${DOMAINS:-$("$PY" -m engine domains --names)} || exit 2
  JOBS=""
  for size in asarm:320:6:5:1280:128 hybrid:320:5:5:1280:128 judge:256:4:4:768:64; do
    for d in $DOMAINS; do JOBS+="$d-${size%%:*}:${size%%:*}:$d:${size#*:}"$'\n'; done
  done
fi
export PYTHONUNBUFFERED=1
mkdir -p "$OUT/logs"
# a device that is not there: one line, before nine jobs start
"$PY" -c "import sys; from engine.loading.device import resolve_device; from engine.errors import InfillError
try: resolve_device(sys.argv[1])
except InfillError as e: sys.exit(f'error: {e}')" "$DEVICE" || exit 2
start=$(date +%s)
pids=()
for j in $JOBS; do
  IFS=: read -r n k d h l hd f b <<<"$j"
  # shellcheck disable=SC2086  # EXTRA is a list of flags
  "$PY" -m engine train --kind "$k" --domain "$d" --out "$OUT/$n" --hidden "$h" --layers "$l" --heads "$hd" \
      --ffn "$f" --seq-len 256 --batch "$b" --minutes "$MINUTES" --save-minutes 3 --save-optimizer \
      --device "$DEVICE" $EXTRA > "$OUT/logs/train-$n.log" 2>&1 &
  pids+=($!)
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
echo "all jobs done in $(( ($(date +%s) - start) / 60 )) min $(( ($(date +%s) - start) % 60 )) s (MINUTES=$MINUTES each, at once)"
for j in $JOBS; do
  n=${j%%:*}
  "$PY" - "$OUT/$n/train_state.json" "$n" <<'EOF' || { echo "$n: no checkpoint (see $OUT/logs/train-$n.log)"; fail=1; }
import json, sys
s = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:<15} steps {s['steps']:>6} / horizon {s['horizon']}  {s['minutes']:5.1f} min  "
      f"valid loss {s['valid_loss']:.4f}  final lr {s['lr_final']:.2e}  {s['device']}")
EOF
done
exit $fail
