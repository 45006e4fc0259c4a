#!/bin/sh
# The studies of one organism for its model card: the channel study on every task it was
# trained on, all eight conditions, seeds 1-3 (never used in training), ITEMS items per task and
# seed; with CIRCUIT_OUT (the Qwen3.5-layout organism's card) also the circuit study the card
# reports: variant chat8, seed 1, 25 pairs per configuration (docs/study_circuit.md).
#   training/study_organism.sh models/qwen35-tiny build-organisms/study/qwen35-tiny [ITEMS] [CIRCUIT_OUT]
# CIRCUIT_OUT must not hold an earlier run (the circuit study refuses to overwrite one), so a
# retrained organism's card never mixes in records of its old weights.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
model=$1
out=$2
items=${3:-50}
circuit_out=${4:-}
cli=${HYLENS_CLI:-$root/build-organisms/examples/hylens}
nice "$cli" experiment channels --model "$model" --task dictionary,list,language,persona,mixed,drm,conjunction \
    --seeds 1,2,3 --items "$items" --out "$out" --resume
if [ -n "$circuit_out" ]; then
    nice "$cli" experiment circuit --model "$model" --variant chat8 --per-config 25 --seed 1 --no-progress \
        --out "$circuit_out"
fi
