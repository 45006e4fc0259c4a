#!/bin/sh
# Dumps the study tasks' items (include/hylens/tasks) as JSON lines for training the organisms,
# through `hylens tasks --json` (built here if missing).
# Training items: seeds 1000..1199 (50 items each, 10,000 per task); evaluation items for the
# training-time monitor and the reference prompts: seed 1 (40 items). The model cards' accuracies
# are measured on seeds 1, 2, 3 by `hylens experiment channels`; no training item comes from
# seeds below 1000.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build-organisms/items}
build=$root/build-organisms
if [ ! -x "$build/examples/hylens" ]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DHYLENS_BUILD_TESTS=OFF -DHYLENS_BUILD_EXAMPLES=ON > /dev/null
    nice cmake --build "$build" --target hylens_cli -j "$(nproc)"
fi
mkdir -p "$out/train" "$out/eval"
train_seeds=$(seq -s, 1000 1199)
for t in dictionary list language persona mixed drm conjunction; do
    "$build/examples/hylens" tasks --task "$t" --seeds "$train_seeds" --items 50 --json > "$out/train/$t.jsonl"
    "$build/examples/hylens" tasks --task "$t" --seeds 1 --items 40 --json > "$out/eval/$t.jsonl"
done
