"""autograder.maintenance.outputs: two runs show the same thing on any CPU, and a stale output is still caught."""

from __future__ import annotations

import nbformat
import pytest

from autograder.maintenance.outputs import MACHINE, notebook_difference, same_number, text_difference
from selfcheck.compare import FLOAT32


@pytest.mark.parametrize(
    ("committed", "fresh"),
    [
        ("0.098324", "0.098325"),  # the last digit (seen between CPUs)
        ("40.11", "40.12"),
        ("0.014144974760711193", "0.014144975692033768"),  # float32 noise printed with all its digits
        ("1e-05", "1.00001e-05"),
        ("inf", "inf"),
    ],
)
def test_numbers_another_cpu_prints_are_the_same(committed: str, fresh: str) -> None:
    assert text_difference(f"SQNR {committed} dB", f"SQNR {fresh} dB") is None


@pytest.mark.parametrize(
    ("committed", "fresh"),
    [
        ("356", "355"),  # a count is exact
        ("0.9889", "0.9861"),  # one image of 360
        ("40.11", "40.15"),
        ("0.0284", "0.0291"),
        ("12", "12.5"),
    ],
)
def test_a_changed_number_is_stale(committed: str, fresh: str) -> None:
    assert text_difference(f"value {committed}", f"value {fresh}") is not None


def test_words_and_identifiers_are_exact() -> None:
    assert text_difference("conv2d_1 int8", "conv2d_2 int8") is not None
    assert text_difference("observer 3 個", "observer 3 個 ") is not None
    assert text_difference("a\nb", "a\nb\nc") is not None
    assert same_number("7", "7") and not same_number("7", "8")
    assert FLOAT32.rel < 1e-3  # the printed tolerance is the previews' float32 one, not a looser one


def _nb(*cells: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(cells=list(cells))


def _cell(text: str, tags: tuple[str, ...] = (), picture: str | None = None) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("x", metadata={"tags": list(tags)})
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    if picture is not None:
        data = {"image/png": picture, "text/plain": "<Figure size 100x100 with 1 Axes>"}
        cell.outputs.append(nbformat.v4.new_output("display_data", data=data))
    return cell


def test_a_cell_measured_on_this_machine_compares_its_text_only() -> None:
    assert notebook_difference(_nb(_cell("0.21x", (MACHINE,))), _nb(_cell("0.57x", (MACHINE,)))) is None
    assert notebook_difference(_nb(_cell("比 0.21x", (MACHINE,))), _nb(_cell("快 0.57x", (MACHINE,)))) is not None
    assert notebook_difference(_nb(_cell("0.21x")), _nb(_cell("0.57x"))) is not None


def test_pictures_are_compared_by_kind_and_the_text_beside_them() -> None:
    assert notebook_difference(_nb(_cell("a", picture="AAAA")), _nb(_cell("a", picture="BBBB"))) is None
    assert notebook_difference(_nb(_cell("a", picture="AAAA")), _nb(_cell("a"))) is not None
    missing_cell = _nb(_cell("a"), _cell("b"))
    assert "數目" in (notebook_difference(missing_cell, _nb(_cell("a"))) or "")


def test_float32_rounding_noise_only_needs_to_stay_noise() -> None:
    """A difference that should be zero prints the CPU's rounding: any two such values agree, a real value does not."""
    from autograder.maintenance.outputs import same_number

    assert same_number("3.6e-07", "4.8e-07") and same_number("3.0e-08", "1.5e-08")
    assert not same_number("3.6e-07", "2.0e-04") and not same_number("1.2e-05", "3.0e-05")
