#!/bin/sh
# Channel study of one organism for its model card: every task it was trained on, all eight
# conditions, seeds 1-3 (never used in training), ITEMS items per task and seed.
#   training/study_organism.sh models/qwen35-tiny build-organisms/study/qwen35-tiny [ITEMS]
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
model=$1
out=$2
items=${3:-50}
cli=${HYLENS_CLI:-$root/build-organisms/examples/hylens}
nice "$cli" experiment channels --model "$model" --task dictionary,list,language,persona,mixed,drm,conjunction \
    --seeds 1,2,3 --items "$items" --out "$out" --resume
