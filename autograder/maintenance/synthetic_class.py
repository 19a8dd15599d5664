"""A synthetic class: hundreds of graded students made from the kept solutions, for the class report's tests
and benchmark.

Grading 240 students in the sandbox takes many minutes; the report needs only what grading finds. So each
exercise of the module is graded once per kept answer, as the grader grades it (recorded, sent as JSON,
replayed, judged: ``autograder.maintenance.fixtures``), and students are drawn from those verdicts:

- the sample class's six kinds (``examples/make_sample_class.py``): full marks, untouched, partial,
  wrong-sharing, tampered and crashing, a few of each;
- the rest answer each exercise right with a probability that rises with their ability and falls with the
  exercise's difficulty (a two-parameter logistic model); a wrong answer is one of the exercise's kept wrong
  solutions (``tests/fixtures/wrong``), the common mistakes more often; now and then an exercise is left
  unfinished, a notebook untouched or not handed in, a run hits a limit.

The same module, count and seed give the same class.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.engine.grading import ENDINGS, UNANSWERED, UNANSWERED_NOTE, NotebookResult, StudentResult

VARIANTS_PER_EXERCISE = 8
"""Wrong solutions drawn on per exercise: one per misconception first, then others."""


@dataclass
class Answers:
    """The verdicts of every kept answer of one exercise: the key's, each wrong solution's, an unfinished one."""

    notebook: str
    exercise: str
    right: list[dict[str, Any]]
    wrong: dict[str, list[dict[str, Any]]]
    unfinished: list[dict[str, Any]]
    misconception: dict[str, str]
    """Wrong solution → the misconception it encodes."""


SAMPLE_MISTAKE = "no_shared_spec"
"""The sample class's wrong-sharing student: ``share=True`` without ``SharedQuantizationSpec`` (AddQuantizer and
CatQuantizer alike)."""


def _chosen(wrongs: list[Any], count: int) -> list[Any]:
    """One wrong solution per misconception first (the sample class's mistake before all), then the others, at
    most ``count``."""
    first: dict[str, Any] = {}
    for wrong in sorted(wrongs, key=lambda w: not w.misconception.endswith(SAMPLE_MISTAKE)):
        first.setdefault(wrong.misconception or wrong.id, wrong)
    rest = [w for w in wrongs if w not in first.values()]
    return (list(first.values()) + rest)[:count]


def module_answers(module: str, seed: int, per_exercise: int = VARIANTS_PER_EXERCISE) -> list[Answers]:
    """Every exercise of ``module`` graded once per kept answer on ``seed``."""
    import importlib

    import common.pt2e  # noqa: F401  (torchao loaded once, quietly)
    from autograder.checks.support import checks_of
    from autograder.course import notebook_id, source_notebooks
    from autograder.engine.grading import zero_verdicts
    from autograder.maintenance.fixtures import judged, wrong_solutions
    from selfcheck.casekit import module_name

    wrongs = wrong_solutions()
    found = []
    for path in source_notebooks(module):
        notebook = notebook_id(path)
        key = vars(importlib.import_module(f"autograder.keys.{module_name(notebook)}"))
        for exercise in checks_of(notebook):
            right = judged(notebook, exercise, dict(key), seed)
            wrong, misconception = {}, {}
            for solution in _chosen(
                [w for w in wrongs if (w.notebook, w.exercise) == (notebook, exercise)], per_exercise
            ):
                namespace: dict[str, Any] = {}
                exec(compile(solution.code, str(solution.path), "exec"), namespace)
                wrong[solution.id] = judged(notebook, exercise, namespace, seed)
                misconception[solution.id] = solution.misconception
            found.append(
                Answers(notebook, exercise, right, wrong, zero_verdicts(notebook, exercise, UNANSWERED), misconception)
            )
    return found


def _copy(verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [dict(v) for v in verdicts]


def _zero(verdicts: list[dict[str, Any]], message: str) -> list[dict[str, Any]]:
    return [{**v, "score": 0.0, "passed": False, "message": message, "causes": []} for v in verdicts]


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


KINDS = ("full", "untouched", "partial", "wrong-sharing", "tampered", "crashing")
KIND_SHARE = 0.02
"""Share of the class of each of the sample class's kinds."""


def synthetic_students(answers: list[Answers], students: int, seed: int) -> list[StudentResult]:
    """``students`` graded students drawn from ``answers`` (see the module docstring)."""
    rng = random.Random(seed)
    notebooks = list(dict.fromkeys(a.notebook for a in answers))
    module = notebooks[0].split("-")[0]
    difficulty = {(a.notebook, a.exercise): rng.gauss(-0.6, 0.8) for a in answers}
    popularity = {  # the common mistakes are common: Zipf weights over each exercise's wrong solutions
        (a.notebook, a.exercise): {w: 1 / (rank + 1) for rank, w in enumerate(rng.sample(list(a.wrong), len(a.wrong)))}
        for a in answers
    }
    # some mistakes are a strong student's (an over-general rule), others a weak one's
    sophistication = {w: rng.gauss(0.0, 1.2) for a in answers for w in a.wrong}
    kinds = [kind for kind in KINDS for _ in range(max(1, round(KIND_SHARE * students)))]
    made = []
    for i in range(students):
        kind = kinds[i] if i < len(kinds) else "mutants"
        ability = rng.gauss(0.0, 1.0)
        results = []
        for notebook in notebooks:
            result = NotebookResult(notebook, f"{notebook}.ipynb")
            mine = [a for a in answers if a.notebook == notebook]
            roll = rng.random()
            if (
                kind == "untouched"
                or (kind == "partial" and notebook != notebooks[0])
                or (kind == "mutants" and roll < 0.04 * _sigmoid(-2 * ability))
            ):
                result.operation("unanswered", UNANSWERED_NOTE.format(notebook=notebook))
                result.verdicts = [v for a in mine for v in _copy(a.unfinished)]
                results.append(result)
                continue
            if kind == "mutants" and roll > 1 - 0.01:
                result.file = None
                result.operation("missing", f"沒有交 {notebook}.ipynb")
                result.verdicts = [v for a in mine for v in _zero(a.right, f"沒有交 {notebook}.ipynb")]
                results.append(result)
                continue
            for a in mine:
                key = (a.notebook, a.exercise)
                p_right = (
                    1.0 if kind in ("full", "tampered", "crashing") else _sigmoid(1.7 * (ability - difficulty[key]))
                )
                if kind == "wrong-sharing" and a.wrong:
                    sharing = [w for w in a.wrong if a.misconception[w].endswith(SAMPLE_MISTAKE)] or list(a.wrong)
                    result.verdicts += _copy(a.wrong[sharing[0]])
                elif rng.random() < p_right or not a.wrong:
                    result.verdicts += _copy(a.right)
                elif rng.random() < 0.1:
                    result.verdicts += _zero(a.right, "還沒寫完：你的程式走到了 raise NotImplementedError()")
                else:
                    weights = {w: p * math.exp(sophistication[w] * ability) for w, p in popularity[key].items()}
                    chosen = rng.choices(list(weights), weights=list(weights.values()))[0]
                    result.verdicts += _copy(a.wrong[chosen])
            if kind == "tampered" and notebook == notebooks[-1]:
                exercise = mine[0].exercise
                result.unjudged.append(exercise)
                note = f"偵測到竄改：{exercise} 回傳了偽裝成一般資料、可能改寫了 __eq__ 的物件，那幾項不計分"
                result.tampering.append(note)
                result.verdicts = [
                    (dict(v, score=0.0, passed=False, message=note, causes=[]) if v["exercise"] == exercise else v)
                    for v in result.verdicts
                ]
            ending = {"crashing": "crashed"}.get(kind) if notebook == notebooks[0] else None
            if kind == "mutants" and rng.random() < 0.01:
                ending = rng.choice(["timeout", "memory", "crashed"])
            if ending:
                text = ENDINGS[ending].format(seconds=600, memory=3072)
                result.operation(ending, text)
                cut = mine[-1].exercise
                result.unjudged.append(cut)
                result.verdicts = [
                    (
                        dict(v, score=0.0, passed=False, message=f"沒有執行到這一題的評分：{text}", causes=[])
                        if v["exercise"] == cut
                        else v
                    )
                    for v in result.verdicts
                ]
            if kind == "mutants" and rng.random() < 0.05:
                result.cell_errors.append(
                    f"第 {rng.randint(5, 40)} 格：NameError（用到還沒定義的名字）：name 'qspec' is not defined"
                )
            results.append(result)
        name = f"{kind}-{i:03d}" if kind != "mutants" else f"s{i:03d}"
        made.append(StudentResult(name, module, results))
    return made


def write_synthetic_class(out: Path, module: str, students: int = 240, seed: int = 0) -> Path:
    """Grade the kept answers of ``module`` once, draw ``students`` from them and write ``OUT/<module>-class.json``."""
    from autograder.reports.class_record import write_record

    made = synthetic_students(module_answers(module, seed), students, seed)
    path, _ = write_record(
        out, module, made, seed, f"pt2e-course synthetic-class {module} --students {students} --seed {seed}"
    )
    return path
