#!/usr/bin/env bash
# Interleaved hylens vs llama.cpp run on identical random-weight models (docs/performance.md).
#
# usage: compare_llamacpp.sh LLAMA_BENCH HYLENS OUT.jsonl MODELS_DIR
#   MODELS_DIR holds, per preset P and dtype D (f32, bf16), the GGUF P-D.gguf (make_random_gguf.py)
#   and the Hugging Face folder P-D/ (make_random_hf.py) with the same values.
# env: PRESETS="qwen35-0.8b granite-4.0-h-350m falcon-h1-0.5b"  DTYPES="f32 bf16"  THREADS="2 1"
#      REPS=3  PP=512  TG=64   (PP=0: decode only)
#      HYLENS_ARGS="--bf16-activations"   (extra options of hylens bench)
#      LLAMA_ARGS="-mmp 0"                (extra options of llama-bench; with HYLENS_ARGS="--no-mmap"
#                                          both engines read the weights into memory)
#      On a loaded machine also export OMP_WAIT_POLICY=PASSIVE: llama.cpp's spinning OpenMP
#      barrier collapses at 2 threads when no core is free (README.md).
# For each (threads, preset, dtype) it runs llama-bench and then hylens bench back to back (the
# order alternates between configurations), so both see the same machine load; every line of
# OUT.jsonl is tagged with "engine", and the 1-minute load average before each run goes to
# OUT.log. summarize_compare.py turns OUT.jsonl into the ratio table.
set -euo pipefail
llama=$1; hylens=$2; out=$3; models=$4
presets=${PRESETS:-"qwen35-0.8b granite-4.0-h-350m falcon-h1-0.5b"}
dtypes=${DTYPES:-"f32 bf16"}
threads=${THREADS:-"2 1"}
reps=${REPS:-3}; pp=${PP:-512}; tg=${TG:-64}
read -r -a hylens_args <<< "${HYLENS_ARGS:-}"
read -r -a llama_args <<< "${LLAMA_ARGS:-}"
log=${out%.jsonl}.log
run_llama() {  # preset dtype threads
  "$llama" -m "$models/$1-$2.gguf" -p "$pp" -n "$tg" -t "$3" -r "$reps" "${llama_args[@]}" -o jsonl 2>>"$log" |
    sed "s/^{/{\"engine\": \"llama.cpp\", \"preset\": \"$1\", \"dtype\": \"$2\", /" >> "$out"
}
run_hylens() {
  "$hylens" bench --model "$models/$1-$2" -p "$pp" -n "$tg" -t "$3" -r "$reps" "${hylens_args[@]}" --json 2>>"$log" |
    sed "s/^{/{\"engine\": \"hylens\", \"preset\": \"$1\", \"dtype\": \"$2\", /" >> "$out"
}
i=0
for t in $threads; do
  for p in $presets; do
    for d in $dtypes; do
      echo "$(date -u +%FT%TZ) $p $d t=$t load=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$log"
      if (( i % 2 == 0 )); then run_llama "$p" "$d" "$t"; run_hylens "$p" "$d" "$t";
      else run_hylens "$p" "$d" "$t"; run_llama "$p" "$d" "$t"; fi
      i=$((i + 1))
    done
  done
done
echo "$(date -u +%FT%TZ) done load=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$log"
