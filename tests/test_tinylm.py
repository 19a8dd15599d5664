"""common.tinylm (M09): the made-up language, TinyLM, its shipped weights and its measuring tools.

No training beyond a few steps and no ExecuTorch: the whole file runs in seconds on one thread.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
import torch
from conftest import ROOT
from torch import nn

from common import data, tinylm

# The agreement rules, written out here rather than read from common.tinylm (whose word lists are the vocabulary).
SINGULAR_ONLY = {"a", "one"}
PLURAL_ONLY = {"two", "some"}
EITHER = {"the"}


def _noun_phrase(words: list[str]) -> tuple[bool, list[str]]:
    """(plural, the words after it) of ``det [adjective] noun[s]`` at the start of ``words``; AssertionError if it is not one."""
    assert len(words) >= 2, words
    det, rest = words[0], words[1:]
    if rest[0] in tinylm.ADJECTIVES:
        rest = rest[1:]
    assert rest, words
    noun, rest = rest[0], rest[1:]
    plural = noun.endswith("s") and noun[:-1] in tinylm.NOUNS
    assert plural or noun in tinylm.NOUNS, f"{noun!r} is no noun"
    allowed = EITHER | (PLURAL_ONLY if plural else SINGULAR_ONLY)
    assert det in allowed, f"{det!r} before {noun!r}"
    return plural, rest


def check_sentence(sentence: str) -> tuple[str, bool]:
    """Check one sentence (without its full stop) against the grammar; returns (determiner, plural) of its subject."""
    words = sentence.split(" ")
    plural, rest = _noun_phrase(words)
    assert rest, sentence
    verb, rest = rest[0], rest[1:]
    want = verb if plural else verb.removesuffix("s")
    assert want in tinylm.VERBS and (plural or verb.endswith("s")), (
        f"{verb!r} after a {'plural' if plural else 'singular'} subject: {sentence!r}"
    )
    _, rest = _noun_phrase(rest)
    assert not rest, f"words after the object: {sentence!r}"
    return words[0], plural


def sentences(string: str) -> list[str]:
    """The sentences of ``string`` (whole sentences, each ending in a full stop, one space apart)."""
    assert string.endswith("."), string[-20:]
    return string[:-1].split(". ")


# --- the language --------------------------------------------------------------------------------------


def test_the_text_is_the_same_per_seed_and_leaves_the_global_rng_alone() -> None:
    random.seed(7)
    expected = random.random()
    random.seed(7)
    first = tinylm.text(3, 2_000)
    assert random.random() == expected
    assert tinylm.text(3, 2_000) == first and tinylm.text(4, 2_000) != first
    assert len(first) >= 2_000 and tinylm.text(3, 4_000).startswith(first)


def test_thousands_of_sentences_obey_the_agreement_rules() -> None:
    found = [check_sentence(s) for s in sentences(tinylm.text(5, 100_000))]
    assert len(found) >= 3_000
    subjects = Counter(found)
    # every determiner opens a subject, and "the" opens singular and plural ones: the rules were exercised
    assert {det for det, _ in subjects} == SINGULAR_ONLY | PLURAL_ONLY | EITHER
    assert subjects["the", True] > 100 and subjects["the", False] > 100
    assert set(tinylm.VOCAB) == set(tinylm.text(5, 100_000)) and len(tinylm.VOCAB) == len(set(tinylm.VOCAB))


def test_tokens_windows_and_batches() -> None:
    string = tinylm.text(0, 300)
    assert tinylm.decode(tinylm.encode(string)) == string
    with pytest.raises(ValueError, match="不是這個語言的字元"):
        tinylm.encode("The cat.")
    tokens = tinylm.train_tokens()
    assert tokens.dtype == torch.int64 and len(tokens) >= tinylm.TRAIN_CHARS
    assert tinylm.decode(tokens) == tinylm.text(tinylm.TRAIN_SEED, tinylm.TRAIN_CHARS)
    x, y = tinylm.heldout()
    assert x.shape == y.shape == (tinylm.HELDOUT_WINDOWS, tinylm.CONTEXT)
    assert torch.equal(x[:, 1:], y[:, :-1]) and torch.equal(x[1:, 0], y[:-1, -1])  # targets: the next token
    assert tinylm.decode(x.reshape(-1)) == tinylm.text(tinylm.HELDOUT_SEED, x.numel())[: x.numel()]
    x.zero_()
    assert tinylm.heldout()[0].any()  # a copy
    (batch,) = tinylm.example_inputs(5)
    assert torch.equal(batch, tinylm.heldout()[0][:5])
    calibration = tinylm.calibration_batches(3, 4)
    assert [b[0].shape for b in calibration] == [(4, tinylm.CONTEXT)] * 3
    assert torch.equal(torch.cat([b[0] for b in calibration]).reshape(-1), tokens[: 12 * tinylm.CONTEXT])


# --- the model and its shipped weights ------------------------------------------------------------------


def expected_parameters(c: tinylm.TinyLMConfig) -> int:
    """Parameters that follow from the configuration: embeddings, blocks, final norm and head."""

    def linear(inputs: int, outputs: int) -> int:
        return inputs * outputs + outputs

    norm = 2 * c.d_model
    block = 2 * norm + 4 * linear(c.d_model, c.d_model) + linear(c.d_model, c.mlp) + linear(c.mlp, c.d_model)
    return (c.vocab + c.context) * c.d_model + c.layers * block + norm + linear(c.d_model, c.vocab)


def test_the_shipped_model_is_a_fresh_copy_in_eval_mode_and_leaves_the_rng_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    tinylm._shipped_state.cache_clear()
    model = tinylm.tinylm_model()
    tinylm.new_tinylm()
    assert torch.equal(torch.rand(3), expected)
    assert not model.training
    assert data.state_digest(model.state_dict()) == tinylm.WEIGHTS_SHA256
    assert sum(p.numel() for p in model.parameters()) == expected_parameters(model.config) == 71_700
    with torch.no_grad():
        model.head.weight.zero_()
    assert tinylm.tinylm_model().head.weight.abs().sum() > 0


def test_the_shipped_weights_score_far_better_than_chance() -> None:
    chance = tinylm.chance()
    assert chance.perplexity == len(tinylm.VOCAB)
    assert 0.15 < chance.accuracy < 0.3  # the most common next character (a space)
    score = tinylm.score(tinylm.tinylm_model())
    # shipped: 0.785 and 1.599 on every CPU checked; the grammar allows nothing much better
    assert 0.75 < score.accuracy < 0.82 and score.accuracy > 3 * chance.accuracy, score
    assert 1.3 < score.perplexity < 1.7, score
    assert re.fullmatch(r"accuracy 0\.\d{3}, perplexity 1\.\d{3}", str(score)), str(score)
    untrained = tinylm.score(tinylm.new_tinylm())
    assert untrained.accuracy < 0.35 and untrained.perplexity > 10, untrained


def test_complete_continues_prompts_with_grammatical_sentences() -> None:
    model = tinylm.tinylm_model()
    for prompt in (". a red hen", ". two cats", ". the old dog", ". some"):
        completed = tinylm.complete(model, prompt, 40)
        assert completed.startswith(prompt) and len(completed) == len(prompt) + 40
        whole = completed[2 : completed.rindex(".") + 1]  # after the prompt's full stop, up to the last one
        found = [check_sentence(s) for s in sentences(whole)]
        assert len(found) >= 1, completed
        last = completed[completed.rindex(".") + 1 :].split()  # the sentence being written: known words so far
        known = {*SINGULAR_ONLY, *PLURAL_ONLY, *EITHER, *tinylm.ADJECTIVES, *tinylm.NOUNS, *tinylm.VERBS}
        assert all(w in known or w.removesuffix("s") in known for w in last[:-1]), completed


# --- export: the ops M09 teaches ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported() -> tuple[tinylm.TinyLM, torch.fx.GraphModule]:
    model = tinylm.tinylm_model()
    return model, torch.export.export(model, tinylm.example_inputs(32)).module()


def test_the_exported_graph_holds_the_ops_of_the_architecture(exported) -> None:
    model, gm = exported
    c = model.config
    counts = Counter(n.target for n in gm.graph.nodes if n.op == "call_function")
    aten = torch.ops.aten
    expected = {
        aten.embedding.default: 2,  # tokens and positions
        aten.linear.default: c.layers * (4 + 2) + 1,  # q, k, v, out and the MLP's two per block, then the head
        aten.layer_norm.default: c.layers * 2 + 1,  # ln1, ln2 per block, then ln_f
        aten.matmul.default: c.layers * 2,  # q kᵀ and the weighted sum of v
        aten.softmax.int: c.layers,
        aten.masked_fill.Scalar: c.layers,
        aten.gelu.default: c.layers,
    }
    assert {op: counts[op] for op in expected} == expected
    # every linear node knows its module (what set_module_name / set_module_type match on)
    linears = [n for n in gm.graph.nodes if n.target == aten.linear.default]
    names = {list(n.meta["nn_module_stack"].values())[-1][0] for n in linears}
    assert names == {name for name, m in model.named_modules() if isinstance(m, nn.Linear)}


def test_the_exported_graph_scores_as_the_model(exported) -> None:
    model, gm = exported
    x, _ = tinylm.heldout()
    with torch.no_grad():
        assert torch.allclose(gm(x[:32]), model(x[:32]), atol=1e-5)
    eager, graph = tinylm.score(model), tinylm.score(gm, batch=32)
    assert abs(eager.accuracy - graph.accuracy) <= 2 / x.numel() and abs(eager.perplexity - graph.perplexity) < 1e-4


VARIANTS = [
    tinylm.TinyLMConfig(bias=False),
    tinylm.TinyLMConfig(norm_first=False),
    tinylm.TinyLMConfig(activation="relu"),
    tinylm.TinyLMConfig(vocab=11, context=8, d_model=24, heads=3, layers=3, mlp=40, bias=False, norm_first=False),
]


@pytest.mark.parametrize(
    "config", VARIANTS, ids=lambda c: f"bias{c.bias:d}-pre{c.norm_first:d}-{c.activation}-L{c.layers}"
)
def test_every_variant_exports_and_runs(config: tinylm.TinyLMConfig) -> None:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = tinylm.TinyLM(config).eval()
    inputs = (torch.randint(config.vocab, (2, config.context)),)
    gm = torch.export.export(model, inputs).module()
    with torch.no_grad():
        assert torch.allclose(gm(*inputs), model(*inputs), atol=1e-5)
        assert gm(*inputs).shape == (2, config.context, config.vocab)
    counts = Counter(n.target for n in gm.graph.nodes if n.op == "call_function")
    aten = torch.ops.aten
    linears = [n for n in gm.graph.nodes if n.target == aten.linear.default]
    assert len(linears) == config.layers * 6 + 1
    assert all((len(n.args) > 2 and n.args[2] is not None) == config.bias for n in linears)
    assert all(isinstance(m.bias, nn.Parameter) == config.bias for m in model.modules() if isinstance(m, nn.Linear))
    activation = aten.gelu.default if config.activation == "gelu" else aten.relu.default
    assert counts[activation] == config.layers and counts[aten.layer_norm.default] == 2 * config.layers + 1
    # pre-LN: a layer_norm feeds the block's q; post-LN: the embeddings' sum does
    q = next(n for n in linears if list(n.meta["nn_module_stack"].values())[-1][0] == "blocks.0.attn.q")
    assert (q.args[0].target == aten.layer_norm.default) == config.norm_first


def test_an_unknown_activation_is_refused() -> None:
    with pytest.raises(ValueError, match="silu"):
        tinylm.TinyLM(tinylm.TinyLMConfig(activation="silu"))


# --- training ---------------------------------------------------------------------------------------------


def test_training_is_the_same_twice_whatever_the_thread_setting() -> None:
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    runs = []
    try:
        for count in (2, 1):
            torch.set_num_threads(count)
            model = tinylm.new_tinylm()
            losses = tinylm.train(model, steps=5)
            runs.append((losses, model.state_dict()))
    finally:
        torch.set_num_threads(threads)
    assert torch.get_num_threads() == threads and torch.equal(torch.rand(3), expected)
    (losses, state), (losses_again, state_again) = runs
    assert losses == losses_again and len(losses) == 5 and losses[-1] < losses[0]
    assert all(torch.equal(state[k], state_again[k]) for k in state)
    assert not torch.equal(state["head.weight"], tinylm.new_tinylm().state_dict()["head.weight"])  # it did train


def test_the_training_script_writes_the_weights_and_their_checksum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autograder.maintenance.isa import PROFILES
    from autograder.maintenance.weights import PROFILE, rerun_capped, write_weights

    source = tmp_path / "shipped.py"
    source.write_text('"""A module that ships weights."""\n\nWEIGHTS_SHA256 = "0"\nOTHER = 1\n', encoding="utf-8")
    module = ModuleType("shipped")
    module.__file__, module.WEIGHTS = str(source), tmp_path / "shipped.pt"
    model = tinylm.new_tinylm()
    digest = write_weights(model, module)
    assert digest == data.state_digest(model.state_dict())
    assert f'\nWEIGHTS_SHA256 = "{digest}"\nOTHER = 1\n' in source.read_text(encoding="utf-8")
    assert data.load_shipped(module.WEIGHTS, digest, "test").keys() == model.state_dict().keys()
    for variable, value in PROFILES[PROFILE].items():
        monkeypatch.setenv(variable, value)
    assert rerun_capped() is None  # already capped: the script trains in this process


def test_importing_tinylm_is_silent_and_leaves_executorch_out() -> None:
    code = (
        "import sys, common.tinylm\n"
        "assert common.tinylm.__file__.startswith(sys.argv[1]), common.tinylm.__file__\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('executorch', 'torchao')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-W", "default", "-c", code, str(ROOT)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert result.stdout == "[]\n"
