"""The fork server's warm-up: jobs start with the hidden models already exported, and grade the same.

``autograder.sandboxed.warm`` runs each hidden case once in the server with stand-ins for the
student's definitions, so that the exports a case makes are remembered before the jobs fork.
These tests pin what that buys (a key recorded after warming traces no model the stand-ins could
reach) and what it must never change (a warmed job's evidence is a cold job's evidence; a job
forked after the warm-up still computes on all its threads).
"""

from __future__ import annotations

import importlib
import json
from collections import OrderedDict

import nbformat
import pytest

from autograder.course import SOURCE, notebook_id
from autograder.engine import sandbox as sb
from autograder.engine.submission import load_notebook, prepare, source_path
from autograder.sandboxed.cases.base import exercises_of, module_name
from autograder.sandboxed.limits import Limits
from autograder.sandboxed.record import record_exercise
from autograder.sandboxed.runner import Cell, Job
from autograder.sandboxed.warm import standins, warm_exports
from common import export_cache

SEED = 5
NOTEBOOKS = [notebook_id(path) for path in sorted(SOURCE.glob("M*/M*.ipynb"))]
FROM_ANSWERS = {"M04-1": 1}
"""Exports of a model the answer itself made (fold_bn's folded model): no stand-in can make them."""

pytestmark = pytest.mark.xdist_group("warm")  # the sandboxes here start once, on one worker


class _CountingCache(OrderedDict):
    """The export cache, counting the graphs it had to trace and add."""

    added = 0

    def __setitem__(self, key: object, value: object) -> None:
        self.added += 1
        super().__setitem__(key, value)


@pytest.fixture
def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> _CountingCache:
    """An empty export cache that counts what ``export_module`` traced and remembered."""
    cache = _CountingCache()
    monkeypatch.setattr(export_cache, "_graphs", cache)
    return cache


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_after_warming_the_answer_key_traces_only_what_its_answers_made(
    notebook: str, fresh_cache: _CountingCache
) -> None:
    warmed = warm_exports([notebook], SEED)
    assert warmed["notebooks"] == [notebook] and warmed["graphs"] == fresh_cache.added
    fresh_cache.added = 0
    key = vars(importlib.import_module(f"autograder.keys.{module_name(notebook)}"))
    for exercise in exercises_of(notebook).values():
        cases = record_exercise(exercise, key, SEED)["cases"]
        assert not [c for c, r in cases.items() if "error" in r], f"the key fails a case of {notebook} after warming"
    assert fresh_cache.added == FROM_ANSWERS.get(notebook, 0)


def test_a_standin_answers_nothing() -> None:
    from torchao.quantization.pt2e.quantizer import Quantizer

    from common.models import example_inputs, get_model
    from common.pt2e import export_module

    gm = export_module(get_model("conv_relu").eval(), example_inputs(2))
    names = standins(["f", "Q"])
    assert names["f"](gm, 3) is gm, "a call hands back the graph it was given"
    quantizer = names["Q"]()
    assert isinstance(quantizer, Quantizer)
    before = gm.code
    assert quantizer.annotate(gm) is gm and quantizer.anything(1, gm) is gm
    assert gm.code == before and not any("quantization_annotation" in n.meta for n in gm.graph.nodes)


def _full_job(notebook: str) -> Job:
    student, _ = load_notebook(source_path(notebook))
    cells = prepare(student, nbformat.read(source_path(notebook), as_version=4)).cells
    return Job(notebook, tuple(cells), SEED, Limits())


def _evidence(run: sb.Run) -> dict[str, object]:
    messages = [json.loads(frame) for frame in run.read.frames]
    return {m["exercise"]: m["data"] for m in messages if m.get("type") == "evidence"}


def test_a_warmed_server_records_what_a_cold_one_does() -> None:
    """The second job of a (notebook, seed) warms the server; its evidence is the first one's."""
    box = sb.Sandbox()
    box.start()
    try:
        job = _full_job("M03-3")
        cold = sb.run_job(job, box)
        assert not box.warmed
        warm = sb.run_job(job, box)
        assert box.warmed == {("M03-3", SEED)}
    finally:
        box.stop()
    assert cold.conversation.done and warm.conversation.done
    assert set(_evidence(cold)) == {"rule_quantizer", "validate"}
    assert _evidence(warm) == _evidence(cold)


def test_a_job_forked_after_warming_computes_on_all_its_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Warming computes in the server on one thread, so no OpenMP pool is left for a job to inherit
    broken: with two threads asked for, a job's convolution finishes well inside its time limit."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    box = sb.Sandbox()
    box.start()
    try:
        box.warm(["M03-3", "M04-3"], SEED)
        assert box.warmed == {("M03-3", SEED), ("M04-3", SEED)}
        code = (
            "import json, os, struct, torch\n"
            "y = torch.nn.Conv2d(8, 16, 3)(torch.randn(8, 8, 64, 64))\n"
            "body = json.dumps({'type': 'probe', 'threads': torch.get_num_threads(), 'shape': list(y.shape)})\n"
            "os.write(3, struct.pack('>I', len(body.encode())) + body.encode())\n"
        )
        run = sb.run_job(Job("", (Cell("code", code, "c0"),), 0, Limits(cell_seconds=20, notebook_seconds=30)), box)
    finally:
        box.stop()
    probe = next((json.loads(f) for f in run.read.frames if json.loads(f).get("type") == "probe"), None)
    assert probe is not None, f"the job did not finish its convolution ({run.how}): a broken thread pool?"
    assert probe == {"type": "probe", "threads": 2, "shape": [8, 16, 62, 62]}
