"""The models the pages read are shipped (``solutions/shipped.py``, ``solutions/weights/``).

- Every recipe has a file, and every file is the one its manifest entry names (sha256),
  with the recipe and the machine it was trained on recorded.
- Each file loads into the model its recipe trains (same class, same parameter names and
  shapes), and writing the loaded model and history again gives the same bytes: the file
  holds nothing but the weights and the history, written in a fixed order.
- A changed or missing file is refused, with what to do about it, before any page reads it.

That a recipe, retrained on the machine the tests run on, meets the quality its page
states for a run of it is checked where each model is tested, on the recipe itself
(``shipped.RECIPES[name].train()``): tests/test_soft_hard.py, test_seq2seq.py,
test_multihead.py and test_transformer.py.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from solutions import shipped


@pytest.fixture(scope="module")
def manifest():
    return shipped.read_manifest()


def test_every_recipe_ships_a_file_the_manifest_names(manifest):
    assert sorted(manifest) == sorted(shipped.RECIPES)
    for name, entry in manifest.items():
        path = shipped.WEIGHTS / entry["file"]
        assert path.is_file(), name
        assert shipped.sha256(path) == entry["sha256"], name
        recipe = shipped.RECIPES[name]
        assert entry["recipe"] == {"trainer": recipe.trainer, "arguments": recipe.arguments}
        assert entry["chapter"] == recipe.chapter
        assert {"torch", "cpu_capability", "mkl_cbwr"} <= set(entry["trained_on"])


def test_the_weights_are_small_enough_to_ship(manifest):
    sizes = {name: (shipped.WEIGHTS / e["file"]).stat().st_size for name, e in manifest.items()}
    assert sum(sizes.values()) < 16 * 2**20, sizes


@pytest.mark.parametrize("name", sorted(shipped.RECIPES))
def test_a_shipped_model_loads_and_saves_again_to_the_same_bytes(name, tmp_path, manifest):
    model, history = shipped.load(name)
    assert not model.training
    assert history["loss"] and all(np.isfinite(history["loss"]))
    entry = shipped.save(name, model, history, directory=tmp_path)
    assert entry["sha256"] == manifest[name]["sha256"]
    assert entry["model"] == manifest[name]["model"]


def test_a_changed_file_is_refused_and_a_missing_one_named(tmp_path, manifest):
    name = "ch2_aspect"
    shutil.copy(shipped.MANIFEST, tmp_path / shipped.MANIFEST.name)
    copy = tmp_path / manifest[name]["file"]
    data = bytearray((shipped.WEIGHTS / manifest[name]["file"]).read_bytes())
    data[len(data) // 2] ^= 0x01
    copy.write_bytes(bytes(data))
    with pytest.raises(shipped.ShippedWeightsError, match="sha256 differs"):
        shipped.load(name, directory=tmp_path)
    copy.unlink()
    with pytest.raises(shipped.ShippedWeightsError, match="make models"):
        shipped.load(name, directory=tmp_path)
    with pytest.raises(shipped.ShippedWeightsError, match="no shipped model named 'ch9'"):
        shipped.load("ch9", directory=tmp_path)


def test_the_loaded_parameters_are_the_files_exactly():
    model, _ = shipped.load("ch5_two_offset")
    with np.load(shipped.WEIGHTS / "ch5_two_offset.npz") as data:
        for key, value in model.state_dict().items():
            assert torch.equal(value, torch.from_numpy(data[f"parameter/{key}"])), key


def test_a_number_in_the_history_comes_back_a_number_and_a_list_a_list():
    """The trainers' histories hold lists (one entry per step or log) and numbers
    ("chance"); a 0-d array written as a 1-d one came back as [0.5]."""
    _, history = shipped.load("ch2_aspect")
    assert history["chance"] == 0.5 and isinstance(history["chance"], float)
    assert isinstance(history["accuracy"], list) and len(history["step"]) == len(
        history["accuracy"]
    )


def test_a_model_loads_in_the_dtype_it_was_saved_in_whatever_the_default():
    """Some test files set torch's default dtype to float64 for their oracles; a shipped
    model must still be the float32 model that was trained and measured."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        model, _ = shipped.load("ch5_two_offset")
    finally:
        torch.set_default_dtype(previous)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
