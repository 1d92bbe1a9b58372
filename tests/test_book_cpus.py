"""The book's claims about training hold on other CPUs, not only on the one that builds it.

PyTorch's vector kernels (``ATEN_CPU_CAPABILITY``: default, avx2, avx512) and MKL's
dispatch (``MKL_CBWR``) change floating-point rounding, and a training run near a tipping
point then ends elsewhere. ``make book`` executes every notebook under this machine's own
setting; here the cells of the chapters whose claims are about training itself (a seed
study, a fitted baseline: tagged ``trains`` in the notebook, with the cells they need)
execute again under every other capability this CPU offers, the last of them with MKL's
compatible mode (so that, with the build, every capability and both MKL modes run), and
every ``assert`` in them must hold. The claims about
trained models are about shipped weights (``solutions/shipped.py``) and need no retraining.

The notebooks whose code trains anything are listed here, and every cell that calls a
trainer is tagged: a new training claim cannot escape this test by being untagged.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import torch

BOOK = Path(__file__).resolve().parents[1] / "book"
TAG = "trains"
#: the chapters whose pages say what training does (the other chapters read shipped models,
#: or train nothing)
TRAINING_NOTEBOOKS = ("ch2_soft_hard", "ch5_multihead", "ch6_transformer")
#: a call that trains with PyTorch: the trainers of solutions (train_loop, every train_*,
#: seq2seq's train(...) but not a module's .train() / .train(False), and the *_baseline
#: rules, some of which fit by gradient descent, also when called as fit(...)), or a
#: trainer handed to a pool. (Chapter
#: 1's fit_bandwidth takes its gradient steps in NumPy, which neither setting touches.)
TRAINS = re.compile(
    r"\b(train_loop|train_[a-z_]+|[a-z_]+_baseline)\s*\(|"
    r"\btrain\((?!\s*(True|False|mode\s*=\s*\w+|\w+ == \"train\")?\s*\))|"
    r"\bsubmit\(\s*train|\bfit\("
)
CAPABILITIES = ("default", "avx2", "avx512")  # ATen's order: each includes the last


def offered_capabilities() -> list[str]:
    """The ``ATEN_CPU_CAPABILITY`` values this CPU runs: up to the one torch picks."""
    best = torch.backends.cpu.get_cpu_capability().lower()
    return list(CAPABILITIES[: CAPABILITIES.index(best) + 1])


def settings() -> list[tuple[str, str]]:
    """(capability, MKL_CBWR) pairs that, with the build's own (the CPU's capability, MKL
    left to choose), run every capability the CPU offers and both MKL modes, in as few
    executions as that takes: every other capability with MKL left to choose, except the
    last, which runs with MKL's compatible mode (on a CPU with one capability, that one)."""
    *others, own = offered_capabilities()
    if not others:
        return [(own, "COMPATIBLE")]
    return [(capability, "") for capability in others[:-1]] + [(others[-1], "COMPATIBLE")]


def training_cells(name: str) -> list:
    nb = nbformat.read(BOOK / f"{name}.ipynb", as_version=4)
    return [c for c in nb.cells if c.cell_type == "code" and TAG in c.metadata.get("tags", [])]


def _calls_a_trainer(source: str) -> bool:
    code = "\n".join(line.split("#", 1)[0] for line in source.splitlines())
    return bool(TRAINS.search(code))


def test_every_cell_that_trains_is_tagged_and_every_such_notebook_listed():
    for path in sorted(BOOK.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        untagged = [
            i
            for i, c in enumerate(nb.cells)
            if c.cell_type == "code"
            and _calls_a_trainer(c.source)
            and TAG not in c.metadata.get("tags", [])
        ]
        assert not untagged, f"{path.name}: cells {untagged} train but are not tagged {TAG!r}"
        tagged = any(TAG in c.metadata.get("tags", []) for c in nb.cells)
        assert tagged == (path.stem in TRAINING_NOTEBOOKS), path.name


def test_the_trainer_pattern_sees_the_calls_that_train():
    assert _calls_a_trainer("_, h = sh.train_hard_attention('none', seed=s, **task)")
    assert _calls_a_trainer("fit = shortcuts.cnn_baseline(train, kernel=2)")
    assert _calls_a_trainer("model, _ = train_loop(build, batch_loss, steps=300, seed=s)")
    assert not _calls_a_trainer("model, history = shipped.load('ch6_translator')")
    assert not _calls_a_trainer("x = 1  # train_translator(seed=0) made it")
    assert not _calls_a_trainer("mha_p.train()") and not _calls_a_trainer("m.train(False)")
    assert _calls_a_trainer("plain, history = s2s.train(None, config, seed=0)")
    assert _calls_a_trainer("pool.submit(train_translator, seed=seed, **SMALL)")


def test_the_settings_cover_every_offered_capability_and_mkl():
    chosen = settings()
    covered = {capability for capability, _ in chosen} | {offered_capabilities()[-1]}
    assert covered == set(offered_capabilities())
    assert {cbwr for _, cbwr in chosen} | {""} == {"", "COMPATIBLE"}
    assert offered_capabilities()[-1] not in {c for c, cbwr in chosen if not cbwr}


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("capability, cbwr", settings(), ids=lambda v: v or "mkl-auto")
@pytest.mark.parametrize("name", TRAINING_NOTEBOOKS)
def test_training_claims_hold_under_another_cpu_setting(name, capability, cbwr, monkeypatch):
    from nbclient import NotebookClient

    cells = training_cells(name)
    assert cells, f"{name} has no cell tagged {TAG!r}"
    probe = nbformat.v4.new_code_cell(
        "import os, torch\n"
        "print(torch.backends.cpu.get_cpu_capability(), os.environ.get('MKL_CBWR', ''))"
    )
    nb = nbformat.v4.new_notebook(cells=[probe, *[nbformat.from_dict(c) for c in cells]])
    # the kernel inherits the environment: the setting, and English figures only
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", capability)
    if cbwr:
        monkeypatch.setenv("MKL_CBWR", cbwr)
    else:
        monkeypatch.delenv("MKL_CBWR", raising=False)
    monkeypatch.setenv("ATTENTION_DERIVED_FIGURE_LANGUAGES", "en")
    monkeypatch.setenv("MPLBACKEND", "agg")
    client = NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(BOOK)}}
    )
    client.execute()  # a failing assert raises CellExecutionError with the cell and traceback
    seen = "".join(o.get("text", "") for o in nb.cells[0].outputs).split()
    assert seen == [capability.upper(), *([cbwr] if cbwr else [])], seen
