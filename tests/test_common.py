"""Unit tests of common/: the API the seed chapters and notebooks rely on."""

from __future__ import annotations

import base64
import copy
import dataclasses
import subprocess
import sys
from typing import Any
from unittest import mock

import pytest
import torch

from common.graph_utils import observer_nodes, qspec_summary, spec_short, unannotated_ops
from common.models import MODELS, example_inputs, get_model
from common.pt2e import (
    ANNOTATION_KEY,
    QuantizationAnnotation,
    Quantizer,
    SharedQuantizationSpec,
    export_module,
    get_xnnpack_quantizer,
    prepare_pt2e,
    quiet,
)
from common.qspecs import act_spec, weight_spec
from common.viz import STYLES, annotation_notes, draw, draw_stages, table

quiet()


def exported(name: str):
    torch.manual_seed(0)
    return export_module(get_model(name).eval(), example_inputs(2, name))


class Labels(Quantizer):
    """Output labels on named nodes; ``shared`` makes the second share the first's observer."""

    def __init__(self, names: list[str], shared: bool = False) -> None:
        self.names, self.shared = names, shared

    def annotate(self, model):
        nodes = {n.name: n for n in model.graph.nodes}
        for i, name in enumerate(self.names):
            spec = SharedQuantizationSpec(nodes[self.names[0]]) if self.shared and i else act_spec()
            nodes[name].meta[ANNOTATION_KEY] = QuantizationAnnotation(output_qspec=spec)
        return model

    def validate(self, model):
        pass


# --- models -----------------------------------------------------------------------------------------


def test_seed_models_export_to_the_node_names_the_seeds_use() -> None:
    names = [n.name for n in exported("conv_relu").graph.nodes]
    assert {"x", "conv_weight", "conv_bias", "conv2d", "relu"} <= set(names)
    assert [n for n in names if n in ("conv2d", "relu")] == ["conv2d", "relu"]
    residual = [n.name for n in exported("residual").graph.nodes if n.op == "call_function"]
    assert [n for n in residual if not n.startswith("batch_norm")] == ["conv2d", "relu", "conv2d_1", "add", "relu_1"]
    cat = [n.name for n in exported("cat_pool").graph.nodes if n.op == "call_function"]
    assert cat == ["conv2d", "conv2d_1", "cat", "max_pool2d"]


def test_residual_bias_after_bn_folding_is_named_conv1_weight_bias() -> None:
    prepared = prepare_pt2e(exported("residual"), Labels([]))
    assert "conv1_weight_bias" in {n.name for n in prepared.graph.nodes}
    assert not any("batch_norm" in n.name for n in prepared.graph.nodes)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_runs_on_its_example_inputs(name: str) -> None:
    out = get_model(name).eval()(*example_inputs(3, name))
    assert out.shape[0] == 3 and torch.isfinite(out).all()


def test_unknown_model_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="conv_relu"):
        get_model("no_such_model")


# --- graph_utils --------------------------------------------------------------------------------------


def test_observer_nodes_lists_a_shared_instance_once_per_node() -> None:
    prepared = prepare_pt2e(exported("cat_pool"), Labels(["conv2d", "conv2d_1"], shared=True))
    found = observer_nodes(prepared)
    assert len(found) == 2 and len({id(m) for _, m in found}) == 1
    from common.graph_utils import is_observer

    assert sum(is_observer(m) for _, m in prepared.named_modules()) == 1  # named_modules() de-duplicates it


def test_qspec_summary_matches_the_seed_text() -> None:
    _, config = get_xnnpack_quantizer(is_per_channel=True)
    assert qspec_summary(config.input_activation) == "int8 per-tensor affine [-128,127]\nHistogramObserver"
    assert qspec_summary(config.weight) == (
        "int8 per-channel symmetric [-127,127]\nPerChannelMinMaxObserver, ch_axis=0"
    )
    assert qspec_summary(weight_spec(per_channel=False)) == "int8 per-tensor symmetric [-127,127]\nMinMaxObserver"
    assert qspec_summary(None) == "不量化"


def test_unannotated_ops_on_cat_pool_with_xnnpack_are_cat_and_max_pool2d() -> None:
    gm = exported("cat_pool")
    xnnpack, _ = get_xnnpack_quantizer(is_per_channel=True)
    xnnpack.annotate(gm)
    assert [n.name for n in unannotated_ops(gm)] == ["cat", "max_pool2d"]


def test_act_spec_is_int8_affine_minmax() -> None:
    spec = act_spec()
    assert (spec.dtype, spec.quant_min, spec.quant_max, spec.qscheme) == (
        torch.int8,
        -128,
        127,
        torch.per_tensor_affine,
    )
    assert spec.observer_or_fake_quant_ctr.__name__ == "MinMaxObserver"


def test_spec_short_names_shared_specs_by_position() -> None:
    gm = exported("conv_relu")
    nodes = {n.name: n for n in gm.graph.nodes}
    assert spec_short(SharedQuantizationSpec((nodes["x"], nodes["conv2d"]))) == "共用 x → conv2d"
    assert spec_short(SharedQuantizationSpec(nodes["relu"])) == "共用 relu 的輸出"


# --- viz ----------------------------------------------------------------------------------------------


def _node_line(dot: str, name: str) -> str:
    return next(line for line in dot.splitlines() if line.startswith(f'"{name}" ['))


def test_draw_colours_and_shapes_each_kind_of_node() -> None:
    gm = exported("conv_relu")
    prepared = prepare_pt2e(copy.deepcopy(gm), Labels(["relu"]))
    dot = draw(prepared).dot_source
    kinds = {"x": "input", "conv_weight": "constant", "conv2d": "op", "activation_post_process_0": "observer"}
    kinds["output"] = "output"
    for name, kind in kinds.items():
        line = _node_line(dot, name)
        assert f'shape="{STYLES[kind].shape}"' in line and f'fillcolor="{STYLES[kind].fill}"' in line, (name, line)
    assert len({STYLES[k].fill for k in kinds.values()}) == len(kinds), "each kind has its own colour"
    assert '"x" -> "conv2d"' in dot and '"relu" -> "activation_post_process_0"' in dot


def test_draw_writes_notes_under_nodes_and_a_title() -> None:
    drawing = draw(exported("conv_relu"), notes={"conv2d": "第一行\n第二 <行>"}, title="標題")
    line = _node_line(drawing.dot_source, "conv2d")
    assert "第一行" in line and "第二 &lt;行&gt;" in line
    assert "標題" in drawing.dot_source
    assert "      第一行" in drawing.text and drawing.text.startswith("標題")


def test_draw_marks_quantize_and_dequantize_nodes() -> None:
    from common.pt2e import convert_pt2e

    prepared = prepare_pt2e(exported("conv_relu"), Labels(["relu"]))
    prepared(*example_inputs(2))
    dot = draw(convert_pt2e(prepared)).dot_source
    q = next(line for line in dot.splitlines() if line.startswith('"quantize_per_tensor'))
    dq = next(line for line in dot.splitlines() if line.startswith('"dequantize_per_tensor'))
    assert STYLES["quantize"].fill in q and STYLES["dequantize"].fill in dq
    assert "scale=" in q


def test_focus_and_hops_draw_a_neighbourhood() -> None:
    gm = exported("small_cnn")
    lines = draw(gm, focus="max_pool2d", hops=1).dot_source.splitlines()
    names = {line.split('"')[1] for line in lines if "[shape" in line and not line.startswith('"…')}
    assert names == {"relu", "max_pool2d", "conv2d_1"}
    assert any(line.startswith('"…') for line in lines), "cut edges are shown as ⋯"
    exact = draw(gm, focus=["relu", "conv2d_1"], hops=0).text
    assert [line.split()[0] for line in exact.splitlines()] == ["relu", "conv2d_1"]
    with pytest.raises(KeyError, match="focus"):
        draw(gm, focus="nope")


def test_guards_node_hidden_unless_asked() -> None:
    gm = exported("conv_relu")
    assert "_guards_fn" not in draw(gm).dot_source
    assert "_guards_fn" in draw(gm, guards=True).dot_source


def test_draw_stages_frames_new_observers_green_by_position() -> None:
    gm = exported("conv_relu")
    first = prepare_pt2e(copy.deepcopy(gm), Labels(["relu"]))
    second = prepare_pt2e(copy.deepcopy(gm), Labels(["relu", "x"]))
    drawing = draw_stages([(first, "一"), (second, "二")], title="階段")
    assert len(drawing.dot_sources) == 2
    green = [line for line in drawing.dot_sources[1].splitlines() if "penwidth" in line]
    # prepare renumbers observers: x's new one is activation_post_process_0, relu's became _1
    assert len(green) == 1 and "MinMaxObserver" in green[0]
    assert "← x  ＊新" in drawing.text and "← relu  ＊新" in drawing.text.split("[2]")[0]
    svg = drawing.svg()
    assert svg.count("<svg") == 4 and "階段" in svg  # the frame, the title, two panels


def test_svg_and_png_render_inline() -> None:
    bundle = draw(exported("conv_relu"), title="t")._repr_mimebundle_()
    assert bundle["image/svg+xml"].lstrip().startswith("<svg") and "conv2d" in bundle["text/plain"]
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG\r\n\x1a\n")  # more in test_drawings.py


def test_without_dot_a_drawing_says_so_in_one_line_and_shows_text(monkeypatch: pytest.MonkeyPatch) -> None:
    import common.viz

    monkeypatch.setattr(common.viz.shutil, "which", lambda name: None)
    bundle = draw(exported("conv_relu"), title="t")._repr_mimebundle_()
    assert set(bundle) == {"text/plain"}
    first, *rest = bundle["text/plain"].splitlines()
    assert "apt-get install graphviz" in first and "dot" in first
    assert any(line.strip().startswith("conv2d [op]") for line in rest)


def test_annotation_notes_one_line_per_edge_and_output() -> None:
    gm = exported("conv_relu")
    xnnpack, _ = get_xnnpack_quantizer(is_per_channel=True)
    xnnpack.annotate(gm)
    notes = annotation_notes(gm, unlabeled=True)
    assert notes["conv2d"].splitlines() == [
        "邊 x：int8 per-tensor affine",
        "邊 conv_weight：int8 per-channel symmetric",
        "邊 conv_bias：不量化",
    ]
    assert notes["relu"] == "輸出：int8 per-tensor affine"
    assert "conv_weight" not in notes  # an empty annotation on a constant says nothing


def test_table_is_html_in_a_notebook_and_text_elsewhere() -> None:
    t = table([[1, "<a>"], [2, "b"]], ["n", "值"])
    assert '<th style="text-align: left">值</th>' in t._repr_html_() and "&lt;a&gt;" in t._repr_html_()
    assert repr(t).splitlines() == ["| n | 值 |", "|:---|:---|", "| 1 | <a> |", "| 2 | b |"]


def test_importing_common_is_silent() -> None:
    code = "import common.pt2e, common.viz, common.models, common.graph_utils, common.qspecs"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == "", result.stderr


def test_quiet_silences_export_and_prepare_noise() -> None:
    code = (
        "import warnings, copy\n"
        "from common.pt2e import quiet, export_module, prepare_pt2e, get_xnnpack_quantizer\n"
        "from common.models import get_model, example_inputs\n"
        "quiet()\n"
        "warnings.simplefilter('default')\n"
        "quiet()\n"
        "gm = export_module(get_model('residual').eval(), example_inputs(2))\n"
        "p = prepare_pt2e(copy.deepcopy(gm), get_xnnpack_quantizer(True)[0])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stderr == "", result.stderr


def test_quiet_keeps_the_warnings_a_student_can_act_on() -> None:
    """An observer that never saw data still warns (with the course's hint); a student's own deprecation shows."""
    code = (
        "import warnings\n"
        "from common.pt2e import quiet, MinMaxObserver, get_xnnpack_quantizer\n"
        "quiet()\n"
        "get_xnnpack_quantizer(True)\n"
        "MinMaxObserver().calculate_qparams()\n"
        "warnings.warn('mine', DeprecationWarning)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "must run observer before calling calculate_qparams" in result.stderr and "課程提示" in result.stderr
    assert "DeprecationWarning: mine" in result.stderr
    assert "XNNPACKQuantizer is deprecated" not in result.stderr  # said once in M01-2, not on every use


# --- export_cache: a remembered graph only where the trace would be the same ------------------------


class _Scaled(torch.nn.Module):
    def __init__(self, relu: bool = True) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.relu = relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return torch.relu(y) if self.relu else y


def _targets(gm: torch.fx.GraphModule) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_remembered_exports_copy_and_key_on_what_the_trace_depends_on() -> None:
    from common.export_cache import remembered_exports
    from common.pt2e import export_module

    torch.manual_seed(0)
    model, x = _Scaled().eval(), (torch.randn(2, 4),)
    with remembered_exports():
        first = export_module(model, x)
        for given in (first, export_module(model, x)):  # the traced graph, then a remembered one
            with torch.no_grad():
                for tensor in given.state_dict().values():  # a caller's edit of the graph it was given
                    tensor.zero_()
        again = export_module(model, x)
        assert torch.equal(again(*x), model(*x)), "a remembered graph is handed out as a fresh copy"
        assert any("relu" in t for t in _targets(again))
        assert not any("relu" in t for t in _targets(export_module(_Scaled(relu=False).eval(), x)))  # attribute
        changed = _Scaled().eval()
        with torch.no_grad():
            changed.linear.weight.fill_(1.0)
        assert torch.equal(export_module(changed, x)(*x), changed(*x)), "other weights: traced again"
        hooked = _Scaled().eval()
        hooked.register_forward_hook(lambda module, args, out: out * 0)
        assert torch.equal(export_module(hooked, x)(*x), torch.zeros(2, 3))  # hooks: never remembered


@dataclasses.dataclass(frozen=True)
class _Shape:
    relu: bool = True


@dataclasses.dataclass
class _LooseShape:
    relu: bool = True


class _Configured(_Scaled):
    def __init__(self, config: Any) -> None:
        super().__init__(relu=True)
        self.config = config

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return torch.relu(y) if self.config.relu else y


def test_a_model_with_a_frozen_configuration_is_remembered_by_its_fields() -> None:
    """TinyLM keeps its ``TinyLMConfig``: the hidden cases of M09 export the same model once, not per answer;
    another field value is another key, and a mutable dataclass is never remembered."""
    from common import pt2e
    from common.export_cache import remembered_exports

    torch.manual_seed(0)
    x = (torch.randn(2, 4),)
    relu, plain = _Configured(_Shape()).eval(), _Configured(_Shape(relu=False)).eval()
    plain.load_state_dict(relu.state_dict())
    loose = _Configured(_LooseShape()).eval()
    loose.load_state_dict(relu.state_dict())
    real = pt2e.torch.export.export
    with remembered_exports(), mock.patch.object(pt2e.torch.export, "export", side_effect=real) as traced:
        graphs = [pt2e.export_module(model, x) for model in (relu, relu, plain, plain, loose, loose)]
    assert traced.call_count == 4, "a frozen configuration: traced once per field value; a mutable one, every time"
    assert any("relu" in t for t in _targets(graphs[1])) and not any("relu" in t for t in _targets(graphs[3]))


def test_an_edited_graph_never_reaches_the_next_copy() -> None:
    """A caller that labels a node, erases it and recompiles changes only the graph it was given."""
    from common.export_cache import remembered_exports
    from common.pt2e import export_module

    model, x = _Scaled().eval(), (torch.randn(2, 4),)
    with remembered_exports():
        for _ in range(2):  # the traced graph, then a remembered copy
            given = export_module(model, x)
            relu = next(n for n in given.graph.nodes if "relu" in str(n.target))
            relu.meta["quantization_annotation"] = "edited"
            relu.replace_all_uses_with(relu.args[0])
            given.graph.erase_node(relu)
            given.recompile()
        again = export_module(model, x)
    assert any("relu" in t for t in _targets(again))
    assert not any("quantization_annotation" in n.meta for n in again.graph.nodes)
    assert torch.equal(again(*x), model(*x))


def test_outside_remembered_exports_every_export_traces() -> None:
    from unittest import mock

    from common.pt2e import export_module

    model, x = _Scaled().eval(), (torch.randn(2, 4),)
    with mock.patch("torch.export.export", wraps=torch.export.export) as traced:
        export_module(model, x)
        export_module(model, x)
    assert traced.call_count == 2


def test_a_case_stops_at_its_exercises_limit_and_says_which() -> None:
    """``Exercise.case_seconds`` bounds each case (M08-3 lowers programs: 90 s), and the message names it."""
    import time

    from selfcheck.casekit import Exercise, collect

    slow = Exercise("slow", "slow", (), {"sleeps": lambda ns, seed: time.sleep(5)}, case_seconds=1)
    started = time.monotonic()
    evidence = collect(slow, {}, 0)
    assert time.monotonic() - started < 4
    assert evidence["cases"]["sleeps"] == {"error": "Timeout", "message": "超過 1 秒沒有結束"}


# --- torchao's pattern graphs: traced once per process, the same graphs as torchao's own -----------


class _ConvBn(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 2, 3)
        self.bn = torch.nn.BatchNorm2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def _qat_then_convert(model: torch.nn.Module, x: tuple[torch.Tensor, ...]) -> tuple[str, str, torch.Tensor]:
    from torchao.quantization.pt2e import move_exported_model_to_eval
    from torchao.testing.pt2e._xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    from common.pt2e import convert_pt2e, prepare_qat_pt2e

    gm = torch.export.export(copy.deepcopy(model), x).module()  # training updates BN's buffers in place
    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True, is_qat=True))
    prepared = prepare_qat_pt2e(gm, quantizer)
    prepared(*x)
    prepared_code = prepared.code
    move_exported_model_to_eval(prepared)
    converted = convert_pt2e(prepared)
    with torch.no_grad():
        return prepared_code, converted.code, converted(*x)


@pytest.mark.slow  # three QAT prepare + convert runs, one of them with torchao alone (126 traces): about 25 s
@pytest.mark.filterwarnings("ignore:XNNPACKQuantizer is deprecated")
def test_torchao_pattern_graphs_are_traced_once_only_for_convs_present_and_give_the_same_graphs() -> None:
    """torchao alone, then through the memory and the skipping of absent convs cold, then warm: the same
    prepared and converted graphs, outputs and global RNG state (torchao draws random pattern inputs)."""
    from torchao.quantization.pt2e import qat_utils
    from torchao.quantization.pt2e import utils as pt2e_utils

    from common import torchao_cache

    assert hasattr(pt2e_utils._get_aten_graph_module_for_pattern, "__wrapped__"), "common.pt2e routes the traces"
    assert qat_utils._get_aten_graph_module_for_pattern is pt2e_utils._get_aten_graph_module_for_pattern
    assert all(hasattr(getattr(qat_utils, name), "__wrapped__") for name in torchao_cache._QAT_HELPERS)
    torch.manual_seed(0)
    model, x = _ConvBn(), (torch.randn(2, 1, 6, 6),)  # conv2d only: conv1d and the transposed convs are absent

    def run() -> tuple[str, str, torch.Tensor, torch.Tensor]:
        torch.manual_seed(1)
        return (*_qat_then_convert(model, x), torch.get_rng_state())

    from torchao.testing.pt2e import _xnnpack_quantizer  # noqa: F401  (imported now, it takes the routed trace)

    with torchao_cache.torchao_alone():
        routed = [
            name
            for name, module in sys.modules.items()
            if name.startswith("torchao.") and hasattr(vars(module).get(torchao_cache._PATTERN_TRACE), "__wrapped__")
        ]
        assert not routed, f"torchao modules still trace through the memory: {routed}"
        assert qat_utils._get_aten_graph_module_for_pattern is pt2e_utils._get_aten_graph_module_for_pattern
        assert not any(hasattr(getattr(qat_utils, name), "__wrapped__") for name in torchao_cache._QAT_HELPERS)
        with mock.patch("torch.export.export", wraps=torch.export.export) as traced:
            alone = run()
            traced_alone = traced.call_count
    assert hasattr(pt2e_utils._get_aten_graph_module_for_pattern, "__wrapped__"), "put back after the block"
    with mock.patch.object(torchao_cache, "_patterns", torchao_cache.OrderedDict()):
        with mock.patch("torch.export.export", wraps=torch.export.export) as traced:
            # an empty memory: every pattern of conv2d is torchao's own trace (the graph it traced is the one
            # handed out); a pattern of another conv is an unmatchable stand-in, never traced
            own = run()
            traced_cold = traced.call_count
            remembered = run()  # every pattern a copy from memory
            assert traced.call_count - traced_cold == 1, "the second run traces the model only, no pattern"
        assert 10 < traced_cold and len(torchao_cache._patterns) == traced_cold - 1
    assert traced_alone > 2 * traced_cold, (traced_alone, traced_cold)
    for name, ours in (("cold", own), ("remembered", remembered)):
        assert ours[:2] == alone[:2], f"{name}: the same prepared and converted graphs as torchao alone"
        assert torch.equal(ours[2], alone[2]) and torch.equal(ours[3], alone[3]), f"{name}: the same outputs and RNG"


def test_an_absent_conv_gets_a_pattern_that_matches_nothing_and_a_present_one_is_traced() -> None:
    import torch.nn.functional as F

    from common.torchao_cache import skipping_absent_convs, unmatchable

    graph_module = torch.export.export(torch.nn.Conv2d(1, 1, 1), (torch.randn(1, 1, 2, 2),)).module()
    seen = []

    def helper(m, conv_fn, example_inputs, is_cuda):  # what torchao's helper does: trace its patterns
        from torchao.quantization.pt2e import utils as pt2e_utils
        from torchao.quantization.pt2e.export_utils import WrapperModule

        pattern = WrapperModule(lambda x: conv_fn(x, x))
        seen.append(pt2e_utils._get_aten_graph_module_for_pattern(pattern, example_inputs, is_cuda))
        return m

    skipping = skipping_absent_convs(helper)
    skipping(graph_module, F.conv2d, (torch.randn(1, 1, 2, 2),), False)
    skipping(graph_module, F.conv1d, (torch.randn(1, 1, 2),), False)
    traced, stand_in = seen
    assert torch.ops.aten.conv2d.default in {n.target for n in traced.graph.nodes}
    assert [n.target for n in stand_in.graph.nodes if n.op == "call_function"] == [torch.ops.aten.conv1d.default]
    assert [n.target for n in unmatchable(torch.ops.aten.conv1d.default).graph.nodes if n.op == "call_function"] == [
        torch.ops.aten.conv1d.default
    ]


def test_a_pattern_whose_trace_could_differ_is_never_remembered() -> None:
    from common.export_cache import Unkeyable
    from common.torchao_cache import pattern_key

    class Scale(torch.nn.Module):
        def __init__(self, factor: float) -> None:
            super().__init__()
            self.factor = factor

        def pattern(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.factor

    x = (torch.randn(1, 3),)
    for pattern in (Scale(2.0).pattern, Scale(2.0), torch.nn.Linear(3, 3)):  # bound method, module state
        with pytest.raises(Unkeyable):
            pattern_key(pattern, x, False, {})

    def make(factor: float):
        def pattern(x: torch.Tensor) -> torch.Tensor:
            return x * factor

        return pattern

    assert pattern_key(make(2.0), x, False, {}) == pattern_key(make(2.0), x, False, {})
    assert pattern_key(make(2.0), x, False, {}) != pattern_key(make(3.0), x, False, {})  # what the closure holds
    assert pattern_key(make(2.0), x, False, {}) != pattern_key(make(2.0), (torch.randn(2, 3),), False, {})
    assert pattern_key(make(2.0), x, False, {}) == pattern_key(make(2.0), (torch.randn(1, 3),), False, {})


def test_histogram_searches_are_remembered_by_what_they_read() -> None:
    """The same histogram gives the same range without a search; another histogram, a subclass or a replaced
    helper searches; the result is torchao's own."""
    from torchao.quantization.pt2e.observer import HistogramObserver

    from common import torchao_cache

    search = HistogramObserver._non_linear_param_search
    assert hasattr(search, "__wrapped__"), "common.pt2e routes the searches"
    torch.manual_seed(0)
    data = torch.randn(4096) * 3

    def observed(cls: type = HistogramObserver, values: torch.Tensor = data) -> HistogramObserver:
        observer = cls(dtype=torch.int8, quant_min=-128, quant_max=127)
        observer(values)
        return observer

    class Mine(HistogramObserver):
        pass

    with mock.patch.object(torchao_cache, "_searches", torchao_cache.OrderedDict()):
        with mock.patch.object(
            HistogramObserver,
            "_compute_quantization_error",
            autospec=True,
            side_effect=HistogramObserver._compute_quantization_error,
        ) as errors:
            first = observed().calculate_qparams()
            searched = errors.call_count
            again = observed().calculate_qparams()
            assert errors.call_count == searched > 0, "the same histogram: no search"
            observed(values=data * 2).calculate_qparams()
            after_other = errors.call_count
            assert after_other > searched, "another histogram: a search"
            observed(Mine).calculate_qparams()
            assert errors.call_count > after_other, "a subclass: a search"
        own = observed()
        low, high = search.__wrapped__(own)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    remembered = observed()
    assert torch.equal(remembered._non_linear_param_search()[0], low)
    assert torch.equal(remembered._non_linear_param_search()[1], high)
    replaced = observed()
    replaced._get_norm = lambda *args: torch.zeros(2048)
    assert torchao_cache.histogram_key(replaced, HistogramObserver) is None


def test_executorchs_experimental_warning_is_noise() -> None:
    """The runtime's first use warns ``ExperimentalWarning`` (a DeprecationWarning; M08, M09-3): filtered
    wherever it is attributed, as the other library noise is."""
    import warnings

    from common._noise import add_warning_filters

    class ExperimentalWarning(DeprecationWarning):
        pass

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        add_warning_filters()
        warnings.warn(
            "This API is experimental and subject to change without notice.", ExperimentalWarning, stacklevel=1
        )
        warnings.warn("a student's own deprecation", DeprecationWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["a student's own deprecation"]


# --- common.fx_code_cache ---------------------------------------------------------------------------


def test_torch_fx_compiles_through_the_cache_here() -> None:
    from torch.fx import graph_module, traceback

    from common import fx_code_cache

    assert fx_code_cache.installed(), "common.pt2e installs it: torch's two functions are the ones it was written from"
    assert graph_module._exec_with_source is fx_code_cache._exec_with_source
    assert traceback.NodeSource.__init__ is fx_code_cache._node_source_init
    with fx_code_cache.torch_alone():
        assert graph_module._exec_with_source is not fx_code_cache._exec_with_source
    assert graph_module._exec_with_source is fx_code_cache._exec_with_source


def test_a_recompiled_graph_gets_its_own_file_name_and_lines_and_runs_as_before() -> None:
    import linecache

    from common import fx_code_cache

    graph = exported("conv_bn_relu")
    x = example_inputs(2, "conv_bn_relu")
    copies = [copy.deepcopy(graph) for _ in range(3)]  # the same text three times: compiled once
    with fx_code_cache.torch_alone():
        alone = copy.deepcopy(graph)
    files = [type(g).forward.__code__.co_filename for g in [*copies, alone]]
    assert len(set(files)) == 4 and all(f.startswith("<eval_with_key>.") for f in files), files
    first_line = type(alone).forward.__code__.co_firstlineno
    for g in copies:
        code = type(g).forward.__code__
        assert code.co_code == type(alone).forward.__code__.co_code and code.co_firstlineno == first_line
        assert linecache.getline(code.co_filename, first_line) == linecache.getline(files[-1], first_line) != ""
        assert g.code == alone.code
        torch.testing.assert_close(g(*x), alone(*x), rtol=0, atol=0)
    size = fx_code_cache.size()
    copy.deepcopy(graph)
    assert fx_code_cache.size() == size, "a text compiled before is not compiled again"


def test_a_text_compiled_again_keeps_the_file_name_of_every_function_in_it() -> None:
    from common.fx_code_cache import compiled

    source = "def outer():\n    def inner():\n        return 1\n    return inner\n"
    first, again = compiled(source, "<first>"), compiled(source, "<again>")
    assert first.co_filename == "<first>" and again.co_filename == "<again>"
    inner = [c for c in again.co_consts if hasattr(c, "co_code")]
    assert inner and all(c.co_filename == "<again>" for c in inner)
    assert all(n.co_filename == "<again>" for c in inner for n in c.co_consts if hasattr(n, "co_code"))


def _provenance(program: torch.export.ExportedProgram) -> list[Any]:
    """Every node's history, graphs numbered by first appearance (their ids differ from run to run)."""
    numbers: dict[int, int] = {}

    def renumbered(record: dict[str, Any]) -> dict[str, Any]:
        number = numbers.setdefault(record["graph_id"], len(numbers))
        return {**record, "graph_id": number, "from_node": [renumbered(r) for r in record["from_node"]]}

    return [[renumbered(s.to_dict()) for s in node.meta.get("from_node", [])] for node in program.graph.nodes]


def test_provenance_holds_what_torch_records_without_copying_it() -> None:
    """Decomposing an exported program twice (two passes of records on every node): the same history."""
    from common import fx_code_cache

    model = get_model("conv_bn_relu").eval()
    x = example_inputs(2, "conv_bn_relu")

    def decomposed() -> torch.export.ExportedProgram:
        return torch.export.export(model, x).run_decompositions().run_decompositions()

    ours = decomposed()
    with fx_code_cache.torch_alone():
        theirs = decomposed()
    assert any(len(sources) for sources in _provenance(ours)), "the passes record where nodes came from"
    assert _provenance(ours) == _provenance(theirs)
