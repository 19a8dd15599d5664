"""Record in the sandbox, replay on the trusted side: the evidence is recomputed, never believed.

- Replaying the answer key's recordings gives exactly the evidence of running the key.
- What a submission patches in its own process (helpers that describe graphs, ``id``,
  the recorder itself) cannot change the derived evidence: only its answers count.
- A recording that asks the grader for something outside the allowed kinds (an observer
  class from another module, a Python function as a graph target, nodes that do not
  exist) becomes an error for that case, and nothing it names is imported or run.
"""

from __future__ import annotations

import builtins
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from autograder.engine.judge import judge
from autograder.sandboxed.cases.base import collect, exercises_of, module_name
from autograder.sandboxed.record import record_exercise
from autograder.sandboxed.replay import derive

NOTEBOOKS = sorted(p.stem for p in Path(__file__).resolve().parents[1].glob("source/M0*/*.ipynb"))
SEED = 3


def key_namespace(notebook: str) -> dict[str, Any]:
    return vars(importlib.import_module(f"autograder.keys.{module_name(notebook)}"))


def round_trip(data: Any) -> Any:
    """What the grader reads from the pipe: JSON bytes, nothing else."""
    return json.loads(json.dumps(data, ensure_ascii=False))


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    if type(a) is not type(b):
        return [f"{path}: {type(a).__name__} != {type(b).__name__}"]
    if isinstance(a, dict):
        out = [f"{path}.{k}: only on one side" for k in set(a) ^ set(b)]
        for key in set(a) & set(b):
            out += differences(a[key], b[key], f"{path}.{key}")
        return out
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} != {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and abs(a - b) <= 1e-6 * max(1.0, abs(a)):
        return []
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_replaying_the_key_gives_the_keys_own_evidence(notebook: str) -> None:
    for name, exercise in exercises_of(notebook).items():
        direct = collect(exercise, key_namespace(notebook), SEED)
        replayed = derive(exercise, round_trip(record_exercise(exercise, key_namespace(notebook), SEED)), SEED)
        assert not differences(direct, replayed), (name, differences(direct, replayed)[:3])
        errors = [c for c, r in replayed["cases"].items() if "error" in r]
        assert not errors, (name, errors)


def test_a_record_keeps_no_evidence_and_the_flag_comes_back() -> None:
    """``evidence_is_kept`` is False only while a record runs its cases, and True again after one that failed."""
    from selfcheck.casekit import Exercise, evidence_is_kept

    seen: list[bool] = []

    def look(ns: Any, seed: int) -> int:
        seen.append(evidence_is_kept())
        return 1

    def fail(ns: Any, seed: int) -> int:
        seen.append(evidence_is_kept())
        raise RuntimeError("the student's error")

    exercise = Exercise("k", "t", ("f",), {"look": look, "fail": fail}, notebook="M99-1")
    recorded = record_exercise(exercise, {"f": len}, SEED)
    assert set(recorded["cases"]) == {"look", "fail"} and seen == [False, False]
    assert evidence_is_kept()
    assert "error" in collect(exercise, {"f": len}, SEED)["cases"]["fail"] and seen[2:] == [True, True]


@pytest.mark.slow  # lowers the backbone to ExecuTorch and runs it (seconds)
def test_the_m08_3_record_skips_the_lowering_and_records_the_same_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """M08-3's record does not lower (the replay does, ``test_replaying_the_key_gives_the_keys_own_evidence``):
    the student's calls it writes down are exactly those of a record that lowers."""
    cases = importlib.import_module("autograder.sandboxed.cases.m08_3")
    exercise = exercises_of("M08-3")["backend_quantizer"]
    lowered: list[int] = []
    real_lower = cases.lower_converted

    def counting(*args: Any) -> Any:
        lowered.append(1)
        return real_lower(*args)

    monkeypatch.setattr(cases, "lower_converted", counting)
    skipping = round_trip(record_exercise(exercise, key_namespace("M08-3"), SEED))
    assert not lowered, "the record lowered a program"
    monkeypatch.setattr(cases, "evidence_is_kept", lambda: True)
    lowering = round_trip(record_exercise(exercise, key_namespace("M08-3"), SEED))
    assert lowered, "with evidence kept, the case lowers"
    assert skipping["cases"]["lowered"]["channels"], "the record holds the student's calls"
    assert not differences(skipping, lowering), differences(skipping, lowering)[:3]


def test_recordings_hold_answers_not_descriptions() -> None:
    exercise = exercises_of("M03-4")["add_quantizer"]
    recorded = record_exercise(exercise, key_namespace("M03-4"), SEED)
    text = json.dumps(recorded)
    assert "instances" not in text and "paths" not in text  # no observer counts, no q/dq paths: the grader makes those
    channels = next(iter(recorded["cases"].values()))["channels"]
    assert "AddQuantizer" in channels and "AddQuantizer#0.annotate" in channels  # the calls, one channel each
    assert all(name.startswith("AddQuantizer") for name in channels)


WRONG_NO_SHARING = """
import torch
from common.pt2e import ANNOTATION_KEY, QuantizationAnnotation, Quantizer
from common.qspecs import act_spec

ADD = torch.ops.aten.add.Tensor


class AddQuantizer(Quantizer):
    def __init__(self, share):
        self.share = share

    def annotate(self, model):
        for node in model.graph.nodes:
            if node.op == "call_function" and node.target == ADD:
                inputs = {a: act_spec() for a in node.args[:2] if isinstance(a, torch.fx.Node) and a.op != "get_attr"}
                node.meta[ANNOTATION_KEY] = QuantizationAnnotation(
                    input_qspec_map=inputs, output_qspec=act_spec(), _annotated=True
                )
        return model

    def validate(self, model):
        pass
"""


def score(notebook: str, exercise: str, evidence: dict[str, Any]) -> float:
    verdicts = judge({"notebook": notebook, "seed": SEED, "exercises": {exercise: evidence}}, [exercise])
    return sum(v["score"] for v in verdicts)


def test_patching_the_sandbox_side_cannot_raise_a_score(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wrong answer (no sharing) scores the same whatever the submission patched while it was recorded."""
    namespace: dict[str, Any] = {}
    exec(compile(WRONG_NO_SHARING, "<student>", "exec"), namespace)
    exercise = exercises_of("M03-4")["add_quantizer"]
    honest = score(
        "M03-4", "add_quantizer", derive(exercise, round_trip(record_exercise(exercise, namespace, SEED)), SEED)
    )

    import selfcheck.casekit
    import selfcheck.evidence

    key_evidence = collect(exercise, key_namespace("M03-4"), SEED)
    forged_prepared = key_evidence["cases"]["shared_residual"]["value"]["prepared"]
    monkeypatch.setattr(selfcheck.evidence, "describe_prepared", lambda gm: forged_prepared)
    monkeypatch.setattr(
        selfcheck.casekit, "quantize_model", lambda *a, **k: key_evidence["cases"]["shared_residual"]["value"]
    )
    monkeypatch.setattr(builtins, "id", lambda obj: 7)  # "every observer is one instance"
    recorded = round_trip(record_exercise(exercise, namespace, SEED))
    monkeypatch.undo()
    patched = score("M03-4", "add_quantizer", derive(exercise, recorded, SEED))
    full = sum(v["points"] for v in judge({"notebook": "M03-4", "seed": SEED, "exercises": {}}, ["add_quantizer"]))
    assert patched <= honest < full


def test_forged_recordings_are_errors_and_nothing_they_name_runs(tmp_path: Path) -> None:
    exercise = exercises_of("M03-4")["add_quantizer"]
    recorded = round_trip(record_exercise(exercise, key_namespace("M03-4"), SEED))
    marker = tmp_path / "ran"
    text = json.dumps(recorded)
    # an observer "class" that is really a shell command, a node that does not exist
    forged_class = json.loads(text.replace("torchao.quantization.pt2e.observer.MinMaxObserver", "os.system"))
    assert forged_class != recorded
    evidence = derive(exercise, forged_class, SEED)  # refused before anything runs: the whole exercise
    assert set(evidence) == {"refused"} and "observer" in evidence["refused"]
    forged_node = json.loads(text.replace('"add"', '"add_that_is_not_there"'))
    evidence = derive(exercise, forged_node, SEED)
    assert any("error" in r for r in evidence["cases"].values())
    assert not marker.exists()


def test_a_graph_target_outside_the_allowed_ops_is_refused() -> None:
    from autograder.sandboxed.replay import ReplayError, _target

    with pytest.raises(ReplayError.__mro__[1]):
        _target("call_function", {"py": "os.system"})
    with pytest.raises(ReplayError.__mro__[1]):
        _target("call_function", {"op": "os.system.default"})
    with pytest.raises(ReplayError.__mro__[1]):
        _target("call_function", {"py": "torch.save"})  # a Python function of torch, not a tensor op
    with pytest.raises(ReplayError.__mro__[1]):
        _target("call_function", {"op": "aten.from_file.default"})  # an op with an effect outside its tensors
    assert _target("call_function", {"op": "aten.relu.default"}) is __import__("torch").ops.aten.relu.default


def test_a_python_function_as_a_nodes_target_is_refused_with_what_to_write_and_where_to_read() -> None:
    """``torch.clamp`` as an inserted node's target: the recording is refused as a whole, and the feedback says
    what was written, the ATen overload to write instead, that the exercise scored 0, and where to reread."""
    from autograder.engine.grading import refusal_reason

    exercise = exercises_of("M01-3")["insert_clamp"]
    right = Path(__file__).parent / "fixtures" / "right" / "M01-3" / "clamp_user_loop.py"
    namespace: dict[str, Any] = {}
    exec(
        compile(right.read_text().replace("torch.ops.aten.clamp.default", "torch.clamp"), str(right), "exec"), namespace
    )
    evidence = derive(exercise, round_trip(record_exercise(exercise, namespace, SEED)), SEED)
    assert set(evidence) == {"refused"}, evidence
    reason = refusal_reason("M01-3", "insert_clamp", evidence["refused"])
    assert "圖上的 torch.clamp 是 Python 函式" in reason and "torch.ops.aten.clamp.default" in reason, reason
    assert "這一題 0 分" in reason and "不計分" not in reason
    assert "重讀 M01-1 的「B. node.target：op 的身分」" in reason, reason


def test_a_student_exception_is_replayed_with_its_type_and_message() -> None:
    exercise = exercises_of("M03-3")["validate"]
    namespace: dict[str, Any] = dict(key_namespace("M03-3"))
    recorded = round_trip(record_exercise(exercise, namespace, SEED))
    direct = collect(exercise, namespace, SEED)
    assert not differences(direct, derive(exercise, recorded, SEED))
    assert "ValueError" in json.dumps(recorded)


def test_missing_and_garbage_recordings_never_crash_the_grader() -> None:
    exercise = exercises_of("M03-4")["cat_quantizer"]
    assert derive(exercise, {"missing": ["CatQuantizer", "os"]}, SEED) == {"missing": ["CatQuantizer"]}
    for garbage in (
        {"kinds": {}, "cases": {"cat_pool": {"channels": {"CatQuantizer": [1, 2, 3]}}}},
        {"kinds": {"CatQuantizer": "class"}, "cases": {"cat_pool": "x"}},
        {"kinds": {"CatQuantizer": "class"}, "cases": {}},
    ):
        evidence = derive(exercise, garbage, SEED)
        assert all("error" in r for r in evidence["cases"].values())


# --- a spec: one encoding (selfcheck.evidence.encode_spec), one decoder (replay.Replay.spec) ------------


def test_every_kind_of_spec_survives_the_recording_and_its_replay() -> None:
    """What the sandbox records of a spec, decoded on the grader's side, is the same spec as evidence; the
    recording and the evidence use one encoding (the same kinds and keys)."""
    import torch
    from torchao.quantization.pt2e.quantizer import (
        DerivedQuantizationSpec,
        FixedQParamsQuantizationSpec,
        QuantizationSpec,
        SharedQuantizationSpec,
    )

    from autograder.sandboxed.record import Recorder
    from autograder.sandboxed.replay import Replay
    from common.pt2e import HistogramObserver, PerChannelMinMaxObserver, export_module
    from common.qspecs import act_spec, weight_spec
    from selfcheck.evidence import SPEC_FIELDS, describe_spec

    gm = export_module(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU()), (torch.randn(2, 3),))
    linear, relu = [n for n in gm.graph.nodes if n.op == "call_function"][-2:]

    def derive(observers: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.tensor([0.1]), torch.tensor([0])

    histogram = HistogramObserver.with_args(eps=2**-12)
    specs = [
        None,
        act_spec(),
        QuantizationSpec(torch.uint8, histogram, quant_min=0, quant_max=255, qscheme=torch.per_tensor_affine),
        weight_spec(per_channel=True),
        QuantizationSpec(torch.int8, PerChannelMinMaxObserver, -127, 127, torch.per_channel_symmetric, ch_axis=1),
        FixedQParamsQuantizationSpec(torch.uint8, 1 / 256, 0, 0, 255, torch.per_tensor_affine),
        SharedQuantizationSpec(linear),
        SharedQuantizationSpec((linear, relu)),
        DerivedQuantizationSpec([(linear, relu)], derive, torch.int32, -(2**31), 2**31 - 1, torch.per_tensor_symmetric),
    ]
    replay = Replay({"channels": {}}, {})
    replay.derive_fn = lambda number: derive  # type: ignore[method-assign]  # the grader's stand-in for a recorded one
    for spec in specs:
        recorded = json.loads(json.dumps(Recorder().spec(spec)))
        described = describe_spec(spec)
        if spec is None:
            assert recorded is None and described is None
            continue
        assert set(recorded) - {"fn"} == set(described) and recorded["kind"] == described["kind"]
        assert describe_spec(replay.spec(gm, recorded)) == described, type(spec).__name__
    assert set(SPEC_FIELDS) <= set(describe_spec(act_spec()))


def test_a_recorder_that_raises_costs_the_exercise_it_was_recording_and_is_put_back() -> None:
    """A submission patches the course's recorder so that recording raises outside any case: the guard
    turns it into an account of this exercise only, puts the recorder back, and the next recording works;
    the trusted side reads the account as one sentence that names what was changed."""
    from autograder.sandboxed import record
    from autograder.sandboxed.runner import RecordingHelpers, _record_guarded

    exercise = exercises_of("M01-3")["replace_op"]
    key = key_namespace("M01-3")
    helpers = RecordingHelpers()
    honest = record.Recorder.namespace
    try:
        record.Recorder.namespace = lambda self, *args, **kwargs: 1 / 0
        account = _record_guarded(record_exercise, exercise, key, SEED, helpers.restore)
    finally:
        record.Recorder.namespace = honest
    assert account == {
        "unrecorded": {"error": "ZeroDivisionError", "changed": ["autograder.sandboxed.record.Recorder.namespace"]}
    }
    assert record.Recorder.namespace is honest and helpers.restore() == []
    again = _record_guarded(record_exercise, exercise, key, SEED, helpers.restore)
    assert "cases" in again
    sentence = derive(exercise, round_trip(account), SEED)
    assert set(sentence) == {"refused"}
    assert "Recorder.namespace" in sentence["refused"] and "ZeroDivisionError" in sentence["refused"]
    assert sentence["refused"].count("。") == 0  # one sentence: the grader adds the exercise and 「這一題不計分」


def test_a_replaced_function_body_is_put_back_too() -> None:
    import selfcheck.casekit as casekit
    from autograder.sandboxed.runner import RecordingHelpers

    helpers = RecordingHelpers()
    code = casekit.run_case.__code__
    try:
        casekit.run_case.__code__ = (lambda fn, seconds: None).__code__
        assert helpers.restore() == ["selfcheck.evidence.run_case"]
    finally:
        casekit.run_case.__code__ = code
    assert casekit.run_case.__code__ is code
