"""show_heatmaps: the shapes it accepts, where labels land, one shared colour scale, clear
errors; the CJK font registered by its file and a missing glyph failing loudly."""

import matplotlib

matplotlib.use("Agg")

import io
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from matplotlib import font_manager

from solutions import plotting
from solutions.plotting import CJK_FAMILY, find_cjk_font_file, register_cjk_font, show_heatmaps


def softmax_rows(scores):
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def panels(fig):
    """The heatmap axes (everything but the colorbar, which is added last)."""
    return fig.axes[:-1]


@pytest.mark.parametrize(
    "shape, grid",
    [((4, 6), (1, 1)), ((3, 4, 6), (1, 3)), ((2, 3, 4, 6), (2, 3))],
)
def test_accepted_shapes_give_one_panel_per_matrix_and_one_colorbar(shape, grid):
    weights = softmax_rows(np.random.default_rng(0).normal(size=shape))
    fig = show_heatmaps(weights)
    assert len(fig.axes) == grid[0] * grid[1] + 1
    for ax, matrix in zip(panels(fig), weights.reshape(-1, 4, 6)):
        (image,) = ax.get_images()
        np.testing.assert_array_equal(image.get_array(), matrix)  # queries are rows, keys columns
    assert fig.axes[-1].get_ylabel() == "attention weight"


def test_torch_tensor_with_grad_is_accepted_and_matches_numpy():
    logits = torch.randn(2, 3, 4, 5, dtype=torch.float64, requires_grad=True)
    weights = torch.softmax(logits, dim=-1)
    fig = show_heatmaps(weights)
    np.testing.assert_allclose(
        panels(fig)[4].get_images()[0].get_array(), weights[1, 1].detach().numpy()
    )


def test_colour_scale_is_shared_across_panels():
    weights = np.zeros((1, 2, 2, 2))
    weights[0, 0] = [[1.0, 0.0], [0.5, 0.5]]
    weights[0, 1] = [[0.25, 0.75], [0.5, 0.5]]
    fig = show_heatmaps(weights)
    limits = {panel.get_images()[0].get_clim() for panel in panels(fig)}
    assert limits == {(0.0, 1.0)}


def test_token_labels_are_placed_on_bottom_row_and_left_column():
    keys, queries = ["the", "food", "is", "good"], ["food", "service"]
    weights = softmax_rows(np.random.default_rng(1).normal(size=(2, 2, 2, 4)))
    fig = show_heatmaps(
        weights,
        row_labels=["layer 1", "layer 2"],
        col_labels=["head 1", "head 2"],
        x_ticklabels=keys,
        y_ticklabels=queries,
        xlabel="key tokens",
        ylabel="aspect",
    )
    top_left, top_right, bottom_left, bottom_right = panels(fig)
    assert [t.get_text() for t in bottom_left.get_xticklabels()] == keys
    assert [t.get_text() for t in bottom_right.get_xticklabels()] == keys
    assert [t.get_text() for t in top_left.get_yticklabels()] == queries
    assert bottom_left.get_xlabel() == "key tokens" and top_left.get_xlabel() == ""
    assert (
        top_left.get_ylabel() == "layer 1\naspect" and bottom_left.get_ylabel() == "layer 2\naspect"
    )
    assert top_right.get_ylabel() == ""
    assert (top_left.get_title(), top_right.get_title(), bottom_left.get_title()) == (
        "head 1",
        "head 2",
        "",
    )


def test_titles_name_every_panel():
    weights = np.full((2, 2, 3, 3), 1 / 3)
    fig = show_heatmaps(weights, titles=[["a", "b"], ["c", "d"]])
    assert [ax.get_title() for ax in panels(fig)] == ["a", "b", "c", "d"]
    fig = show_heatmaps(weights[0], titles=["left", "right"])
    assert [ax.get_title() for ax in panels(fig)] == ["left", "right"]


def test_figure_renders_to_png_for_the_notebook():
    png = show_heatmaps(
        np.full((3, 3), 1 / 3), x_ticklabels=list("abc"), y_ticklabels=list("xyz")
    )._repr_png_()
    assert png.startswith(b"\x89PNG")


@pytest.mark.parametrize("shape", [(5,), (1, 1, 1, 2, 2), ()])
def test_bad_number_of_dimensions_raises_value_error_naming_the_shape(shape):
    with pytest.raises(ValueError, match=r"got shape \(" + ", ".join(map(str, shape))):
        show_heatmaps(np.ones(shape))


def test_label_count_mismatch_raises_value_error():
    weights = np.full((2, 3), 1 / 3)
    with pytest.raises(ValueError, match="x_ticklabels has 2 labels but the weights have 3 keys"):
        show_heatmaps(weights, x_ticklabels=["a", "b"])
    with pytest.raises(
        ValueError, match="y_ticklabels has 3 labels but the weights have 2 queries"
    ):
        show_heatmaps(weights, y_ticklabels=["a", "b", "c"])
    with pytest.raises(ValueError, match="row_labels"):
        show_heatmaps(np.ones((2, 1, 2, 2)), row_labels=["only one"])
    with pytest.raises(ValueError, match="titles has 3 entries"):
        show_heatmaps(np.ones((2, 2, 2)), titles=["a", "b", "c"])


def test_nan_weights_and_empty_arrays_are_rejected():
    with pytest.raises(ValueError, match="NaN"):
        show_heatmaps(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="empty"):
        show_heatmaps(np.ones((0, 3)))


# ----------------------------------------------------------------------------------------
# the CJK font: registered by its file, and a missing glyph is an error, never a box


def chinese_figure():
    return show_heatmaps(
        np.full((2, 2), 0.5), x_ticklabels=["它", "猫"], y_ticklabels=["it", "cat"]
    )


@pytest.fixture
def stale_font_cache(monkeypatch):
    """Matplotlib as on a machine whose font cache was built before the CJK font was
    installed: the font list lacks every WenQuanYi face and the rc families are the defaults."""
    import copy

    stale = copy.copy(font_manager.fontManager)
    stale.ttflist = [f for f in stale.ttflist if "wqy" not in f.fname.lower()]
    stale._findfont_cached.cache_clear()  # the cache is per class, keyed on the manager
    monkeypatch.setattr(font_manager, "fontManager", stale)
    monkeypatch.setitem(matplotlib.rcParams, "font.family", ["sans-serif"])
    yield stale
    font_manager.fontManager._findfont_cached.cache_clear()


def test_without_the_cjk_font_a_chinese_label_fails_instead_of_drawing_a_box(stale_font_cache):
    with warnings.catch_warnings(), pytest.raises(UserWarning, match=r"Glyph \d+ .* missing"):
        plotting.fail_on_missing_glyphs()  # pytest resets the filters the import installed
        chinese_figure().savefig(io.BytesIO(), format="png")


def test_registering_the_font_file_draws_chinese_with_a_stale_cache(stale_font_cache):
    path = register_cjk_font()
    assert path is not None and path.is_file(), "fonts-wqy-microhei is not installed"
    assert matplotlib.rcParams["font.family"] == ["sans-serif", CJK_FAMILY]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chinese_figure().savefig(io.BytesIO(), format="png")
    fonts = stale_font_cache._find_fonts_by_props(
        font_manager.FontProperties(family=matplotlib.rcParams["font.family"])
    )
    # Latin text keeps the default font; the CJK file is the fallback for Chinese
    assert [Path(f).name for f in fonts] == ["DejaVuSans.ttf", path.name]
    register_cjk_font()  # twice is harmless: the family is listed once
    assert matplotlib.rcParams["font.family"].count(CJK_FAMILY) == 1


def test_a_glyph_no_font_has_is_an_error_even_with_the_cjk_font():
    # U+13000, an Egyptian hieroglyph: in neither DejaVu Sans nor WenQuanYi Micro Hei
    fig = show_heatmaps(np.ones((1, 1)), x_ticklabels=["\U00013000"])
    with warnings.catch_warnings(), pytest.raises(UserWarning, match="missing from font"):
        plotting.fail_on_missing_glyphs()
        fig.savefig(io.BytesIO(), format="png")


def test_the_font_file_is_found_by_path_list_then_fc_match_never_a_substitute(
    tmp_path, monkeypatch
):
    listed = tmp_path / "wqy-microhei.ttc"
    listed.write_bytes(b"")
    assert find_cjk_font_file([tmp_path / "absent.ttc", listed]) == listed
    by_fontconfig = find_cjk_font_file([tmp_path / "absent.ttc"])
    assert by_fontconfig is not None and by_fontconfig.name == "wqy-microhei.ttc"
    # fc-match answers every query with some font; a substitute is not the family asked for
    monkeypatch.setattr(plotting, "CJK_FAMILY", "No Such Family Anywhere")
    assert find_cjk_font_file([tmp_path / "absent.ttc"]) is None


def test_the_encoder_decoder_figure_names_every_part_and_has_a_chinese_rendering():
    fig = plotting.show_encoder_decoder()
    texts = [t.get_text() for t in plotting.figure_texts(fig)]
    for part in (
        "masked self-attention",
        "cross-attention",
        "feed-forward",
        "add & norm",
        "embedding + positions",
        "encoder output $H$",
        "softmax",
    ):
        assert part in texts
    assert texts.count("add & norm") == 5  # two encoder sub-layers, three decoder ones
    catalog = plotting._figure_catalog()
    for text in texts:  # raises UntranslatedFigureText for a label figures.po lacks
        plotting.translate_figure_text(text, catalog)
    assert plotting.render_png(fig, "zh_CN")[:8] == b"\x89PNG\r\n\x1a\n"
