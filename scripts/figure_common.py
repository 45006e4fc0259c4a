"""Shared checks of the figure scripts (scripts/plot_*.py): what run.json says about the state of
a result folder, the n of what a figure draws, and the visible marks of what it cannot draw.

A figure never misstates a result: a folder whose run.json status is not "complete" (a merge of
unfinished shards, a killed run) gets its state in the figure's title, in red, and on stderr;
n is given as a range when the drawn rows differ in n (and that is flagged); a condition
without a value is drawn as an "n/a" mark at its place, never as an empty (zero) bar; and a
folder with nothing to draw for the asked metric gives a one-line message and exit status 1
(fail), never an empty figure or a traceback.
"""

import json
import math
import os
import sys

WARN_COLOR = "#c00000"


def fail(script, msg):
    """One line on stderr, exit status 1."""
    print(f"{script}: {msg}", file=sys.stderr)
    sys.exit(1)


def warn(script, msg):
    print(f"{script}: warning: {msg}", file=sys.stderr)


def read_json(script, path, what="result folder"):
    """The JSON document at path, or a one-line exit when it is missing or unreadable."""
    if not os.path.exists(path):
        fail(script, f"{path} does not exist (not a {what})")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(script, f"{path} cannot be read ({type(e).__name__}: {e})")


def read_run(script, folder, required=True):
    """run.json of the folder ({} when it has none and it is not required)."""
    path = os.path.join(folder, "run.json")
    if not required and not os.path.exists(path):
        return {}
    run = read_json(script, path)
    if not isinstance(run, dict):
        fail(script, f"{path} is not a run.json (not a JSON object)")
    return run


def shard_of(run):
    s = run.get("study", {}) if isinstance(run.get("study"), dict) else {}
    shard = s.get("shard")
    return shard if shard and shard != "0/1" else None


def status_warning(run):
    """None when run.json's status is "complete" (or not given, an older folder); else what the
    folder is: "INCOMPLETE: shard 1/2 missing", "RUNNING: the study has not finished", ..."""
    status = run.get("status") if isinstance(run, dict) else None
    if status is None or status == "complete":
        return None
    parts = []
    missing = [str(m) for m in run.get("missing_shards") or []]
    if missing:
        parts.append(f"{'shards' if len(missing) > 1 else 'shard'} {', '.join(missing)} missing")
    unfinished = [m for m in run.get("merged_from") or []
                  if isinstance(m, dict) and m.get("status") not in (None, "complete")]
    for m in unfinished:
        parts.append(f"shard {m.get('shard', '?')} unfinished ({m.get('status')})")
    if status == "running":
        parts.insert(0, "the study has not finished (killed or still running)")
    elif status == "merging":
        parts.insert(0, "the merge has not finished")
    elif not parts:
        parts.append(f"run.json status '{status}'")
    return f"{str(status).upper()}: {'; '.join(parts)}"


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)


def num(x):
    """x as a float: a JSON number, or a summary.csv cell ('' or None is NaN, 'inf' inf); NaN for
    anything else (null, a string that is no number)."""
    if isinstance(x, str):
        try:
            return float(x) if x != "" else math.nan
        except ValueError:
            return math.nan
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan


def error_bars(vals, lo, hi):
    """matplotlib's yerr of bars at vals with intervals [lo, hi]: 0 where a value or a bound is
    NaN (no bar, no whisker), never negative."""
    return [[max(v - l, 0.0) if v == v and l == l else 0.0 for v, l in zip(vals, lo)],
            [max(h - v, 0.0) if v == v and h == h else 0.0 for v, h in zip(vals, hi)]]


def n_range(ns):
    """"n = 8", or "n = 6-7" when the drawn rows differ; "n = ?" when none is known."""
    ns = sorted({int(n) for n in ns if is_num(n)})
    if not ns:
        return "n = ?"
    return f"n = {ns[0]}" if len(ns) == 1 else f"n = {ns[0]}-{ns[-1]}"


def unequal(ns):
    return len({int(n) for n in ns if is_num(n)}) > 1


def flag_figure(fig, title, warnings, fontsize=None):
    """The figure's suptitle: its title, and above it the warnings (red, bold) when there are
    any (tight_layout, matplotlib >= 3.3, keeps the suptitle's lines clear of the axes)."""
    warnings = [w for w in warnings if w]
    kw = {"fontsize": fontsize} if fontsize else {}
    if not warnings:
        if title:
            fig.suptitle(title, **kw)
        return
    import textwrap

    size = fontsize or 12
    width = max(30, int(fig.get_figwidth() * 72 / (0.62 * size)))  # characters a line holds
    lines = [line for w in warnings for line in textwrap.wrap(w, width)]
    text = "\n".join(lines) + ("\n" + title if title else "")
    fig.suptitle(text, color=WARN_COLOR, fontweight="bold", **kw)


def na_mark(ax, x, color="#b00000", fontsize=7):
    """A visible "n/a" at x on the axis (no bar: the value is not known, not 0)."""
    import matplotlib.transforms as mtransforms

    tr = mtransforms.blended_transform_factory(ax.transData, ax.transAxes)
    return ax.text(x, 0.02, "n/a", transform=tr, ha="center", va="bottom", rotation=90, fontsize=fontsize,
                   color=color, fontweight="bold", gid="na")


def ratio_label(rel):
    """The "% of FULL" label: a percentage, or an unbounded ratio as "∞" / "-∞"; None when NaN."""
    if math.isnan(rel):
        return None
    if math.isinf(rel):
        return "∞" if rel > 0 else "-∞"
    return f"{100 * rel:.0f}%"


def save_figure(fig, out, dpi):
    """Writes the figure to `out` through a temporary file beside it, renamed into place: a
    script killed while writing left a 0-byte or cut PNG under the figure's name."""
    folder, name = os.path.split(out)
    base, ext = os.path.splitext(name)
    # Hidden, so a *.png glob never takes one a killed script left; the extension tells
    # matplotlib the format.
    tmp = os.path.join(folder, f".{base}.tmp{os.getpid()}{ext}")
    try:
        fig.savefig(tmp, dpi=dpi)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
