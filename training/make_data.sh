#!/bin/sh
# Dumps the study tasks' items (include/hylens/tasks) as JSON lines for training the organisms.
# Training items: seeds 1000..1199 (50 items each, 10,000 per task); evaluation items for the
# training-time monitor and the reference prompts: seed 1 (40 items). The model cards' accuracies
# are measured on seeds 1, 2, 3 by `hylens experiment channels`; no training item comes from
# seeds below 1000.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build-organisms/items}
bin=$root/build-organisms/dump_items
mkdir -p "$out/train" "$out/eval"
nice g++ -std=c++20 -O1 -I"$root/include" "$root/training/dump_items.cpp" -o "$bin" -lcld2 -lutf8proc -lpcre2-8
for t in dictionary list language persona mixed drm conjunction; do
    "$bin" "$t" 1000 200 50 > "$out/train/$t.jsonl"
    "$bin" "$t" 1 1 40 > "$out/eval/$t.jsonl"
done
