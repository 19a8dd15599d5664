"""The replay interprets data: it runs only what ``autograder/sandboxed/allowed.py`` lists, within budgets.

Each attack below is the answer key's honest recording with one thing a hostile student could
make it say (a graph node, an observer setting, an attribute): the replay refuses the whole
exercise with one Chinese sentence, before any of it runs. The allow-list itself is printed and
must equal ``tests/allowed.txt``, so that growing it is a change someone reviews.
"""

from __future__ import annotations

import copy
import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from autograder.sandboxed import allowed
from autograder.sandboxed.cases.base import exercises_of, module_name
from autograder.sandboxed.record import record_exercise
from autograder.sandboxed.replay import derive

SEED = 1
SNAPSHOT = Path(__file__).with_name("allowed.txt")


def allow_list_text() -> str:
    lines = ["# ops a rebuilt graph may call", *sorted(allowed.OPS)]
    lines += ["# python callables", *sorted(allowed.PYTHON)]
    lines += ["# tensor methods", *sorted(allowed.METHODS)]
    lines += ["# observer classes", *sorted(allowed.OBSERVERS)]
    lines += ["# observer settings", *sorted(allowed.SETTINGS)]
    lines += ["# budgets"] + [f"{k} = {v}" for k, v in vars(allowed.BUDGET).items()]
    return "\n".join(lines) + "\n"


def test_the_allow_list_is_the_reviewed_one() -> None:
    text = allow_list_text()
    print(text)
    assert SNAPSHOT.read_text(encoding="utf-8") == text, (
        "autograder/sandboxed/allowed.py changed: review the difference, then write it to tests/allowed.txt"
    )


def test_nothing_with_an_effect_outside_its_tensors_is_listed() -> None:
    for name in ("aten.from_file", "aten._print", "aten.save", "aten.set_", "aten._assert_async", "prims.device_put"):
        assert not any(op == name or op.startswith(name + ".") for op in allowed.OPS), name
    assert set(allowed.PYTHON.values()) == {__import__("operator").getitem}
    for method in ("register_hook", "apply_", "tolist", "numpy", "storage", "copy_", "backward", "data_ptr"):
        assert method not in allowed.METHODS


# --- recordings with one hostile thing in them ------------------------------------------------------


def key_recording(notebook: str, exercise: str) -> dict[str, Any]:
    key = vars(importlib.import_module(f"autograder.keys.{module_name(notebook)}"))
    return json.loads(json.dumps(record_exercise(exercises_of(notebook)[exercise], key, SEED)))


def graph_states(recorded: dict[str, Any]) -> list[dict[str, Any]]:
    """Every recorded graph state that holds nodes (the graphs the student's calls edited)."""
    found = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("nodes"), list):
                found.append(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(recorded)
    return found


def with_node(**node: Any) -> Callable[[dict[str, Any]], None]:
    """Put ``node`` in every edited graph of the recording, just before its output."""

    def change(recorded: dict[str, Any]) -> None:
        for state in graph_states(recorded):
            records = state["nodes"]
            records.insert(len(records) - 1, {"args": {"tuple": []}, "kwargs": {"dict": []}, **node})

    return change


def first_conv_input(recorded: dict[str, Any]) -> str:
    for record in graph_states(recorded)[0]["nodes"]:
        if record["op"] == "placeholder":
            return record["name"]
    raise AssertionError("no placeholder")


MARKER = Path("/tmp/pt2e-replay-marker")


def node(name: str, target: dict[str, str], *args: Any, op: str = "call_function") -> dict[str, Any]:
    return {"name": name, "op": op, "target": target, "args": {"tuple": list(args)}, "kwargs": {"dict": []}}


def _exec_chain(recorded: dict[str, Any]) -> None:
    # attrgetter("__globals__") of a function, then its "exec": what reached exec before
    for state in graph_states(recorded):
        records = state["nodes"]
        chain = [
            node("getter", {"py": "operator.attrgetter"}, "forward.__globals__"),
            node("globals_", {"py": "operator.call"}, {"n": "getter"}, {"n": records[0]["name"]}),
            node("run", {"py": "builtins.exec"}, f"open('{MARKER}', 'w').write('ran')"),
        ]
        records[len(records) - 1 : len(records) - 1] = chain


ATTACKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "operator_chain_to_exec": _exec_chain,
    "operator_pow": with_node(
        name="big", op="call_function", target={"py": "operator.pow"}, args={"tuple": [10, 10**9]}
    ),
    "from_file_reads_a_key": with_node(
        name="leak", op="call_function", target={"op": "aten.from_file.default"}, args={"tuple": ["/etc/hostname"]}
    ),
    "print_writes_escapes": with_node(
        name="say",
        op="call_function",
        target={"op": "aten._print.default"},
        args={"tuple": ["\x1b[2J\x1b]0;pwned\x07"]},
    ),
    "from_file_as_a_packet": with_node(
        name="leak", op="call_function", target={"packet": "aten.from_file"}, args={"tuple": ["/etc/hostname"]}
    ),
    "autocast_switched_on": with_node(
        name="fast", op="call_function", target={"py": "torch.set_autocast_enabled"}, args={"tuple": ["cpu", True]}
    ),
    "threads_changed": with_node(
        name="threads", op="call_function", target={"py": "torch.set_num_threads"}, args={"tuple": [64]}
    ),
    "prims_op": with_node(name="p", op="call_function", target={"op": "prims.device_put.default"}, args={"tuple": []}),
    "huge_full": with_node(
        name="huge",
        op="call_function",
        target={"op": "aten.full.default"},
        args={"tuple": [[200_000, 200_000], 1.0]},
    ),
    "attribute_of_the_module": with_node(name="g", op="get_attr", target={"name": "graph"}),
    "method_with_a_callback": with_node(name="h", op="call_method", target={"name": "register_hook"}),
}


def _matmul_chain(recorded: dict[str, Any]) -> None:
    for state in graph_states(recorded):
        records = state["nodes"]
        chain = [node("a", {"op": "aten.ones.default"}, [4096, 4096])]
        chain += [
            node(f"m{i}", {"op": "aten.mm.default"}, {"n": "a" if i == 0 else f"m{i - 1}"}, {"n": "a"})
            for i in range(40)
        ]
        records[len(records) - 1 : len(records) - 1] = chain


ATTACKS["matmul_chain"] = _matmul_chain


def _too_many_nodes(recorded: dict[str, Any]) -> None:
    for state in graph_states(recorded):
        state["nodes"][-1:-1] = [node(f"r{i}", {"op": "aten.relu.default"}, {"n": "x"}) for i in range(5000)]


ATTACKS["too_many_nodes"] = _too_many_nodes


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_recording_that_names_anything_else_is_refused_before_it_runs(
    attack: str, capfd: pytest.CaptureFixture[str]
) -> None:
    MARKER.unlink(missing_ok=True)
    recorded = key_recording("M01-3", "replace_op")
    ATTACKS[attack](recorded)
    threads, autocast = torch.get_num_threads(), torch.is_autocast_enabled("cpu")
    evidence = derive(exercises_of("M01-3")["replace_op"], recorded, SEED)
    assert set(evidence) == {"refused"}, f"{attack}: not refused: {json.dumps(evidence)[:300]}"
    assert evidence["refused"].startswith("評分時沒有執行你的答案留下的圖")
    assert not MARKER.exists()
    assert "\x1b" not in capfd.readouterr().out
    assert torch.get_num_threads() == threads and torch.is_autocast_enabled("cpu") == autocast


def test_an_observer_with_a_huge_histogram_is_refused() -> None:
    recorded = key_recording("M02-2", "insert_observer")
    text = json.dumps(recorded)
    assert '"argument"' in text  # the key uses the observer it was given: build a recording that makes one
    forged = copy.deepcopy(recorded)
    planted = 0
    for state in graph_states(forged):
        modules = state.get("modules", {})
        for path in list(modules):
            modules[path] = {
                "new": {
                    "class": "torchao.quantization.pt2e.observer.HistogramObserver",
                    "settings": {"bins": 10**9, "dtype": {"torch_dtype": "int8"}},
                }
            }
            planted += 1
    assert planted
    evidence = derive(exercises_of("M02-2")["insert_observer"], forged, SEED)
    assert set(evidence) == {"refused"} and "bins" in evidence["refused"]


def test_a_spec_whose_observer_holds_a_huge_histogram_is_refused() -> None:
    recorded = key_recording("M03-4", "add_quantizer")
    text = json.dumps(recorded).replace('"kwargs": {}', '"kwargs": {"bins": 1000000000}')
    assert text != json.dumps(recorded)
    evidence = derive(exercises_of("M03-4")["add_quantizer"], json.loads(text), SEED)
    assert set(evidence) == {"refused"} and "bins" in evidence["refused"]


def test_an_honest_recording_is_not_refused_and_costs_little() -> None:
    recorded = key_recording("M01-3", "replace_op")
    allowed.check_recording(recorded)
    evidence = derive(exercises_of("M01-3")["replace_op"], recorded, SEED)
    assert "cases" in evidence and not any("error" in r for r in evidence["cases"].values())


def test_the_cost_of_a_graph_is_counted_on_fake_tensors() -> None:
    from common.pt2e import export_module

    class Two(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.mm(x, x).relu()

    gm = export_module(Two(), (torch.ones(64, 64),))
    before = {n.name: n.meta.get("val") for n in gm.graph.nodes}
    allowed.check_cost(gm)  # small: accepted
    assert {n.name: n.meta.get("val") for n in gm.graph.nodes} == before  # the graph's own metadata is untouched
    big = export_module(Two(), (torch.ones(8192, 8192),))
    with pytest.raises(allowed.Refused, match=r"浮點運算|MB"):
        allowed.check_cost(big)


# --- recordings that reached the worker past the cost check (issue 41) ------------------------------------


def _stale(attack: Callable[[dict[str, Any]], None], claim: Any) -> Callable[[dict[str, Any]], None]:
    """``attack``, in a recording that says the graph was never recompiled (``claim`` True), or says nothing."""

    def change(recorded: dict[str, Any]) -> None:
        attack(recorded)
        for state in graph_states(recorded):
            if claim is None:
                state.pop("stale", None)
            else:
                state["stale"] = claim

    return change


def _outer_of_a_mask(recorded: dict[str, Any]) -> None:
    # a boolean mask's selection has a size fake tensors cannot know; its outer product is 28 800² floats (3.3 GB)
    for state in graph_states(recorded):
        records = state["nodes"]
        x = first_conv_input(recorded)
        chain = [
            node("flat", {"op": "aten.view.default"}, {"n": x}, [-1]),
            node("many", {"op": "aten.repeat.default"}, {"n": "flat"}, [28_800 // 192]),
            node("mask", {"op": "aten.ge.Scalar"}, {"n": "many"}, -1e9),
            node("chosen", {"op": "aten.index.Tensor"}, {"n": "many"}, [{"n": "mask"}]),
            node("column", {"op": "aten.unsqueeze.default"}, {"n": "chosen"}, 1),
            node("row", {"op": "aten.unsqueeze.default"}, {"n": "chosen"}, 0),
            node("outer", {"op": "aten.mul.Tensor"}, {"n": "column"}, {"n": "row"}),
        ]
        records[len(records) - 1 : len(records) - 1] = chain


def _renamed_input(recorded: dict[str, Any]) -> None:
    # the input renamed (a new placeholder, without the exported shape), then a huge tensor
    text = json.dumps(graph_states(recorded)[0]["nodes"])
    assert '"n": "x"' in text
    for state in graph_states(recorded):
        for record in state["nodes"]:
            if record["op"] == "placeholder" and record["name"] == "x":
                record["name"] = "renamed"
        state["nodes"] = json.loads(json.dumps(state["nodes"]).replace('{"n": "x"}', '{"n": "renamed"}'))
    ATTACKS["huge_full"](recorded)


def _size_from_data(recorded: dict[str, Any]) -> None:
    # arange(x.amax() * 1e9): a length only the input's values say
    for state in graph_states(recorded):
        records = state["nodes"]
        x = first_conv_input(recorded)
        chain = [
            node("top", {"op": "aten.amax.default"}, {"n": x}, [0, 1, 2, 3]),
            node("length", {"op": "aten.mul.Scalar"}, {"n": "top"}, 1e9),
            node("line", {"op": "aten.arange.default"}, {"n": "length"}),
        ]
        records[len(records) - 1 : len(records) - 1] = chain


BYPASSES: dict[str, Callable[[dict[str, Any]], None]] = {
    "stale_claimed": _stale(ATTACKS["huge_full"], True),
    "stale_left_unsaid": _stale(ATTACKS["huge_full"], None),
    "boolean_mask": _outer_of_a_mask,
    "renamed_input": _renamed_input,
    "size_from_data": _size_from_data,
    "packet_on_strings": with_node(
        name="s", op="call_function", target={"packet": "aten.add"}, args={"tuple": ["a" * 10, "b"]}
    ),
    "packet_sums_a_list": with_node(
        name="s", op="call_function", target={"packet": "aten.sum"}, args={"tuple": [[1, 2]]}
    ),
}


@pytest.mark.parametrize("bypass", sorted(BYPASSES))
def test_the_cost_check_judges_every_graph_the_worker_would_run(bypass: str) -> None:
    """Each of these reached the replay worker with a 3.4 GB allocation or a non-tensor op: now the check
    refuses it, before anything runs (this process has no memory limit to stop it)."""
    recorded = key_recording("M01-3", "replace_op")
    BYPASSES[bypass](recorded)
    evidence = derive(exercises_of("M01-3")["replace_op"], recorded, SEED)
    assert set(evidence) == {"refused"}, f"{bypass}: not refused: {json.dumps(evidence)[:300]}"
    assert evidence["refused"].startswith("評分時沒有執行你的答案留下的圖")
    for internal in ("While executing", "Traceback", "tlparse", "%"):  # torch's notes are not for the student
        assert internal not in evidence["refused"], evidence["refused"]


def test_a_call_that_fails_on_any_data_is_left_to_the_case() -> None:
    """``hardtanh(0.0, 6.0, x)`` (extra arguments put first) has a tensor where a number goes, but its ``self``
    is a number: it fails whatever the data, so the case runs it and the feedback names the mistake
    (``extra_args_misplaced``) instead of a refusal; a tensor where a size goes, on a tensor, is refused."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(2, 3)
    out = graph.call_function(torch.ops.aten.hardtanh.default, (0.0, 6.0, x))
    graph.output(out)
    allowed.check_cost(torch.fx.GraphModule(torch.nn.Module(), graph))
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(2, 3)
    top = graph.call_function(torch.ops.aten.amax.default, (x, [0, 1]))
    graph.output(graph.call_function(torch.ops.aten.hardtanh.default, (x, 0.0, top)))
    with pytest.raises(allowed.Refused, match="是一個 tensor 的值") as refused:
        allowed.check_cost(torch.fx.GraphModule(torch.nn.Module(), graph))
    assert "While executing" not in str(refused.value)


def test_an_honest_stale_graph_is_still_accepted() -> None:
    recorded = key_recording("M01-3", "replace_op")
    for state in graph_states(recorded):
        state["stale"] = True
    evidence = derive(exercises_of("M01-3")["replace_op"], recorded, SEED)
    assert "cases" in evidence, json.dumps(evidence)[:300]


def test_a_boolean_mask_is_counted_at_its_worst() -> None:
    aten = torch.ops.aten
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    chosen = graph.call_function(aten.index.Tensor, (x, [graph.call_function(aten.gt.Scalar, (x, 0.0))]))
    column = graph.call_function(aten.unsqueeze.default, (chosen, 1))
    graph.output(
        graph.call_function(aten.mul.Tensor, (column, graph.call_function(aten.unsqueeze.default, (chosen, 0))))
    )
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    allowed.check_cost(gm, [torch.empty(64)])  # 64² floats at worst: accepted
    with pytest.raises(allowed.Refused, match="MB"):  # 20 000² floats at worst, whatever the mask holds
        allowed.check_cost(gm, [torch.empty(20_000)])
    with pytest.raises(allowed.Refused, match="輸入"):  # an input whose shape nothing says
        allowed.check_cost(gm)


def test_only_overloads_on_tensors_are_admitted() -> None:
    aten = torch.ops.aten
    for op in (aten.add.str, aten.add.t, aten.mul.int, aten.mul.left_t, aten.pow.int, aten.eq.str, aten.sum.int):
        assert not allowed.tensor_overload(op), op
    import torchao.quantization.pt2e  # noqa: F401 (registers the quantized_decomposed ops)

    for name in sorted(allowed.OPS):  # every listed overload takes or returns a tensor, as the list claims
        namespace, opname, overload = name.split(".")
        assert allowed.tensor_overload(getattr(getattr(getattr(torch.ops, namespace), opname), overload)), name
