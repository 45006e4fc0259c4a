# SPDX-License-Identifier: Apache-2.0
"""A small byte-level BPE (GPT-2 style) trained on the organisms' training text, written as a
Hugging Face tokenizer.json that hylens' tokenizer reads. The Python encoder here implements
the same pipeline (added tokens split out first, GPT-2's pre-tokenizer regex, byte-level BPE);
tests/organisms checks that hylens encodes the training samples to the same ids."""
import collections
import json
import re

# GPT-2's pre-tokenizer regex with \p{L} -> [^\W\d_] and \p{N} -> \d (equal on the training text:
# letters and decimal digits; tests/organisms checks hylens' encoding of the samples).
_PRE = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


B2U = bytes_to_unicode()


def pretokenize(text):
    return ["".join(B2U[b] for b in w.encode()) for w in _PRE.findall(text)]


def train(texts, max_merges):
    """texts: iterable of plain strings (no special tokens). Returns the merges list; merging stops
    at max_merges or when every distinct word is one token. Ties: the lexicographically smallest pair."""
    words = collections.Counter()
    for t in texts:
        words.update(pretokenize(t))
    seqs = {w: list(w) for w in words}
    merges = []
    while len(merges) < max_merges:
        pairs = collections.Counter()
        for w, s in seqs.items():
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += words[w]
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        a, b = best
        for w, s in seqs.items():
            i, out = 0, []
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    return merges


class Tokenizer:
    def __init__(self, merges, specials):
        self.vocab = {ch: i for i, ch in enumerate(B2U[b] for b in range(256))}
        for a, b in merges:
            self.vocab.setdefault(a + b, len(self.vocab))
        self.merges = merges
        self.rank = {m: i for i, m in enumerate(merges)}
        self.specials = {s: len(self.vocab) + i for i, s in enumerate(specials)}
        self.id_to_tok = {i: t for t, i in self.vocab.items()}
        self.id_to_tok.update({i: s for s, i in self.specials.items()})
        self.U2B = {u: b for b, u in B2U.items()}
        self._cache = {}
        alt = "|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True))
        self._split = re.compile(f"({alt})") if specials else None

    def __len__(self):
        return len(self.vocab) + len(self.specials)

    def _word(self, w):
        if w in self._cache:
            return self._cache[w]
        s = list(w)
        while len(s) > 1:
            best = min(range(len(s) - 1), key=lambda i: (self.rank.get((s[i], s[i + 1]), 1 << 30), i))
            if (s[best], s[best + 1]) not in self.rank:
                break
            s[best:best + 2] = [s[best] + s[best + 1]]
        ids = [self.vocab[t] for t in s]
        self._cache[w] = ids
        return ids

    def encode(self, text):
        parts = self._split.split(text) if self._split else [text]
        ids = []
        for p in parts:
            if not p:
                continue
            if p in self.specials:
                ids.append(self.specials[p])
            else:
                for w in pretokenize(p):
                    ids.extend(self._word(w))
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            t = self.id_to_tok[i]
            if i in self.specials.values():
                out += t.encode()
            else:
                out += bytes(self.U2B[c] for c in t)
        return out.decode("utf-8", errors="replace")

    @classmethod
    def from_json(cls, path):
        """The tokenizer a tokenizer.json written by to_json() holds (merges and added tokens), checked
        to give the same vocabulary ids as the file."""
        with open(path) as f:
            j = json.load(f)
        merges = [tuple(m.split(" ")) for m in j["model"]["merges"]]
        specials = [a["content"] for a in sorted(j["added_tokens"], key=lambda a: a["id"])]
        tok = cls(merges, specials)
        if tok.vocab != j["model"]["vocab"] or any(tok.specials[a["content"]] != a["id"] for a in j["added_tokens"]):
            raise ValueError(f"{path}: the merges do not rebuild the file's vocabulary ids")
        return tok

    def to_json(self):
        added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                  "normalized": False, "special": s not in ("<think>", "</think>")}
                 for s, i in self.specials.items()]
        return {
            "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                      "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": self.vocab, "merges": [f"{a} {b}" for a, b in self.merges]},
        }
