"""common.data: the bundled digits, the small CNN trained on them, and the measuring helpers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from common import data, tinylm


def test_split_is_the_bundled_digits_without_overlap() -> None:
    from sklearn.datasets import load_digits

    split = data.digits()
    assert split.train_x.shape == (1077, *data.IMAGE_SHAPE) and split.test_x.shape == (360, *data.IMAGE_SHAPE)
    assert split.val_x.shape == (360, *data.IMAGE_SHAPE) and split.val_y.shape == (360,)
    assert split.train_x.dtype == torch.float32 and split.train_y.dtype == torch.int64
    images = torch.cat([split.train_x, split.val_x, split.test_x]).flatten(1)
    labels = torch.cat([split.train_y, split.val_y, split.test_y])
    bunch = load_digits()
    reference = torch.from_numpy(bunch.data).float() / 16
    # same images with the same labels, each exactly once
    order = sorted(range(len(labels)), key=lambda i: (images[i].tolist(), int(labels[i])))
    want = sorted(range(len(bunch.target)), key=lambda i: (reference[i].tolist(), int(bunch.target[i])))
    assert torch.equal(images[order], reference[want])
    assert torch.equal(labels[order], torch.from_numpy(bunch.target)[want])
    assert sorted(split.test_y.bincount().tolist())[0] >= 25  # every class is in the test set
    assert sorted(split.val_y.bincount().tolist())[0] >= 25  # and in the validation set


def test_digits_returns_copies() -> None:
    first = data.digits()
    first.train_x.zero_()
    first.test_y.fill_(3)
    again = data.digits()
    assert again.train_x.abs().sum() > 0 and not torch.equal(again.test_y, first.test_y)


def test_model_is_a_fresh_copy_of_the_shipped_weights_in_eval_mode() -> None:
    model = data.digits_model()
    assert not model.training
    with torch.no_grad():
        model.fc.weight.zero_()
    assert data.digits_model().fc.weight.abs().sum() > 0
    assert data.state_digest(data.digits_model().state_dict()) == data.WEIGHTS_SHA256
    accuracy = data.accuracy(data.digits_model())
    assert 0.97 <= accuracy <= 1.0, accuracy


@pytest.mark.parametrize(
    ("module", "load", "name", "key"),
    [
        (data, data.digits_model, "digits", "fc.bias"),
        (tinylm, tinylm.tinylm_model, "TinyLM", "blocks.1.attn.k.bias"),
    ],
    ids=["digits", "tinylm"],
)
def test_damaged_weights_are_refused_with_a_message(
    module: Any,
    load: Callable[[], torch.nn.Module],
    name: str,
    key: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each shipped model's loader (``common.data.load_shipped``) refuses a changed or unreadable file, by name."""
    state = {k: v.clone() for k, v in load().state_dict().items()}
    state[key][0] += 1e-6  # one value changed in its last bits
    damaged = tmp_path / module.WEIGHTS.name
    torch.save(state, damaged)
    monkeypatch.setattr(module, "WEIGHTS", damaged)
    module._shipped_state.cache_clear()
    try:
        with pytest.raises(data.WeightsDamaged, match=f"{name}.*checksum"):
            load()
        damaged.write_bytes(b"not a checkpoint")
        module._shipped_state.cache_clear()
        with pytest.raises(data.WeightsDamaged, match=f"讀不到.*{name}"):
            load()
    finally:
        module._shipped_state.cache_clear()


def test_the_digest_is_of_the_values_not_the_file() -> None:
    state = data.digits_model().state_dict()
    assert data.state_digest(dict(reversed(list(state.items())))) == data.state_digest(state)
    changed = {**state, "fc.bias": state["fc.bias"].to(torch.float64)}
    assert data.state_digest(changed) != data.state_digest(state)


def test_training_does_not_depend_on_the_thread_setting() -> None:
    threads = torch.get_num_threads()
    states = []
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            states.append(data.train_digits_model().state_dict())
    finally:
        torch.set_num_threads(threads)
    assert torch.get_num_threads() == threads
    assert states[0].keys() == states[1].keys()
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
    assert 0.95 <= data.accuracy(data.train_digits_model()) <= 1.0  # the recipe works here, whatever the CPU


def test_training_and_loading_leave_the_global_rng_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    data._shipped_state.cache_clear()
    data.digits_model()
    data.train_digits_model()
    assert torch.equal(torch.rand(3), expected)


def test_exported_graph_takes_any_batch_and_ptq_keeps_accuracy() -> None:
    from common.pt2e import get_xnnpack_quantizer

    model = data.digits_model()
    gm = data.export(model)
    split = data.digits()
    with torch.no_grad():
        assert torch.allclose(gm(split.test_x[:3]), model(split.test_x[:3]), atol=1e-5)
    assert data.accuracy(gm) == data.accuracy(model)
    quantizer, _ = get_xnnpack_quantizer(is_per_channel=True)
    prepared, converted = data.ptq(model, quantizer)
    assert data.accuracy(prepared) == data.accuracy(model)  # observers only look
    assert abs(data.accuracy(converted) - data.accuracy(model)) <= 0.02
    assert any(str(n.target).startswith("quantized_decomposed.") for n in converted.graph.nodes)
    assert not any(str(n.target).startswith("quantized_decomposed.") for n in prepared.graph.nodes)


def test_sqnr() -> None:
    x = torch.randn(100, generator=torch.Generator().manual_seed(0))
    assert data.sqnr(x, x.clone()) == float("inf")
    assert abs(data.sqnr(x, x / 2) - 10 * torch.log10(torch.tensor(4.0, dtype=torch.float64)).item()) < 1e-9
    shifted = x + 5  # the signal is power, not variance
    assert data.sqnr(shifted, shifted + 0.1) > data.sqnr(x, x + 0.1) + 10
    assert abs(data.sqnr(x.to(torch.bfloat16), x.to(torch.bfloat16) * 0.5) - 6.0206) < 1e-3


def test_calibration_batches_are_fixed_training_images() -> None:
    batches = data.calibration_batches(3, 16)
    assert [b[0].shape for b in batches] == [(16, *data.IMAGE_SHAPE)] * 3
    assert torch.equal(torch.cat([b[0] for b in batches]), data.digits().train_x[:48])
    assert torch.equal(data.example_inputs(5)[0], data.digits().train_x[:5])
