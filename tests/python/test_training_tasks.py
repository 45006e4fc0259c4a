"""The organisms' membership training tasks (training/train_organism.py: check_*, ask_*,
ask_bridge_*), checked on items the hylens tool dumps, without torch: which words are probed and
what their answers are, and how a turn is rendered into tokens (the shipped qwen35-tiny
tokenizer), including that the bridge at its shortest gap is the drill's own turn."""

import random
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR

sys.path.insert(0, str(SOURCE_DIR / "training"))
import bpe  # noqa: E402
import train_organism as T  # noqa: E402

TASKS = ("drm", "conjunction")
QUESTION = "Was the word {} in the list? Answer yes or no."


@pytest.fixture(scope="module")
def pool(cli, tmp_path_factory):
    folder = tmp_path_factory.mktemp("items")
    for task in T.TASKS:
        out = subprocess.run([cli, "tasks", "--task", task, "--seeds", "1000,1001", "--items", "50", "--json"],
                             capture_output=True, text=True, check=True).stdout
        (folder / f"{task}.jsonl").write_text(out)
    return T.Pool(str(folder))


@pytest.fixture(scope="module")
def tok():
    return bpe.Tokenizer.from_json(str(SOURCE_DIR / "models" / "qwen35-tiny" / "tokenizer.json"))


def studied(context):
    """The studied words of a "Study these words: a, b, c." context."""
    assert context.startswith("Study these words: ") and context.endswith("."), context
    return context[len("Study these words: "):-1].split(", ")


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("level", [0.0, 0.5, 1.0])
def test_check_probes_answer_by_the_list(pool, task, level):
    rng = random.Random(f"check:{task}:{level}")
    for _ in range(200):
        item = T.AUX[f"check_{task}"](pool, rng, level)
        words = studied(item["context"])
        if level == 0.0:
            assert len(words) == T.CURRICULUM_MIN
        probes = [w.strip() for w, _ in item["turns"]]
        assert len(set(probes)) == len(probes), probes  # distinct: no answer copied from an earlier turn
        for w, a in zip(probes, (a for _, a in item["turns"])):
            assert a == ("yes" if w in words else "no"), (item["context"], w, a)
        answers = [a for _, a in item["turns"]]
        assert answers.count("yes") == min(6, len(words))


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("level", [0.0, 1.0])
def test_ask_is_balanced_and_hard(pool, task, level):
    rng = random.Random(f"ask:{task}:{level}")
    for _ in range(200):
        item = T.AUX[f"ask_{task}"](pool, rng, level)
        words = studied(item["context"])
        answers = [a for _, a in item["turns"]]
        assert "inline" not in item and answers.count("yes") == T.DIALOG_TURNS // 2
        # one "no" about a word of another list drawn at random, none when that draw is this list
        assert answers.count("no") == T.DIALOG_TURNS // 2 - (len(answers) < T.DIALOG_TURNS)
        assert len(answers) >= T.DIALOG_TURNS - 1
        for query, answer in item["turns"]:
            word = query[len("Was the word "):-len(" in the list? Answer yes or no.")]
            assert query == QUESTION.format(word)
            assert answer == ("yes" if word in words else "no"), (item["context"], query, answer)


def bridge_turn_ids(tok, item, i):
    """The token ids of turn i of an inline item (question part, answer part), as training sees them."""
    ids, is_answer = T.encode_segments(tok, "qwen35", item)
    spans, start = [], None
    for j, a in enumerate(is_answer):
        if a and start is None:
            start = j
        if not a and start is not None:
            spans.append((start, j))
            start = None
    spans.append((start, len(ids)))
    q_end, a_end = spans[i]
    q_start = spans[i - 1][1] if i else None
    return ids[q_start:q_end] if q_start is not None else None, ids[q_end:a_end]


@pytest.mark.parametrize("task", TASKS)
def test_ask_bridge_spans_the_drill_and_the_question(pool, tok, task):
    rng = random.Random(f"bridge:{task}")
    suffix = tok.encode(T.CHAT["qwen35"]["suffix"])
    for _ in range(50):
        item = T.AUX[f"ask_bridge_{task}"](pool, rng, 0.0)
        assert item["inline"] and len(item["gaps"]) == len(item["turns"])
        for (query, _), gap in zip(item["turns"], item["gaps"]):  # the head grows with the gap
            head = query.split()[:-1]
            assert head == T.ASK_HEAD[len(T.ASK_HEAD) - len(head):]
            assert len(head) == round(gap * len(T.ASK_HEAD))
        words = [q.split()[-1] for q, _ in item["turns"]]
        # At the shortest gap every turn is the drill's: " word yes." after the previous answer.
        short = dict(item, gaps=[0.0] * len(words),
                     turns=[((" " if i == 0 else "") + w, a) for i, (w, (_, a)) in enumerate(zip(words, item["turns"]))])
        drill = dict(task=f"check_{task}", context=item["context"], inline=True, turns=short["turns"])
        assert T.encode_segments(tok, "qwen35", short) == T.encode_segments(tok, "qwen35", drill)
        # At the longest, the whole question and the chat suffix stand between word and answer.
        full = dict(item, gaps=[1.0] * len(words),
                    turns=[("Was the word " + w, a) for w, (_, a) in zip(words, item["turns"])])
        for i in range(1, len(words)):
            question, answer = bridge_turn_ids(tok, full, i)
            assert question == tok.encode(" " + QUESTION.format(words[i])) + suffix
            assert answer[:1] == tok.encode(item["turns"][i][1])


def test_tasks_are_a_function_of_the_stream(pool):
    for name in ("check_drm", "ask_conjunction", "ask_bridge_drm"):
        a = T.AUX[name](pool, random.Random("same"), 0.3)
        b = T.AUX[name](pool, random.Random("same"), 0.3)
        assert a == b
