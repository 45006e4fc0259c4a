// Variants of the real tokenizer.json files, built by editing the JSON, to cover components
// that the four real files do not use. tests/text/test_tokenizer_reference.cpp applies the same
// edits in C++ (keep the two in step).
'use strict';

const variants = {
  // Llama-2 as newer transformers versions save it: Metaspace pre-tokenizer instead of the
  // Prepend + Replace normalizer.
  llama2_metaspace: {
    base: 'llama2',
    edit(j) {
      j.normalizer = null;
      j.pre_tokenizer = {type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false};
      j.decoder = {type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false};
      return j;
    },
  },
  // Qwen3's vocabulary with GPT-2's pipeline (ByteLevel regex, prefix space, trimmed offsets),
  // Digits and Punctuation splits, and added tokens with lstrip/rstrip/single_word/normalized.
  qwen3_gpt2: {
    base: 'qwen3',
    edit(j) {
      j.normalizer = {type: 'Sequence', normalizers: [{type: 'NFKC'}, {type: 'Strip', strip_left: false, strip_right: true}]};
      j.pre_tokenizer = {type: 'Sequence', pretokenizers: [
        {type: 'Digits', individual_digits: true},
        {type: 'Punctuation', behavior: 'Contiguous'},
        {type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true}]};
      j.post_processor = {type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true};
      for (const t of j.added_tokens) {
        if (t.content === '<|im_start|>') t.lstrip = true;
        if (t.content === '<|im_end|>') t.rstrip = true;
        if (t.content === '<|endoftext|>') t.single_word = true;
        if (t.content === '<think>') { t.normalized = true; t.special = false; }
      }
      return j;
    },
  },
};
module.exports = variants;
