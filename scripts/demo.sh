#!/usr/bin/env bash
# The main job: the channel study (split-prefill and state swap) on the shipped Falcon-H1-layout
# model organism (models/falcon-h1-tiny, a small trained model): every task it was trained on, all
# eight conditions, items from evaluation seeds never used in training. Prints the table of
# mean scores with 95 % bootstrap CIs and writes the figures.
#   MODEL=models/qwen35-tiny ITEMS=50 bash scripts/demo.sh     # another organism, more items
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL="${MODEL:-models/falcon-h1-tiny}"
ITEMS="${ITEMS:-20}"
OUT="${OUT:-results/demo-$(basename "$MODEL")}"
TASKS="${TASKS:-dictionary,list,language:lexicon,persona,mixed:lexicon,drm,conjunction}"

cmake -S . -B build-demo -DCMAKE_BUILD_TYPE=Release -DHYLENS_BUILD_TESTS=OFF -DHYLENS_BUILD_EXAMPLES=ON > build-demo.log 2>&1 \
  || { cat build-demo.log; exit 1; }
cmake --build build-demo --target hylens_cli -j "$(nproc)"

rm -rf "$OUT"
./build-demo/examples/hylens experiment channels --model "$MODEL" --task "$TASKS" \
  --items "$ITEMS" --seeds 1,2,3 --out "$OUT"
echo
echo "Channel study on $MODEL ($OUT/summary.csv; per-item records in $OUT/items.jsonl):"
/usr/bin/python3 scripts/print_summary.py "$OUT"
/usr/bin/python3 scripts/plot_channels.py "$OUT"
