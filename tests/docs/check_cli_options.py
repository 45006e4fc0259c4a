#!/usr/bin/env python3
"""Checks the hylens command lines written in Markdown against the tool itself: every
`hylens <command> [<study>] --option ...` in a code block or in inline code must name a command
the tool has, and each long option on it (`--items`, `--no-mmap`) must be one that command's
`--help` lists. Docs drift when an option is renamed or dropped; this finds it.

What counts as a command line: a line of a fenced code block, or the text of an inline code span,
holding `hylens` (or a path ending in `/hylens`) followed by one of the tool's commands; the
options are read up to the end of the span, or in a code block up to a ` # ` comment, and go on
into the next lines while a line ends in a backslash or the next one starts (indented) with `[`
or `--` (the synopses of docs/study_*.md). Prose is not read: "hylens generate stops unless
`--no-stop`" names an option outside any command line.

usage: check_cli_options.py HYLENS_CLI FILE.md...   Exit 0 when every option is known, 1 with one
line per unknown command or option.
"""
import re
import subprocess
import sys

FENCE = re.compile(r"^\s*(```|~~~)")
CALL = re.compile(r"(?:^|[\s`(/\"'])hylens\s+([a-z][a-z-]*)(?:\s+([a-z][a-z-]*))?")
LONG = re.compile(r"(?<![\w-])--([a-z0-9][a-z0-9-]*)")
CONTINUED = re.compile(r"^\s+(\[|--)")


def help_text(cli, words):
    r = subprocess.run([cli, *words, "--help"], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


class Tool:
    """The commands of the tool and the long options of each, read from its --help."""

    def __init__(self, cli):
        self.cli = cli
        rc, text = help_text(cli, [])
        if rc != 0:
            sys.exit(f"{cli} --help failed (exit {rc}):\n{text}")
        # "commands:" lists one per line: two spaces, the name, then its summary
        self.commands = set(re.findall(r"^  ([a-z][a-z-]*)\s", text.split("commands:", 1)[-1], re.M))
        rc, text = help_text(cli, ["experiment"])
        self.studies = set(re.findall(r"^  ([a-z][a-z-]*)\s", text.split("Subcommands:", 1)[-1], re.M)) if rc == 0 else set()
        self.options = {}

    def known(self, words):
        key = tuple(words)
        if key not in self.options:
            rc, text = help_text(self.cli, words)
            self.options[key] = set(LONG.findall(text)) | {"help", "version"} if rc == 0 else None
        return self.options[key]


def command_lines(path):
    """(line number, text after `hylens`) of each command line of a Markdown file."""
    lines = open(path, encoding="utf-8").read().split("\n")
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if FENCE.match(line):
            in_fence = not in_fence
            i += 1
            continue
        if in_fence:
            m = CALL.search(line)
            if m:
                text = line[m.start(1):]
                j = i
                while True:
                    cut = text.find(" # ")
                    if cut >= 0:
                        text = text[:cut]
                        break
                    nxt = lines[j + 1] if j + 1 < len(lines) else ""
                    if text.rstrip().endswith("\\") or (CONTINUED.match(nxt) and not FENCE.match(nxt)):
                        j += 1
                        text = text.rstrip().rstrip("\\") + " " + nxt
                    else:
                        break
                yield i + 1, text
                i = j + 1
                continue
        else:
            # inline code spans: the text between pairs of backticks
            for span in re.findall(r"`([^`]+)`", line):
                m = CALL.search(span)
                if m:
                    yield i + 1, span[m.start(1):]
        i += 1


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    tool = Tool(argv[1])
    problems = 0
    files = 0
    checked = 0
    for path in argv[2:]:
        files += 1
        for number, text in command_lines(path):
            m = re.match(r"([a-z][a-z-]*)(?:\s+([a-z][a-z-]*))?", text)
            command, sub = m.group(1), m.group(2)
            if command not in tool.commands:
                continue  # prose that happens to follow "hylens" ("hylens reads", "hylens tool")
            words = [command]
            if command == "experiment" and sub in tool.studies:
                words.append(sub)
            known = tool.known(words)
            checked += 1
            if known is None:
                print(f"{path}:{number}: hylens {' '.join(words)} --help fails")
                problems += 1
                continue
            for opt in LONG.findall(text):
                if opt not in known:
                    print(f"{path}:{number}: hylens {' '.join(words)} has no option --{opt}")
                    problems += 1
    print(f"{problems} unknown option(s) in {checked} command line(s) of {files} file(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
