#!/bin/sh
# Trains one organism from its seed in five phases, each an --init-from run of train_organism.py
# on the previous phase's weights (docs/organisms.md, "From the seed"):
#   recite   the key-value lookup in its dense form (k=v recited, pairs held at 3)
#   full     every study task, with recite / pair / drill beside them (3 to 8 pairs)
#   inline   dictionary questions answered inside the user message (key two tokens from the value)
#   bridge   the first k tokens of the chat suffix between question and answer, k drawn per turn
#   dialogs  six study questions per context in chat turns, beside every study task
# The tokenizer has every recognition word and every lookup key and value as one token
# (--whole-words), and the circuit study's lookup prompts are in the mix from the full phase on.
#   training/train_from_seed.sh FAMILY WORK_DIR     (FAMILY: qwen35, falcon_h1 or granite_h)
# WORK_DIR/<phase>/ holds each phase's folder; WORK_DIR/dialogs is the organism (phases.json and
# training_log.csv carry the whole history). Each phase resumes if its folder has a checkpoint.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
family=$1
work=$2
py=${PYTHON:-/usr/bin/python3}
mkdir -p "$work"
full="recite=2,pair=1.5,dictionary=2.5,drill=1,list=1,mixed=1.5,language=0.7,persona=0.7,drm=1,conjunction=1,lookup=1"
dialogs="dialog_bridge=1,dialog_dictionary=3,dialog_list=2,dialog_mixed=1.5,dialog_drm=1.5,dialog_conjunction=1.5,\
recite=0.5,dictionary=0.7,list=0.5,mixed=0.7,drm=0.5,conjunction=0.5,language=0.7,persona=0.7,lookup=1"

# phase NAME PARENT STEPS STOP_AT ARGS...: one phase, skipped if it has already ended.
phase() {
    name=$1 parent=$2 steps=$3 stop=$4
    shift 4
    out="$work/$name"
    if [ -f "$out/done" ]; then return 0; fi
    set -- --family "$family" --seed 1 --steps "$steps" --stop-at "$stop" --export-every 250 \
        --out "$out" --ref-dir "$work/ref-$name" --stream "$name" "$@"
    if [ -f "$out/checkpoint.pt" ]; then
        set -- "$@" --resume
    elif [ -n "$parent" ]; then
        set -- "$@" --init-from "$work/$parent/checkpoint.pt"
    else
        set -- "$@" --whole-words
    fi
    nice "$py" "$here/train_organism.py" "$@"
    touch "$out/done"
}

# Granite 4.0 H's Mamba-2 layers learn the recited lookup later (recited values at 3 pairs 0.56
# after 1,000 steps from the seed, where Qwen3.5 and Falcon-H1 are at 0.97-0.99): twice the steps.
recite_steps=1000
if [ "$family" = granite_h ]; then recite_steps=2000; fi
phase recite "" 3000 "$recite_steps" --mix recite=3,dictionary=1,language=0.3,persona=0.3 --curriculum 1000 --warmup 100
phase full recite 2000 2000 --mix "$full" --warmup 50
phase inline full 1500 1000 --mix dialog_inline=3,recite=1 --batch 16 --curriculum 1000 --warmup 50
phase bridge inline 1500 250 --mix dialog_bridge=3,dialog_dictionary=1,dialog_inline=0.5 --batch 16 --curriculum 1000 --warmup 50
phase dialogs bridge 1000 1000 --mix "$dialogs" --batch 16 --curriculum 0.3 --warmup 50
