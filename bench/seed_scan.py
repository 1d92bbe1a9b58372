"""Seed scan: does an honest, correct solution get full marks on every hidden-case seed?

For every chapter and every check, for many grading seeds, this makes the hidden cases exactly
as grading does (``checks.hidden_cases``), and judges with the real judging code
(``contract.run_case`` + ``contract.judge`` with the reference's answer and the declared
mistakes' outputs):

- the reference itself (``checks.expected``'s own function, called again);
- the instructor's solution: the functions the source notebook's solution cells define,
  executed in a plain namespace in this process (trusted: it is the instructor's code);
- for a few checks, an independently written correct variant that orders its float64
  operations otherwise (log-domain softmax weights, einsum sums, logaddexp).

It prints, per chapter, the seeds and cases judged, the failures (0 is the only right answer:
a failure is a seed on which every honest student of a batch loses points) and the margin:
the worst ratio error / tolerance over every entry (``contract.tolerance``, the bound the
judge applies; for an accuracy threshold, missed fraction / allowed fraction; for exact
outputs 0 or inf).

    .venv/bin/python bench/seed_scan.py --seeds 2000            # every chapter
    .venv/bin/python bench/seed_scan.py --seeds 200 --chapter ch1_pooling --start 500

``tests/test_seed_scan.py`` runs a sample of it in ``make test``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import nbformat  # noqa: E402
import numpy as np  # noqa: E402

from autograder import chapters  # noqa: E402, F401 - every chapter registered
from autograder.checking import checks, judging  # noqa: E402
from autograder.checking.assignment_spec import strip_hidden_tests  # noqa: E402
from autograder.course import release  # noqa: E402
from autograder.student import contract  # noqa: E402

# ----------------------------------------------------------------------------------------
# the instructor's solution, as a namespace of functions


def solved_namespace(assignment: str, folder: Path) -> dict:
    """Run the source notebook's code cells (solutions in, test cells out) in a namespace.
    The chapter's support files are written into ``folder``; call it with ``folder`` as the
    working directory (a notebook reads its data files from there)."""
    for name, write in checks.chapter(assignment).support_files.items():
        write(folder / name)
    source = nbformat.read(
        release.COURSE / "source" / assignment / f"{assignment}.ipynb", as_version=4
    )
    sys.modules.setdefault("attention_check", contract)  # what the release ships
    namespace = {"__name__": "__main__"}
    for cell in source.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or meta.get("grade"):
            continue
        code = "\n".join(line for line in cell.source.split("\n") if " SOLUTION" not in line)
        with contextlib.redirect_stdout(io.StringIO()):  # the notebook's prints are not ours
            exec(
                compile(strip_hidden_tests(code), f"<{assignment} {meta.get('grade_id')}>", "exec"),
                namespace,
            )
    return namespace


# ----------------------------------------------------------------------------------------
# correct variants that order their float64 operations otherwise


def _log_domain_weights(scores, allowed):
    """Softmax weights exp(s - logsumexp(s)) over the allowed entries (rows with none: 0)."""
    s = np.where(allowed, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        lse = np.logaddexp.reduce(s, axis=-1, keepdims=True)
        w = np.exp(s - np.where(np.isfinite(lse), lse, 0.0))
    return np.where(allowed & np.isfinite(lse), w, 0.0)


def loo_loss_and_grad_ard(x, y, bandwidths):
    """Log-domain weights; dpred as sum_j a_ij g_ijl (y_j - f_i) (no difference of sums)."""
    xs = np.asarray(x, dtype=float)
    xs = xs[:, None] if xs.ndim == 1 else xs  # (n, d)
    y = np.asarray(y, dtype=float)
    y2 = y[:, None] if y.ndim == 1 else y  # (n, d_y)
    h, n = np.asarray(bandwidths, dtype=float), xs.shape[0]
    diff = (xs[:, None, :] - xs[None, :, :]) / h  # (n, n, d), (x_il - x_jl) / h_l
    a = _log_domain_weights(-0.5 * np.einsum("ijl,ijl->ij", diff, diff), ~np.eye(n, dtype=bool))
    pred = np.einsum("ij,jk->ik", a, y2)
    err = pred - y2
    g = diff * diff / h  # (n, n, d), g_ijl
    dpred = np.einsum("ij,ijl,ijk->ikl", a, g, y2[None, :, :] - pred[:, None, :])
    return float(np.sum(err**2) / err.size), 2 * np.einsum("ik,ikl->l", err, dpred) / err.size


def nadaraya_watson_ard(x_query, x_keys, y_values, bandwidths):
    """Log-domain weights, inputs divided by their bandwidths first, einsum for the sums."""
    h = np.asarray(bandwidths, dtype=float)
    xq = np.asarray(x_query, dtype=float) / h
    xk = np.asarray(x_keys, dtype=float) / h
    diff = xq[:, None, :] - xk[None, :, :]
    scores = -0.5 * np.einsum("ijk,ijk->ij", diff, diff)
    a = _log_domain_weights(scores, np.ones(scores.shape, dtype=bool))
    return np.einsum("ij,j...->i...", a, np.asarray(y_values, dtype=float))


def nadaraya_watson_query_grad(x_query, x_keys, y_values, bandwidth):
    """Log-domain weights; the Jacobian as sum_j a_j y_j (x_j - x) - f sum_j a_j (x_j - x)."""
    xq0 = np.asarray(x_query, dtype=float)
    xq = xq0[:, None] if xq0.ndim == 1 else xq0  # (n_q, d)
    xk = np.asarray(x_keys, dtype=float)
    xk = xk[:, None] if xk.ndim == 1 else xk  # (n_k, d)
    y = np.asarray(y_values, dtype=float)
    y2 = y[:, None] if y.ndim == 1 else y  # (n_k, d_y)
    h2 = float(bandwidth) ** 2
    offset = xk[None, :, :] - xq[:, None, :]  # (n_q, n_k, d)
    scores = -np.einsum("qkd,qkd->qk", offset, offset) / (2 * h2)
    a = _log_domain_weights(scores, np.ones(scores.shape, dtype=bool))
    pred = a @ y2  # (n_q, d_y)
    first = np.einsum("qk,ky,qkd->qyd", a, y2, offset)
    jac = (first - pred[:, :, None] * np.einsum("qk,qkd->qd", a, offset)[:, None, :]) / h2
    jac = jac[:, 0, :] if y.ndim == 1 else jac
    return jac[..., 0] if xq0.ndim == 1 else jac


def epanechnikov_weights(x_query, x_keys, bandwidth):
    """u computed as a distance over h (a square root), the kernel as (1 - u)(1 + u)."""
    xq = np.asarray(x_query, dtype=float)
    xk = np.asarray(x_keys, dtype=float)
    xq, xk = (xq[:, None] if xq.ndim == 1 else xq), (xk[:, None] if xk.ndim == 1 else xk)
    u = np.linalg.norm(xq[:, None, :] - xk[None, :, :], axis=-1) / float(bandwidth)
    k = np.where(u < 1, (1 - u) * (1 + u), 0.0)
    total = k.sum(axis=-1, keepdims=True)
    return np.divide(k, total, out=np.zeros_like(k), where=total > 0)


def masked_softmax(scores, mask=None):
    """Log-domain masked softmax weights (the variants of coverage and location-aware
    attention use it)."""
    scores = np.asarray(scores, dtype=float)
    allowed = np.ones(scores.shape, bool) if mask is None else np.broadcast_to(mask, scores.shape)
    return _log_domain_weights(scores, allowed)


def softmax_backward(weights, grad_weights):
    """The full Jacobian diag(P) - P P^T of each row, applied with einsum."""
    p, dp = np.asarray(weights, dtype=float), np.asarray(grad_weights, dtype=float)
    jacobian = np.einsum("...i,ij->...ij", p, np.eye(p.shape[-1])) - np.einsum(
        "...i,...j->...ij", p, p
    )
    return np.einsum("...ij,...i->...j", jacobian, dp)


def _reduce_to(grad, shape):
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=axes, keepdims=True)


def attention_backward(q, k, v, grad_out, mask=None):
    """Log-domain weights, einsum products, the scale applied to the scores' gradient."""
    q, k, v, d_out = (np.asarray(x, dtype=float) for x in (q, k, v, grad_out))
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], d_out.shape[:-2])
    qb, kb, vb, ob = (np.broadcast_to(x, batch + x.shape[-2:]) for x in (q, k, v, d_out))
    scores = np.einsum("...id,...jd->...ij", qb, kb) / math.sqrt(q.shape[-1])
    allowed = np.broadcast_to(True if mask is None else mask, scores.shape)
    p = _log_domain_weights(scores, allowed)
    dp = np.einsum("...ie,...je->...ij", ob, vb)
    ds = (p * dp - p * np.einsum("...ij,...ij->...i", p, dp)[..., None]) / math.sqrt(q.shape[-1])
    return (
        _reduce_to(np.einsum("...ij,...jd->...id", ds, kb), q.shape),
        _reduce_to(np.einsum("...ij,...id->...jd", ds, qb), k.shape),
        _reduce_to(np.einsum("...ij,...ie->...je", p, ob), v.shape),
    )


def sparsemax(scores, mask=None):
    """Michelot's projection: start from every allowed key, drop the keys at or below tau,
    recompute tau, until the support stops changing (no sort)."""
    z = np.asarray(scores, dtype=float)
    allowed = np.broadcast_to(True if mask is None else mask, z.shape)
    support = allowed.copy()
    while True:
        size = support.sum(axis=-1, keepdims=True)
        tau = (np.where(support, z, 0.0).sum(axis=-1, keepdims=True) - 1) / np.maximum(size, 1)
        kept = support & (z > tau)
        if np.array_equal(kept, support):
            break
        support = kept
    return np.where(support, z - tau, 0.0)


def sparsemax_backward(weights, grad_weights):
    """The Jacobian diag(s) - s s^T / |S| of each row, applied with einsum."""
    s = (np.asarray(weights) > 0).astype(float)
    dp = np.asarray(grad_weights, dtype=float)
    size = np.maximum(s.sum(axis=-1), 1.0)[..., None, None]
    jacobian = np.einsum("...i,ij->...ij", s, np.eye(s.shape[-1])) - (
        np.einsum("...i,...j->...ij", s, s) / size
    )
    return np.einsum("...ij,...i->...j", jacobian, dp)


def label_smoothed_cross_entropy(logits, targets, smoothing, pad_index):
    """log q_y via logaddexp.reduce; the smoothing term as a sum over all non-pad words."""
    logits = np.asarray(logits, dtype=float)
    targets = np.asarray(targets)
    vocab = logits.shape[-1]
    log_p = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
    right = np.take_along_axis(log_p, targets[..., None], axis=-1)[..., 0]
    others = log_p.sum(-1) - log_p[..., pad_index]
    loss = -(1 - smoothing) * right - smoothing / (vocab - 1) * others
    keep = targets != pad_index
    return float(loss[keep].sum() / keep.sum()) if keep.any() else 0.0


def _head_loop(x_q, x_kv, w_q, w_k, w_v, num_heads, mask):
    """Per head h (a loop over column blocks): q, k, v and log-domain weights P."""
    x_q, x_kv = np.asarray(x_q, dtype=float), np.asarray(x_kv, dtype=float)
    d_h = np.shape(w_q)[1] // num_heads
    for h in range(num_heads):
        cols = slice(h * d_h, (h + 1) * d_h)
        q, k, v = x_q @ w_q[:, cols], x_kv @ w_k[:, cols], x_kv @ w_v[:, cols]
        scores = np.einsum("...id,...jd->...ij", q, k) / math.sqrt(d_h)
        allowed = (
            np.ones(scores.shape, bool) if mask is None else np.broadcast_to(mask, scores.shape)
        )
        yield cols, q, k, v, _log_domain_weights(scores, allowed)


def gated_multihead_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, gates, mask=None):
    """A loop over heads, sum_h xi_h head_h W_o^h, log-domain weights."""
    gates = np.asarray(gates, dtype=float)
    return sum(
        gates[..., h, None, None] * np.einsum("...ij,...jd->...id", p, v) @ w_o[cols]
        for h, (cols, _q, _k, v, p) in enumerate(
            _head_loop(x_q, x_kv, w_q, w_k, w_v, num_heads, mask)
        )
    )


def _rows(a):
    """(..., n, d) -> (N, d): every batch axis and item one row."""
    return np.reshape(a, (-1, np.shape(a)[-1]))


def multihead_backward(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, grad_out, mask=None):
    """A loop over heads, log-domain weights, einsum sums; the weights' gradients block by
    block."""
    x_q, x_kv = np.asarray(x_q, dtype=float), np.asarray(x_kv, dtype=float)
    g = np.asarray(grad_out, dtype=float)
    dx_q, dx_kv = np.zeros(x_q.shape), np.zeros(x_kv.shape)
    dw_q, dw_k, dw_v, dw_o = (np.zeros(np.shape(w)) for w in (w_q, w_k, w_v, w_o))
    for cols, q, k, v, p in _head_loop(x_q, x_kv, w_q, w_k, w_v, num_heads, mask):
        head = np.einsum("...ij,...jd->...id", p, v)
        dw_o[cols] = np.einsum("nd,no->do", _rows(head), _rows(g))
        d_head = g @ w_o[cols].T
        dp = np.einsum("...id,...jd->...ij", d_head, v)
        ds = p * (dp - np.einsum("...ij,...ij->...i", p, dp)[..., None]) / math.sqrt(q.shape[-1])
        dq, dk = ds @ k, np.einsum("...ij,...id->...jd", ds, q)
        dv = np.einsum("...ij,...id->...jd", p, d_head)
        dx_q += dq @ w_q[:, cols].T
        dx_kv += dk @ w_k[:, cols].T + dv @ w_v[:, cols].T
        dw_q[:, cols] = np.einsum("ni,nd->id", _rows(x_q), _rows(dq))
        dw_k[:, cols] = np.einsum("ni,nd->id", _rows(x_kv), _rows(dk))
        dw_v[:, cols] = np.einsum("ni,nd->id", _rows(x_kv), _rows(dv))
    return dx_q, dx_kv, dw_q, dw_k, dw_v, dw_o


def coverage_context(s_prev, h, coverage, w_s, w_h, w_c, v, mask=None):
    """ch3: einsum for every product, the coverage term as an outer product, log-domain
    weights."""
    h = np.asarray(h, dtype=float)
    pre = (
        np.einsum("bd,da->ba", np.asarray(s_prev, dtype=float), w_s)[:, None, :]
        + np.einsum("bnd,da->bna", h, w_h)
        + np.multiply.outer(np.asarray(coverage, dtype=float), np.asarray(w_c))
    )
    weights = masked_softmax(np.einsum("bna,a->bn", np.tanh(pre), v), mask)
    return np.einsum("bn,bnd->bd", weights, h), weights


def location_aware_context(s_prev, h, prev_weights, w_s, w_h, filters, w_f, v, mask=None):
    """ch3: np.convolve per sentence and filter ('full', its centred n entries), log-domain
    weights."""
    h, prev = np.asarray(h, dtype=float), np.asarray(prev_weights, dtype=float)
    filters = np.asarray(filters, dtype=float)
    n, p = prev.shape[1], (filters.shape[1] - 1) // 2
    f = np.array([[np.convolve(row, fj, mode="full")[p : p + n] for fj in filters] for row in prev])
    pre = (np.asarray(s_prev, dtype=float) @ w_s)[:, None, :] + h @ w_h
    scores = np.tanh(pre + np.swapaxes(f, 1, 2) @ w_f) @ v  # (B, n)
    weights = masked_softmax(scores, mask)
    return np.einsum("bn,bnd->bd", weights, h), weights


def alibi_attention(q, k, v, slopes, mask=None):
    """Log-domain weights, einsum scores, the bias as -m_h * |i - j| built per head."""
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    n, d = q.shape[-2:]
    dist = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    scores = np.einsum("...id,...jd->...ij", q / np.sqrt(d), k) - np.multiply.outer(
        np.asarray(slopes, dtype=float), dist
    )
    allowed = np.ones(scores.shape, bool) if mask is None else np.broadcast_to(mask, scores.shape)
    w = _log_domain_weights(scores, allowed)
    return np.einsum("...ij,...jd->...id", w, v), w


def relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance):
    """log(r) - log(E) over log(max_distance) - log(E), truncated with int, element by element."""
    rel = np.asarray(relative_position)
    out = np.empty(rel.shape, dtype=np.int64)
    half = num_buckets // 2 if bidirectional else num_buckets
    exact = half // 2
    for idx, x in np.ndenumerate(rel):
        x = int(x)
        base = half if bidirectional and x > 0 else 0
        r = abs(x) if bidirectional else max(-x, 0)
        if r < exact:
            out[idx] = base + r
            continue
        frac = (math.log(r) - math.log(exact)) / (math.log(max_distance) - math.log(exact))
        out[idx] = base + min(half - 1, exact + int(frac * (half - exact)))
    return out


def online_softmax_backward(q, k, v, out, logsumexp, grad_out, block_size=128, mask=None):
    """All keys at once with einsum; log-domain weights; D as rowsum(P * dP), not dO . O."""
    q, k, v, d_out = (np.asarray(a, dtype=float) for a in (q, k, v, grad_out))
    c = 1.0 / math.sqrt(q.shape[-1])
    s = np.einsum("...id,...jd->...ij", q, k) * c
    allowed = np.ones(s.shape, bool) if mask is None else np.broadcast_to(mask, s.shape)
    p = _log_domain_weights(s, allowed)
    dp = np.einsum("...ic,...jc->...ij", d_out, v)
    ds = p * dp - p * np.sum(p * dp, axis=-1, keepdims=True)
    return (
        np.einsum("...ij,...jd->...id", ds, k) * c,
        np.einsum("...ij,...id->...jd", ds, q) * c,
        np.einsum("...ij,...ic->...jc", p, d_out),
    )


VARIANTS = {
    "gated_multihead_attention": gated_multihead_attention,
    "multihead_backward": multihead_backward,
    "softmax_backward": softmax_backward,
    "attention_backward": attention_backward,
    "sparsemax": sparsemax,
    "sparsemax_backward": sparsemax_backward,
    "loo_loss_and_grad_ard": loo_loss_and_grad_ard,
    "nadaraya_watson_ard": nadaraya_watson_ard,
    "nadaraya_watson_query_grad": nadaraya_watson_query_grad,
    "epanechnikov_weights": epanechnikov_weights,
    "label_smoothed_cross_entropy": label_smoothed_cross_entropy,
    "coverage_context": coverage_context,
    "location_aware_context": location_aware_context,
    "alibi_attention": alibi_attention,
    "relative_position_bucket": relative_position_bucket,
    "online_softmax_backward": online_softmax_backward,
}


# ----------------------------------------------------------------------------------------
# the margin of one judged case


def margin(spec: dict, expected, outcome: contract.Outcome) -> float:
    """The worst error / tolerance over the entries (> 1: the judge fails it); for an
    accuracy threshold the missed fraction over the allowed one; exact outputs 0 or inf."""
    if outcome.kind != "value":
        return math.inf
    got = outcome.arrays
    kind = spec.comparator.get("kind", "allclose")
    if kind in ("accuracy", "tokens"):  # the judge's own reading of token sequences
        comp = spec.comparator
        pred, problem = contract._token_rows(got[0], expected[0].shape[0])
        if problem:
            return math.inf
        pad, eos = int(comp.get("pad", 0)), comp.get("eos")
        want, have = contract._sequences(expected[0], pad, eos), contract._sequences(pred, pad, eos)
        missed = sum(w != h for w, h in zip(want, have)) / max(len(want), 1)
        if kind == "tokens":
            return 0.0 if missed == 0 else math.inf
        return missed / (1 - float(comp["threshold"]))
    worst = 0.0
    scales = getattr(expected, "scale", None) or (None,) * len(expected)
    for exp, g, scale in zip(expected, got, scales):
        if exp.shape != g.shape:
            return math.inf
        e_f, g_f = exp.astype(np.float64), g.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            err = np.where(e_f == g_f, 0.0, np.abs(g_f - e_f))
            err = np.where(np.isnan(e_f) & np.isnan(g_f), 0.0, err)
            allowed = contract.tolerance(e_f, spec.rtol, spec.atol, scale)
            ratio = np.where(err == 0, 0.0, err / allowed)
        worst = max(worst, float(np.max(np.where(np.isnan(ratio), math.inf, ratio), initial=0.0)))
    return worst


# ----------------------------------------------------------------------------------------
# the scan


@dataclass
class Tally:
    cases: int = 0
    failures: list = field(default_factory=list)  # (implementation, check, seed, message)
    worst: dict = field(default_factory=dict)  # (implementation, check) -> (margin, seed, case)

    def add(self, who: str, check: str, seed: int, case: str, passed, message, value):
        self.cases += 1
        if not passed:
            self.failures.append((who, check, seed, message))
        if value >= self.worst.get((who, check), (-1.0,))[0]:
            self.worst[(who, check)] = (value, seed, case)


def implementations(assignment: str, namespace: dict) -> dict:
    """check name -> {who: function}: the reference, the notebook's, a variant if any."""
    out = {}
    for check in checks.checks_for(assignment):
        if check.answer is None:
            fns = {"reference": check.reference}
        else:  # the answer is not a reference call (e.g. the truth of an outcome task)
            fns = {}
        if check.name in namespace:
            fns["notebook"] = namespace[check.name]
        if check.name in VARIANTS:
            fns["variant"] = VARIANTS[check.name]
        out[check.name] = fns
    return out


def scan(assignment: str, seeds, namespace: dict, tally: Tally | None = None) -> Tally:
    """Judge every implementation on every hidden case of every seed."""
    tally = tally or Tally()
    fns = implementations(assignment, namespace)
    for seed in seeds:
        for check in checks.checks_for(assignment):
            spec = checks.spec(check.name)
            for case in checks.hidden_cases(check.name, seed):
                case = checks.prepare(check.name, case)  # judged with a public case's detail
                for who, fn in fns[check.name].items():
                    with np.errstate(all="ignore"):
                        outcome = contract.run_case(fn, *case.fresh())
                    verdict = judging.judge(spec, case, outcome)
                    value = margin(spec, case.expected, outcome)
                    tally.add(
                        who, check.name, seed, case.name, verdict.passed, verdict.message, value
                    )
    return tally


def report(assignment: str, seeds: range, tally: Tally, seconds: float) -> str:
    lines = [
        f"{assignment}: seeds {seeds.start}-{seeds.stop - 1} ({len(seeds)}), "
        f"{tally.cases} judged cases, {len(tally.failures)} failures, {seconds:.0f} s"
    ]
    for (who, check), (value, seed, case) in sorted(tally.worst.items()):
        lines.append(f"  {check:30s} {who:9s} worst margin {value:.3g} (seed {seed}, '{case}')")
    for who, check, seed, message in tally.failures[:20]:
        lines.append(f"  FAILED {who} {check} seed {seed}: {message}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=2000, help="seeds per chapter")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--chapter", action="append", help="only this assignment (repeatable)")
    args = parser.parse_args(argv)
    seeds = range(args.start, args.start + args.seeds)
    failed = 0
    for assignment in args.chapter or sorted(checks.CHAPTERS):
        with tempfile.TemporaryDirectory() as folder:
            cwd = os.getcwd()
            os.chdir(folder)
            try:
                namespace = solved_namespace(assignment, Path(folder))
                started = time.process_time()
                tally = scan(assignment, seeds, namespace)
            finally:
                os.chdir(cwd)
        print(report(assignment, seeds, tally, time.process_time() - started), flush=True)
        failed += len(tally.failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
