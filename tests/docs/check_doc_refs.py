#!/usr/bin/env python3
"""Checks the references to documents written in prose and comments (where check_links.py checks
Markdown links): every name of a Markdown file, `docs/kernels.md` or a bare `families.md`,
must name a file of the repository (looked up beside the referring file, at the root, then in
docs/), and a section named right after it must be a heading of that file:

    docs/performance.md, "Side by side with llama.cpp"   a heading that starts with the quoted text
    docs/performance.md, § "hylens bench"                 (or the bold title that opens a paragraph
                                                          or a list item; backticks and a leading
                                                          or trailing "..." are ignored, case is not)
    families.md §3.6.2, protocols.md §A.4                 a heading numbered 3.6.2, A.4

A section sign followed by anything else (`§ Dispatch`) is reported: quote the title. Comment
markers at the start of a continued line (//, ///, #, *) are skipped, so a reference may wrap.

usage: check_doc_refs.py ROOT [FILE...]   with only ROOT, every source and Markdown file under it
(build folders, .git, tests/golden and node_modules left out). Exit 0 when every reference
resolves, 1 with one line per broken reference.
"""
import os
import re
import sys

from check_links import FENCE, HEADING, report  # the same headings as the link check

SOURCE_EXT = (".hpp", ".cpp", ".h", ".c", ".py", ".sh", ".cmake", ".md", ".txt", ".toml")
SKIP_DIRS = {".git", "node_modules", "golden", "links_fixture", "refs_fixture"}
MD_NAME = re.compile(r"(?<![\w/.:-])((?:\.\./|[\w-]+/)*[\w-]+\.md)\b")
CONTINUATION = re.compile(r"\s*\n\s*(?:///?|#|\*)?\s*")
QUOTED = re.compile(r'\)?(?:,\s*|\s+)(?:§\s*)?\\?"([^"\\\n]{2,}?)\\?"')
NUMBERED = re.compile(r"\)?\s*,?\s*§\s*((?:[A-Z]\.)?\d+(?:\.\d+)*)")
UNQUOTED = re.compile(r"\)?(?:,\s*|\s+)§\s*(?!(?:[A-Z]\.)?\d|[\"\\])(\S+)")
BOLD_LEAD = re.compile(r"^(?:[ \t]*[-*][ \t]+)?\*\*([^*\n]+?)\*\*", re.M)  # a paragraph's bold title


def source_files(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("build") and not x.startswith("."))
        for f in sorted(files):
            if f.endswith(SOURCE_EXT):
                yield os.path.join(d, f)


def headings(path, cache):
    if path not in cache:
        text = FENCE.sub("", open(path, encoding="utf-8").read())
        found = HEADING.findall(text) + BOLD_LEAD.findall(text)
        cache[path] = [h.replace("`", "").strip() for h in found]
    return cache[path]


def resolve(root, referrer, name):
    for base in (os.path.dirname(referrer), root, os.path.join(root, "docs")):
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(p):
            return p
    return None


def title_matches(title, heads):
    t = title.replace("`", "").strip().strip(".…").strip().lower()
    return any(h.lower().startswith(t) or (title.lstrip().startswith(("...", "…")) and t in h.lower()) for h in heads)


def number_matches(number, heads):
    return any(re.match(re.escape(number) + r"(?:\.?\s)", h) for h in heads)


def broken_refs(root, path, cache):
    text = open(path, encoding="utf-8", errors="replace").read()
    rel = os.path.relpath(path, root)
    for m in MD_NAME.finditer(text):
        name = m.group(1)
        if re.fullmatch(r"[A-Z_]+\.md", name) and name != "README.md":
            continue  # a placeholder in a usage line (FILE.md)
        line = text.count("\n", 0, m.start()) + 1
        if "PASS_REGULAR_EXPRESSION" in text[text.rfind("\n", 0, m.start()) + 1:text.find("\n", m.end())]:
            continue  # a test's expected output: names a checker must report
        before = text[max(0, m.start() - 40):m.start()]
        if re.search(r"https?://\S*$", before):
            continue  # part of a web address
        target = resolve(root, path, name)
        if target is None:
            yield f"{rel}:{line}: no file {name} in the repository"
            continue
        after = CONTINUATION.sub(" ", text[m.end():m.end() + 400])
        if q := QUOTED.match(after):
            if not title_matches(q.group(1), headings(target, cache)):
                yield f'{rel}:{line}: no heading of {os.path.relpath(target, root)} starts with "{q.group(1)}"'
        elif n := NUMBERED.match(after):
            if not number_matches(n.group(1), headings(target, cache)):
                yield f"{rel}:{line}: no heading of {os.path.relpath(target, root)} is numbered {n.group(1)}"
        elif u := UNQUOTED.match(after):
            yield f'{rel}:{line}: section "{u.group(1)}" of {name} not quoted: write {name}, "Heading"'


def main(argv):
    if not argv or not os.path.isdir(argv[0]):
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    root = os.path.abspath(argv[0])
    paths = [os.path.abspath(p) for p in argv[1:]] or list(source_files(root))
    cache = {}
    return report([p for path in paths for p in broken_refs(root, path, cache)], "reference(s)", len(paths))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
