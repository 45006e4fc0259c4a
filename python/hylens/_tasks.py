"""The channel study's items, prompts and scorers (hylens.task_items, hylens.StudyPrompt,
hylens.score_answer): what `hylens experiment channels` generates, prefills, feeds and scores
for one item, so that a record of its items.jsonl can be rebuilt by hand, and an item studied
further (captures, interventions) on exactly the study's tokens. docs/python.md, "Study items
by hand"."""

import json

from . import _core
from ._experiment import _count, _seed_list


def task_items(task, seeds=(1,), items=10, start=0):
    """Items start .. start+items-1 of `task` for each seed, in that order, as dicts with the
    members of `hylens tasks --json` (task, seed, index, context, query, expected, alt_context,
    alt_expected, spans, fields). The same (task, seed, index) is the same item on every
    machine, and the item the channel study runs."""
    if not isinstance(task, str):
        raise TypeError(f"task_items: task must be a task name (str), got {task!r}")
    seeds = _seed_list(seeds, "task_items")
    items = _count(items, "items", "task_items", 0, 2**63 - 1)
    start = _count(start, "start", "task_items", 0, 2**63 - 1)
    return [json.loads(line) for line in _core._task_items(task, seeds, items, start)]


def task_info(task):
    """{'swap': whether the task's items carry a B context (the swap conditions run on it),
    'max_new': its answer length in tokens, 'description'} of a task name."""
    if not isinstance(task, str):
        raise TypeError(f"task_info: task must be a task name (str), got {task!r}")
    swap, max_new, description = _core._task_info(task)
    return {"swap": swap, "max_new": max_new, "description": description}


def _item_json(item, who):
    if not isinstance(item, dict):
        raise TypeError(f"{who}: item must be a dict of hylens.task_items, got {type(item).__name__}")
    return json.dumps(item)


def score_answer(item, text, condition="FULL"):
    """Scores the answer `text` (decoded, special tokens removed: StudyPrompt.decode) to `item`
    as the channel study does under `condition` (which source each channel came from: a swap
    condition scores against the B answer where the task does), with the rule rubric (no
    judge). Returns {'score', 'score_fields'} and 'scored_by' where a record has it."""
    if not isinstance(text, str):
        raise TypeError(f"score_answer: text must be a str, got {type(text).__name__}")
    if not isinstance(condition, str):
        raise TypeError(f"score_answer: condition must be a condition name (str), got {condition!r}")
    return json.loads(_core._score_answer(_item_json(item, "score_answer"), text, condition))


class StudyPrompt(_core.StudyPrompt):
    """The channel study's prompt of a chat family (hylens.StudyPrompt(tokenizer, family)):
    segments(item) gives the token ids it prefills and feeds; stop_ids, until_stop(ids) and
    decode(ids) turn generated ids into the answer text it scores."""

    def segments(self, item):
        """{'context': the context segment's ids (prefilled), 'query': the query segment's ids
        (fed after the edited cache), 'alt_context': the B context's ids (swap tasks only),
        'first_token' / 'first_token_b': the token of the query segment + the expected
        answer that covers the answer's first character (None without an answer)}. Where a swap condition runs, the study skips a
        swap item whose contexts differ in token length (skipped.jsonl)."""
        return json.loads(self._render(_item_json(item, "StudyPrompt.segments")))
