#!/usr/bin/env python3
"""Checks the relative links of Markdown files: each [text](path), [text](path#anchor) and
[text](#anchor) must name a file of the repository and, where it has one, an anchor that a heading
of that file makes (GitHub's rule: lower case, punctuation other than '-' and '_' dropped, spaces
to '-', a repeated heading gets -1, -2, ...). Links to the web (http:, https:, mailto:) are not
checked. Code blocks and inline code are skipped.

usage: check_links.py FILE.md...   exit 0 when every link resolves, 1 with one line per broken link.
"""
import os
import re
import sys

FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose(text):
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading):
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    heading = heading.replace("`", "").strip().lower()
    heading = re.sub(r"[^\w\- ]", "", heading)
    return heading.replace(" ", "-")


def anchors(path):
    seen = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", open(path, encoding="utf-8").read())):
        s = slug(heading)
        n = seen.get(s, 0)
        out.add(s if n == 0 else f"{s}-{n}")
        seen[s] = n + 1
    return out


def broken_links(path, cache):
    """The broken links of one file; cache holds the anchors of the files read so far."""
    for target in LINK.findall(prose(open(path, encoding="utf-8").read())):
        if re.match(r"^[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not os.path.exists(linked):
            yield f"{path}: link to a missing file: {target}"
            continue
        if anchor and linked.endswith(".md"):
            if linked not in cache:
                cache[linked] = anchors(linked)
            if anchor not in cache[linked]:
                yield f"{path}: no heading makes the anchor #{anchor} in {linked}: {target}"


def main(paths):
    if not paths:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        print(f"check_links.py: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    cache = {}
    return report([p for path in paths for p in broken_links(path, cache)], "link(s)", len(paths))


def report(problems, what, files):
    """Prints one line per problem and the count; the exit status (1 when there is any)."""
    for p in problems:
        print(p)
    print(f"{len(problems)} broken {what} in {files} file(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
