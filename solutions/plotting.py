"""The one plotting helper for attention weights, used on every page of the book.

- ``show_heatmaps`` draws a grid of attention-weight matrices, queries as rows and keys
  as columns (the row convention of the course), with one colorbar shared by all panels.
- It accepts a single matrix ``(n_q, n_k)``, a row of panels ``(cols, n_q, n_k)`` or a
  grid ``(rows, cols, n_q, n_k)``, as a NumPy array, a nested list or a torch tensor.
- Token labels go on the axes when given (``x_ticklabels`` for keys, ``y_ticklabels``
  for queries); ``row_labels``/``col_labels`` name the grid's rows and columns
  (for example layers and heads), ``titles`` names each panel.
- The colour scale is shared, so equal weights look equal across panels; weights are
  probabilities, so the scale starts at 0.
- Every figure exists in each edition's language (docs/translating.md): when the book is
  built, ``FIGURE_LANGUAGES_ENV`` asks the notebook kernels for Chinese renderings, and
  every figure a cell shows then carries, beside the English PNG, a second PNG
  (``ZH_PNG_MIME``) drawn with its titles, labels, legends and annotations translated by
  the catalog ``locale/zh_CN/LC_MESSAGES/figures.po``. The Chinese edition shows that
  one (``ZhFigureRenderer``, a myst-nb renderer). A word with no translation is an
  error, so a changed English label fails the build until its translation is added.
- Importing this module registers the CJK font the book's Chinese labels need (WenQuanYi
  Micro Hei, Debian package fonts-wqy-microhei) by its FILE, and makes a glyph missing
  from every font an error instead of a box in the figure: see ``register_cjk_font``.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import io
import logging
import os
import re
import shutil
import subprocess
import warnings
from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl
import numpy as np
from matplotlib import font_manager
from matplotlib.figure import Figure
from matplotlib.text import Text

__all__ = [
    "CJK_FAMILY",
    "FIGURE_LANGUAGES_ENV",
    "ZH_PNG_MIME",
    "AttentionFigure",
    "UntranslatedFigureText",
    "ZhFigureRenderer",
    "figure_texts",
    "render_png",
    "translate_figure_text",
    "fail_on_missing_glyphs",
    "find_cjk_font_file",
    "register_cjk_font",
    "show_encoder_decoder",
    "show_heatmaps",
]

CJK_FAMILY = "WenQuanYi Micro Hei"
# Where Debian (fonts-wqy-microhei), Fedora and Arch put the file; fc-match is the
# fallback.
CJK_FONT_PATHS = (
    Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
    Path("/usr/share/fonts/wqy-microhei/wqy-microhei.ttc"),
    Path("/usr/share/fonts/wenquanyi/wqy-microhei/wqy-microhei.ttc"),
)
# Matplotlib's own text for a character no font has ("Glyph 23427 ('它') missing from
# font(s) DejaVu Sans."): a box in a published figure, so it is an error, never a
# warning.
MISSING_GLYPH = r"Glyph \d+ .* missing from font"


def find_cjk_font_file(candidates: Sequence[Path] = CJK_FONT_PATHS) -> Path | None:
    """The WenQuanYi Micro Hei file: the first of ``candidates`` that exists, else what
    fontconfig (``fc-match``) resolves the family to, if that really is this family."""
    for path in candidates:
        if Path(path).is_file():
            return Path(path)
    if shutil.which("fc-match") is None:
        return None
    found = subprocess.run(
        ["fc-match", "-f", "%{family}\t%{file}", CJK_FAMILY],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    family, _, file = found.partition("\t")
    # fc-match always answers, with a substitute when the family is absent: accept only
    # this family
    if CJK_FAMILY in family.split(",") and Path(file).is_file():
        return Path(file)
    return None


def register_cjk_font(path: Path | None = None) -> Path | None:
    """Register the CJK font file with Matplotlib and put its family first among
    sans-serif.

    By file, not by family name: Matplotlib caches its font list (~/.cache/matplotlib)
    the first time it runs, and a font installed after that is absent from the cache, so
    a family-name lookup silently falls back to DejaVu Sans and every Chinese character
    is a box. ``fontManager.addfont`` reads the file itself. Returns the registered
    file, or None when the font is not installed (a Chinese label then fails with the
    missing-glyph error, which names the font it fell back to).
    """
    path = find_cjk_font_file() if path is None else Path(path)
    if path is None:
        return None
    font_manager.fontManager.addfont(str(path))
    # Matplotlib falls back glyph by glyph only across the families of font.family (a
    # generic family such as "sans-serif" counts as its first installed font): appending
    # the CJK family keeps Latin text in the default font and draws Chinese in this one.
    families = [f for f in mpl.rcParams["font.family"] if f != CJK_FAMILY]
    mpl.rcParams["font.family"] = [*families, CJK_FAMILY]
    return path


class MissingGlyph(RuntimeError):
    """A character that no font of the text has: it would be drawn as a box."""


def _no_dummy_symbols(record) -> bool:
    # mathtext draws a character its font lacks as a "dummy symbol" (a box) and only
    # logs
    # it: a filter that raises turns the log line into an error at the drawing call
    if "dummy symbol" in record.getMessage():
        raise MissingGlyph(record.getMessage())
    return True


def fail_on_missing_glyphs() -> None:
    """Make a missing glyph an exception in this process (done on import): Matplotlib's
    warning for plain text, and mathtext's log line for text with $...$ in it.

    The first is a filter in the global warnings list: code that resets the filters
    afterwards (pytest does, per test) must call this again."""
    warnings.filterwarnings("error", message=MISSING_GLYPH, category=UserWarning)
    mathtext_log = logging.getLogger("matplotlib.mathtext")
    if _no_dummy_symbols not in mathtext_log.filters:
        mathtext_log.addFilter(_no_dummy_symbols)


CJK_FONT_FILE = register_cjk_font()
fail_on_missing_glyphs()


# --- one figure, two languages -------------------------------------------------------
# Set by tools/build_book.py ("en,zh_CN"): the kernels that execute the book render
# every figure in each language. Unset (a reader running a notebook), figures are
# English only.
FIGURE_LANGUAGES_ENV = "ATTENTION_DERIVED_FIGURE_LANGUAGES"
# The Chinese rendering's key in a cell output's bundle: not a type Jupyter knows, so
# every frontend (and the English edition) shows the ordinary image/png beside it.
ZH_PNG_MIME = "image/vnd.attention-derived.zh-cn+png"
# Set to a file: an untranslated figure text is appended there instead of failing, so
# one build lists them all (docs/translating.md)
FIGURE_MISSING_ENV = "ATTENTION_DERIVED_FIGURE_TEXTS_MISSING"
FIGURE_CATALOG = (
    Path(__file__).resolve().parents[1]
    / "locale"
    / "zh_CN"
    / "LC_MESSAGES"
    / "figures.po"
)

# A label's numbers and math are the same in both languages: the catalog's msgid writes
# each number as {} ("head {}", "sigma = {}") and keeps $...$ as it is.
_NUMBER = re.compile(r"(?<![A-Za-z_])[-−]?\d+(?:\.\d+)?")
_MATH = re.compile(r"\$[^$]*\$")
_WORD = re.compile(r"[A-Za-z]{2,}")
_CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


class UntranslatedFigureText(KeyError):
    """A figure label with English words that the figure catalog does not translate."""

    def __str__(self) -> str:
        return str(self.args[0])


@functools.cache
def _figure_catalog(path: Path = FIGURE_CATALOG) -> dict[str, str]:
    """msgid -> msgstr of the figure catalog (translated, non-fuzzy entries only)."""
    from babel.messages.pofile import read_po

    with open(path, "rb") as handle:
        catalog = read_po(handle)
    return {
        message.id: message.string
        for message in catalog
        if message.id and message.string and not message.fuzzy
    }


def translate_figure_text(text: str, catalog: dict[str, str]) -> str:
    """The translation of one figure text, line by line, numbers carried over.

    A line with no English word outside its math (a number, a formula, a Chinese token)
    stays as it is; any other line must be in ``catalog``, its numbers written as
    ``{}``.
    """
    lines = []
    for line in text.split("\n"):
        if not _WORD.search(_MATH.sub(" ", line)):
            lines.append(line)
            continue
        pieces = _MATH.split(line)
        maths = _MATH.findall(line)
        numbers: list[str] = []
        template = ""
        for index, piece in enumerate(pieces):
            numbers += _NUMBER.findall(piece)
            template += _NUMBER.sub("{}", piece)
            if index < len(maths):
                template += maths[index]
        if template not in catalog:
            raise UntranslatedFigureText(
                f"the figure text {line!r} has no Chinese translation: add\n"
                f'    msgid {template!r}\n    msgstr "..."\n'
                f"to {FIGURE_CATALOG.relative_to(FIGURE_CATALOG.parents[3])} "
                f"(numbers are written {{}}; see docs/translating.md)"
            )
        translated = catalog[template]
        if translated.count("{}") != len(numbers):
            raise UntranslatedFigureText(
                f"the translation {translated!r} of {template!r} must keep its "
                f"{len(numbers)} '{{}}' (the numbers of {line!r})"
            )
        # not str.format: a translation may contain other braces (TeX in $...$)
        parts = translated.split("{}")
        lines.append(
            parts[0] + "".join(n + rest for n, rest in zip(numbers, parts[1:]))
        )
    return "\n".join(lines)


def figure_texts(fig: Figure) -> list[Text]:
    """The figure's visible texts with words that a translation changes: titles, axis
    labels, legends, annotations, colorbar labels. Not the tick labels: those are data
    (the tokens of a sentence, numbers), the same in every language."""
    ticks = {
        id(label)
        for ax in fig.axes
        for label in (
            *ax.get_xticklabels(which="both"),
            *ax.get_yticklabels(which="both"),
        )
    }
    return [
        text
        for text in fig.findobj(Text)
        if id(text) not in ticks
        and text.get_visible()
        and text.get_text()
        and _WORD.search(_MATH.sub(" ", text.get_text()))
    ]


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def render_png(fig: Figure, language: str = "en") -> bytes:
    """The figure as PNG bytes, its texts in ``language`` ("en" or "zh_CN").

    The Chinese rendering swaps every text for its translation, draws, and puts the
    English texts back, so the figure itself is unchanged. It costs one more rendering
    of the figure, as much as the English one (1.3 s for a 3 x 4 grid of heatmaps).
    """
    if language == "en":
        return _png(fig)
    if language != "zh_CN":
        raise ValueError(
            f"render_png: language must be 'en' or 'zh_CN', got {language!r}"
        )
    texts = figure_texts(fig)
    originals = [text.get_text() for text in texts]
    families = [text.get_fontfamily() for text in texts]
    catalog = _figure_catalog()
    missing_log = os.environ.get(FIGURE_MISSING_ENV)
    try:
        for text, original in zip(texts, originals):
            try:
                translated = translate_figure_text(original, catalog)
                text.set_text(translated)
                if "$" in translated and _CJK.search(translated):
                    # a text with math is drawn by mathtext, whose plain parts use only
                    # the first family (no fallback between fonts): the CJK font goes
                    # first
                    text.set_fontfamily([CJK_FAMILY, *text.get_fontfamily()])
            except UntranslatedFigureText as missing:
                if not missing_log:
                    raise
                with open(missing_log, "a", encoding="utf-8") as log:
                    log.write(f"{missing}\n")
        return _png(fig)
    finally:
        for text, original, family in zip(texts, originals, families):
            text.set_text(original)
            text.set_fontfamily(family)


def _translated_renderings(fig: Figure) -> dict[str, str]:
    """IPython's extra representations of a figure: the Chinese PNG, base64 as JSON
    wants."""
    return {ZH_PNG_MIME: base64.b64encode(render_png(fig, "zh_CN")).decode("ascii")}


def _register_translated_renderings() -> None:
    """In a kernel of the book's build, give every Matplotlib figure its Chinese
    rendering.

    IPython merges what this formatter returns with the image/png of the inline backend
    (or of ``AttentionFigure._repr_png_``): one output, both languages.
    """
    languages = os.environ.get(FIGURE_LANGUAGES_ENV, "").split(",")
    if "zh_CN" not in languages:
        return
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.mimebundle_formatter.for_type(
            Figure, _translated_renderings
        )


_register_translated_renderings()


class ZhFigureRenderer:
    """myst-nb's renderer for ``ZH_PNG_MIME`` (entry point ``myst_nb.mime_renderers``).

    The Chinese build puts ``ZH_PNG_MIME`` first among the representations of an output
    (tools/build_book.py); this turns it into the same image node as an image/png. The
    English build never asks for it (a Chinese page showing an output that lacks this
    rendering fails the build: book/_ext/editions/pages.py).
    """

    mime_priority_overrides = ()

    @staticmethod
    def handle_mime(renderer, data, inline: bool):
        if data.mime_type != ZH_PNG_MIME:
            return None
        png = dataclasses.replace(data, mime_type="image/png")
        return (
            renderer.render_image_inline(png) if inline else renderer.render_image(png)
        )


class AttentionFigure(Figure):
    """A Matplotlib figure that Jupyter shows as a PNG even when pyplot was never
    imported.

    Built without pyplot (no global figure list, nothing to close, no double display),
    it appears exactly once: when it is the value of a cell or passed to ``display``.
    """

    def _repr_png_(self) -> bytes:
        return render_png(self)


def _as_numpy(matrices) -> np.ndarray:
    """Turn a NumPy array, a (possibly autograd-tracked, possibly CUDA) torch tensor or
    nested lists into float64."""
    if hasattr(matrices, "detach") and hasattr(
        matrices, "cpu"
    ):  # torch.Tensor, without importing torch
        matrices = matrices.detach().cpu().numpy()
    try:
        return np.asarray(matrices, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(
            "show_heatmaps expects a NumPy array or torch tensor of attention weights, "
            f"got {type(matrices).__name__} that cannot be converted to float ({err})"
        ) from None


def _check_labels(name: str, labels, expected: int, what: str) -> list[str] | None:
    if labels is None:
        return None
    if isinstance(labels, str):
        raise TypeError(
            f"{name} must be a sequence of {expected} labels, got the single string "
            f"{labels!r}"
        )
    labels = [str(label) for label in labels]
    if len(labels) != expected:
        raise ValueError(
            f"{name} has {len(labels)} labels but the weights have {expected} {what}"
        )
    return labels


def show_heatmaps(
    matrices,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    titles: Sequence[str] | Sequence[Sequence[str]] | None = None,
    xlabel: str = "keys",
    ylabel: str = "queries",
    cmap: str = "Reds",
    figsize: tuple[float, float] | None = None,
    x_ticklabels: Sequence[str] | None = None,
    y_ticklabels: Sequence[str] | None = None,
) -> Figure:
    """Draw attention weights as heatmaps on a grid with one shared colorbar.

    Parameters
    ----------
    matrices : array-like or torch.Tensor
        ``(n_q, n_k)``, ``(cols, n_q, n_k)`` or ``(rows, cols, n_q, n_k)``: weight
        matrices with queries as rows and keys as columns.
    row_labels : sequence of ``rows`` str, optional
        Names of the grid rows, written left of the first column (e.g. ``"layer 1"``).
    col_labels : sequence of ``cols`` str, optional
        Names of the grid columns, written above the first row (e.g. ``"head 1"``).
    titles : sequence of str, or ``rows x cols`` nested sequences of str, optional
        One title per panel: nested as the grid, or flat with ``rows * cols`` entries
        (row-major), or flat with ``cols`` entries repeated on every row. When given,
        titles replace ``col_labels`` above the first row.
    xlabel, ylabel : str
        Axis names, written once on the bottom row / left column.
    cmap : str
        Matplotlib colormap name.
    figsize : (width, height) in inches, optional
        Defaults to about 2.5 inches per panel, plus room for the colorbar.
    x_ticklabels : sequence of ``n_k`` str, optional
        Key tokens, placed on the x axis of the bottom row.
    y_ticklabels : sequence of ``n_q`` str, optional
        Query tokens, placed on the y axis of the left column.

    Returns
    -------
    AttentionFigure (a matplotlib.figure.Figure)
        Shown in a notebook when it is the value of a cell (or passed to ``display``);
        ``fig.savefig(path)`` writes it to a file. Its axes are ``fig.axes``: the
        ``rows * cols`` panels in row-major order, then the colorbar.
    """
    weights = _as_numpy(matrices)
    if weights.ndim == 2:
        weights = weights[None, None]
    elif weights.ndim == 3:
        weights = weights[None]
    elif weights.ndim != 4:
        raise ValueError(
            f"show_heatmaps expects weights of shape (n_q, n_k), (cols, n_q, n_k) or "
            f"(rows, cols, n_q, n_k), got shape {tuple(weights.shape)} ({weights.ndim} "
            "dims)"
        )
    rows, cols, n_q, n_k = weights.shape
    if min(rows, cols, n_q, n_k) == 0:
        raise ValueError(
            "show_heatmaps got an empty weight array of shape "
            f"{tuple(np.shape(matrices))}"
        )
    if not np.all(np.isfinite(weights)):
        raise ValueError(
            "show_heatmaps got NaN or infinite weights: check the softmax (is it "
            "max-shifted and masked?)"
        )

    row_labels = _check_labels("row_labels", row_labels, rows, "grid rows")
    col_labels = _check_labels("col_labels", col_labels, cols, "grid columns")
    x_ticklabels = _check_labels("x_ticklabels", x_ticklabels, n_k, "keys (columns)")
    y_ticklabels = _check_labels("y_ticklabels", y_ticklabels, n_q, "queries (rows)")
    panel_titles = _panel_titles(titles, rows, cols)

    if figsize is None:
        figsize = (2.5 * cols + 1.2, 2.5 * rows + 0.4)
    # not pyplot.figure(): no global state, and the notebook shows it once, not twice
    fig = AttentionFigure(figsize=figsize, layout="constrained")
    axes = fig.subplots(rows, cols, sharex=True, sharey=True, squeeze=False)
    vmin = 0.0 if weights.min() >= 0 else weights.min()
    vmax = max(weights.max(), vmin + 1e-12)
    image = None
    for i in range(rows):
        for j in range(cols):
            ax = axes[i, j]
            image = ax.imshow(
                weights[i, j],
                cmap=cmap,
                vmin=vmin,
                vmax=vmax,
                aspect="auto",
                interpolation="nearest",
            )
            if panel_titles is not None:
                ax.set_title(panel_titles[i][j])
            elif i == 0 and col_labels is not None:
                ax.set_title(col_labels[j])
            if i == rows - 1:
                ax.set_xlabel(xlabel)
                if x_ticklabels is not None:
                    ax.set_xticks(
                        range(n_k),
                        x_ticklabels,
                        rotation=90 if _long(x_ticklabels) else 0,
                    )
            if j == 0:
                label = ylabel if row_labels is None else f"{row_labels[i]}\n{ylabel}"
                ax.set_ylabel(label)
                if y_ticklabels is not None:
                    ax.set_yticks(range(n_q), y_ticklabels)
    fig.colorbar(
        image, ax=axes, shrink=0.8 if rows == 1 else 0.6, label="attention weight"
    )
    return fig


def _long(labels: list[str]) -> bool:
    """Rotate key labels when they would collide horizontally."""
    return len(labels) > 8 or max(len(label) for label in labels) > 3


def _panel_titles(titles, rows: int, cols: int) -> list[list[str]] | None:
    if titles is None:
        return None
    if isinstance(titles, str):
        raise TypeError(
            "titles must be a sequence of panel titles, got the single string "
            f"{titles!r}"
        )
    titles = list(titles)
    if titles and not isinstance(titles[0], str) and isinstance(titles[0], Sequence):
        grid = [[str(t) for t in row] for row in titles]
        if len(grid) != rows or any(len(row) != cols for row in grid):
            shape = (len(grid), len(grid[0]) if grid else 0)
            raise ValueError(
                f"titles is a {shape[0]}x{shape[1]} grid but the weights form a "
                f"{rows}x{cols} grid of panels"
            )
        return grid
    flat = [str(t) for t in titles]
    if len(flat) == cols and rows == 1:
        return [flat]
    if len(flat) == rows * cols:
        return [flat[i * cols : (i + 1) * cols] for i in range(rows)]
    if len(flat) == cols:  # one title per column, repeated on every row
        return [flat for _ in range(rows)]
    raise ValueError(
        f"titles has {len(flat)} entries but the weights form a {rows}x{cols} grid of "
        f"panels (give {cols} or {rows * cols} titles)"
    )


def show_encoder_decoder(figsize: tuple[float, float] = (7.6, 7.4)) -> Figure:
    """The encoder-decoder of chapter 6 as boxes and arrows, post-LN (eq.
    ch6-decoder-layer).

    Left, the encoder: embeddings + positions, then N layers of self-attention and a
    feed-forward network, each followed by add & norm (the residual drawn as a bypass).
    Right, the decoder: the target shifted right, embeddings + positions, then N layers
    of masked self-attention, cross-attention (keys and values from the encoder output,
    queries from below) and a feed-forward network, each with add & norm; then the
    output layer and the softmax. Every text goes through ``figures.po`` like any other
    figure's.
    """
    from matplotlib.patches import FancyBboxPatch

    fig = AttentionFigure(figsize=figsize, layout="constrained")
    ax = fig.add_subplot()
    ax.set(xlim=(0, 10.4), ylim=(0, 10.2))
    ax.set_axis_off()
    width, ink = 3.0, "#444444"
    colours = {
        "attention": "#f8d5b0",
        "ffn": "#c9e0f2",
        "norm": "#f4efb4",
        "embed": "#f3c9d6",
        "out": "#dcdcdc",
    }

    def box(x, y0, y1, text, kind):
        ax.add_patch(
            FancyBboxPatch(
                (x - width / 2, y0),
                width,
                y1 - y0,
                boxstyle="round,pad=0.02,rounding_size=0.12",
                facecolor=colours[kind],
                edgecolor=ink,
                linewidth=1.0,
            )
        )
        ax.text(x, (y0 + y1) / 2, text, ha="center", va="center", fontsize=9.5)

    def arrow(*points):
        """A polyline through ``points`` with an arrowhead on its last segment."""
        if len(points) > 2:
            xs, ys = zip(*points[:-1])
            ax.plot(xs, ys, color=ink, linewidth=1.0)
        ax.annotate(
            "",
            xy=points[-1],
            xytext=points[-2],
            arrowprops={"arrowstyle": "-|>", "color": ink, "linewidth": 1.0},
        )

    def note(x, y, text, **kwargs):
        ax.text(x, y, text, fontsize=8.5, style="italic", **kwargs)

    def stack(x, y0, sublayers, right=False):
        """One layer of the stack, drawn once in a frame marked "N x": each sub-layer,
        bottom to top, followed by add & norm, its input going round it into the sum.
        Returns the top of the frame and the centre of every sub-layer box."""
        top = y0 + 1.6 * len(sublayers) + 0.4
        ax.add_patch(
            FancyBboxPatch(
                (x - width / 2 - 0.45, y0),
                width + 0.9,
                top - y0,
                boxstyle="round,pad=0.02,rounding_size=0.2",
                facecolor="#f6f6f6",
                edgecolor="#888888",
                linewidth=1.0,
            )
        )
        side = x + width / 2 + 0.22  # where the residual runs
        y, centres = y0 + 0.35, []
        for i, (name, kind) in enumerate(sublayers):
            if i:
                arrow((x, y - 0.3), (x, y))
            box(x, y, y + 0.65, name, kind)
            centres.append(y + 0.325)
            arrow((x, y + 0.65), (x, y + 0.9))
            box(x, y + 0.9, y + 1.3, "add & norm", "norm")
            arrow(
                (x, y - 0.15),
                (side, y - 0.15),
                (side, y + 1.1),
                (x + width / 2, y + 1.1),
            )
            y += 1.6
        edge = x + (width / 2 + 0.6) * (1 if right else -1)
        ha = "left" if right else "right"
        ax.text(edge, (y0 + top) / 2, "N ×", ha=ha, va="center", fontsize=11)
        return top, centres

    enc, dec = 2.5, 7.4
    for x, words in ((enc, "source tokens"), (dec, "target tokens, shifted right")):
        ax.text(x, 0.35, words, ha="center", va="center", fontsize=9.5)
        arrow((x, 0.55), (x, 1.0))
        box(x, 1.0, 1.65, "embedding + positions", "embed")
        arrow((x, 1.65), (x, 2.45))
    enc_top, _ = stack(
        enc, 2.1, [("self-attention", "attention"), ("feed-forward", "ffn")]
    )
    sublayers = [
        ("masked self-attention", "attention"),
        ("cross-attention", "attention"),
        ("feed-forward", "ffn"),
    ]
    dec_top, (_, cross_y, _) = stack(dec, 2.1, sublayers, right=True)
    # the encoder output H enters every decoder layer's cross-attention as keys and
    # values
    bend = 4.75
    arrow(
        (enc, enc_top),
        (enc, enc_top + 0.6),
        (bend, enc_top + 0.6),
        (bend, cross_y),
        (dec - width / 2, cross_y),
    )
    ax.text(
        enc,
        enc_top + 0.75,
        "encoder output $H$",
        ha="center",
        va="bottom",
        fontsize=9.5,
    )
    note(
        bend - 0.15,
        (cross_y + enc_top + 0.6) / 2,
        "keys, values",
        rotation=90,
        ha="center",
        va="center",
    )
    note(dec - 0.08, cross_y - 0.475, "queries", ha="right", va="center")
    arrow((dec, dec_top), (dec, dec_top + 0.3))
    box(dec, dec_top + 0.3, dec_top + 0.8, "linear", "out")
    arrow((dec, dec_top + 0.8), (dec, dec_top + 1.1))
    box(dec, dec_top + 1.1, dec_top + 1.6, "softmax", "out")
    arrow((dec, dec_top + 1.6), (dec, dec_top + 1.95))
    ax.text(
        dec,
        dec_top + 2.0,
        "next-word probabilities",
        ha="center",
        va="bottom",
        fontsize=9.5,
    )
    for x, name in ((enc, "encoder"), (dec, "decoder")):
        ax.text(x, 9.9, name, ha="center", va="center", fontsize=12)
    return fig
