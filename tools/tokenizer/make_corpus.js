#!/usr/bin/env node
// Writes the deterministic tokenizer test corpus (raw bytes, one line per '\n') to argv[2].
// It mixes English, CJK, Cyrillic, Arabic, emoji (ZWJ sequences, flags, skin tones), code,
// digits, long whitespace runs, special-token strings, decomposed Unicode and invalid UTF-8.
// Same seed, same bytes: the expected ids in tests/data/tokenizer/ depend on it.
'use strict';
const fs = require('fs');

let state = 0x9e3779b9;  // mulberry32: small, deterministic, no dependency
function rand() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const many = (f, lo, hi, sep = ' ') => Array.from({length: int(lo, hi)}, f).join(sep);

const english = ('the quick brown fox jumps over lazy dog apple banana cherry value key dictionary ' +
  'question answer model token layer attention state cache memory research paper ' +
  'What is The value of It\'s they\'re we\'ve I\'m you\'ll he\'d DON\'T WE\'LL Hello World ' +
  'internationalization tokenization misunderstanding supercalifragilistic don\'t can\'t ' +
  'CamelCaseIdentifier snake_case_name naïve café résumé coöperate façade').split(' ');
const punct = ['.', ',', '!', '?', ';', ':', '...', '—', '–', '"', '\'', '(', ')', '**', '``', '«', '»', '“', '”'];
const chinese = ['你好', '世界', '今天天气很好', '机器学习', '我们', '语言模型', '中华人民共和国', '注意力机制', '。', '，', '！'];
const japanese = ['こんにちは', 'カタカナ', 'ひらがな', '東京都', 'トークナイザー', 'です', 'ました', '日本語のテキスト'];
const korean = ['안녕하세요', '세계', '한국어', '토크나이저', '감사합니다', '서울'];
const cyrillic = ['Привет', 'мир', 'Москва', 'токенизатор', 'ЯЗЫК', 'модель', 'внимание', 'Ёлка', 'щука', 'Україна', 'їжак'];
const arabic = ['مرحبا', 'بالعالم', 'اللغة', 'العربية', 'نموذج', 'كتاب', 'السلام عليكم', '١٢٣٤', '٫٥', 'ﻻ'];
const emoji = ['😀', '😂', '👍', '👍🏽', '👩‍💻', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇫🇷', '🇯🇵', '❤️', '✨', '🧑🏿‍🚀', '1️⃣', '#️⃣',
  '🤷‍♀️', '🐈‍⬛', '🫠', '©', '™', '☃', '⚡', '𝔘𝔫𝔦𝔠𝔬𝔡𝔢', '𝟘𝟙𝟚'];
const code = ['int main(int argc, char** argv) {', '    return 0;', '}', 'for (auto& x : xs) { y += x * 2; }',
  'def f(x):\treturn x**2 + 1', 'if __name__ == "__main__":', '#include <vector>', 'std::vector<int> v{1, 2, 3};',
  '{"key": "value", "n": 42, "list": [1, 2.5e-3, null]}', 'SELECT * FROM users WHERE id = 7;',
  'x = a && b || !c; // comment', '/* block */', '<div class="x">text</div>', 'a->b.c[0] += 0x1F;',
  '$ git commit -m "msg"', 'λx. x + 1', 'fn main() -> Result<(), Box<dyn Error>> {', '    let s = "tab\tinside";'];
const specials = ['<|im_start|>', '<|im_end|>', '<|endoftext|>', '<|begin_of_text|>', '<|end_of_text|>', '<|eot_id|>',
  '<s>', '</s>', '<unk>', '<bos>', '<eos>', '<pad>', '<start_of_turn>', '<end_of_turn>', '<mask>',
  '<think>', '</think>', '<|fim_prefix|>', '<tool_call>', '<|start_header_id|>', '<|reserved_special_token_3|>',
  '<|im_start', 'im_end|>', '<<s>>', '<|im_start|><|im_end|>', '[INST]', '<0x41>'];
const spaces = [' ', '  ', '   ', '\t', '\t\t', ' \t ', '\u00a0', '\u3000', '\u2009', '\u2003', '\u0085', '\u200b',
  '\r', ' \r ', '\u2028', '\u000b', '\u000c', '\u180e', '\ufeff'];
const decomposed = ['e\u0301', 'a\u0308', 'o\u0302\u0323', '\u1100\u1161\u11a8', '\u1112\u1161\u11ab\u1100\u1173\u11af',
  'A\u030a', '\u212b', '\ufb01', '\uff21\uff22\uff23', '\u0f73', 'a\u0308\u0323b', '\u0344', 'n\u0303', 'u\u0308\u0304',
  '\u00c5\u0327', '\u1e0b\u0323', 'e\u0301\u0301'];

function digits() {
  return pick([() => String(int(0, 9)), () => String(int(10, 999)), () => String(int(1000, 99999999)),
    () => String(int(1, 9)) + '0'.repeat(int(3, 20)), () => `${int(0, 999)}.${int(0, 99999)}`,
    () => `${int(1, 999)},${String(int(0, 999)).padStart(3, '0')},${String(int(0, 999)).padStart(3, '0')}`,
    () => `+1 (${int(200, 999)}) ${int(200, 999)}-${int(1000, 9999)}`, () => `${int(1, 12)}/${int(1, 28)}/20${int(10, 30)}`,
    () => '3.14159265358979323846', () => '٣٤٥', () => '१२३', () => '½ ⅓ ²³']) ();
}
function english_sentence() {
  let s = many(() => pick(english), 3, 14);
  if (rand() < 0.3) s = s[0].toUpperCase() + s.slice(1);
  if (rand() < 0.5) s += pick(punct);
  if (rand() < 0.2) s += ' ' + digits();
  return s;
}
function whitespace_run() {
  const n = int(2, 60);
  return pick([' ', '\t', ' \t', '\u00a0', '\r', ' \r\t']).repeat(n);
}
function invalid_utf8() {  // Buffer of bytes that are not valid UTF-8
  const kinds = [
    () => [int(0x80, 0xbf)],                         // lone continuation byte
    () => [int(0xc2, 0xdf)],                         // truncated 2-byte sequence
    () => [0xe4, 0xbd],                              // truncated 3-byte sequence
    () => [0xf0, 0x9f, 0x98],                        // truncated 4-byte emoji
    () => [0xc0, 0xaf],                              // overlong '/'
    () => [0xe0, 0x80, 0xaf],                        // overlong 3-byte
    () => [0xed, 0xa0, 0x80],                        // UTF-16 surrogate
    () => [0xf4, 0x90, 0x80, 0x80],                  // above U+10FFFF
    () => [int(0xf5, 0xff)],                         // never-valid lead byte
    () => [0xff, 0xfe],
    () => Array.from({length: int(2, 8)}, () => int(0x80, 0xff)),
  ];
  return Buffer.from(pick(kinds)());
}
const segment_makers = [
  () => english_sentence(), () => english_sentence(), () => english_sentence(),
  () => many(() => pick(chinese), 1, 6, ''), () => many(() => pick(japanese), 1, 4, ''), () => many(() => pick(korean), 1, 4),
  () => many(() => pick(cyrillic), 2, 8), () => many(() => pick(arabic), 2, 8),
  () => many(() => pick(emoji), 1, 5, pick(['', ' '])), () => pick(code), () => digits(),
  () => whitespace_run(), () => pick(specials), () => pick(spaces), () => pick(decomposed) + pick(['', 'x', ' ', 'abc']),
  () => pick(punct).repeat(int(1, 5)),
];

const out = [];
const push = (parts) => out.push(Buffer.concat(parts.map((p) => Buffer.isBuffer(p) ? p : Buffer.from(p, 'utf8'))));
// Fixed edge cases first.
['', ' ', '  ', 'a', ' a', 'a ', '\t', '\r', 'Hello world', ' Hello world ', 'hello' + ' '.repeat(200) + 'world',
  'a'.repeat(3000), '1'.repeat(500), '😀'.repeat(100), '\u200d'.repeat(10), '<|im_start|>user\nx', '<s> </s>',
  '<|im_start|>user', '<|im_end|>', ' <|im_end|> ', '<|endoftext|><|endoftext|>', 'x<bos>y', '<start_of_turn>model',
  'ab\u0301cd', '\ufeffBOM at start'].forEach((s) => push([s.replace(/\n/g, ' ')]));
for (let i = 0; i < 256; i++) push([Buffer.from(i === 10 ? [0x20] : [i]), 'x']);  // every single byte
while (out.length < 10200) {
  const r = rand();
  const parts = [];
  if (r < 0.08) {
    parts.push(invalid_utf8());
    parts.push(pick(segment_makers)());
    if (rand() < 0.5) parts.push(invalid_utf8());
  } else {
    const n = int(1, 5);
    for (let k = 0; k < n; k++) {
      parts.push(pick(segment_makers)());
      parts.push(pick([' ', ' ', '', '  ', ', ', '\t', ' - ']));
      if (rand() < 0.03) parts.push(invalid_utf8());
    }
  }
  let line = Buffer.concat(parts.map((p) => Buffer.isBuffer(p) ? p : Buffer.from(p, 'utf8')));
  line = Buffer.from(line.map((b) => (b === 0x0a ? 0x20 : b)));  // '\n' is the line separator
  out.push(line);
}
fs.writeFileSync(process.argv[2] || 'corpus.txt', Buffer.concat(out.flatMap((l) => [l, Buffer.from([0x0a])])));
