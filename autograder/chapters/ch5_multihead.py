"""Chapter plug-in: Multi-head attention (assignment ``ch5_multihead``).

Its checks (inputs from a seed, reference, tolerance, hints, known mistakes), registered
with ``autograder.checking.checks.register``; the grader core never names this module. The references
are the answer key's (``answers/ch5_multihead.py``): the chapter shows the forward pass, the
assignment asks for a gate on every head, the heads' importance, the backward pass and the
memory the backward pass keeps.
"""

from __future__ import annotations

import math

import numpy as np

from answers import ch5_multihead as answers
from autograder.checking.checks import (
    HINT_EMPTY,
    HINT_MAX_SHIFT,
    Case,
    Chapter,
    Check,
    Mistake,
    Plain,
    distinct_sizes,
    normal,
    register,
)
from solutions.conventions import masked_softmax

# ----------------------------------------------------------------------------------------
# inputs


def _weights(rng, d_in, d_out, large=1.0):
    """(d_in, d_out) projection of unit-variance outputs (times ``large``)."""
    return large * normal(rng, d_in, d_out) / math.sqrt(d_in)


def _layer(rng, d_q, d_kv, d_model, d_out, large=1.0):
    """w_q, w_k, w_v, w_o; ``large`` multiplies w_q and w_k (scores about large^2)."""
    return (
        _weights(rng, d_q, d_model, large),
        _weights(rng, d_kv, d_model, large),
        _weights(rng, d_kv, d_model),
        _weights(rng, d_model, d_out),
    )


def _causal(n):
    return np.arange(n)[None, :] <= np.arange(n)[:, None]


def _empty_row_mask(rng, batch, n_q, n_kv):
    """(batch, n_q, n_kv): random padding of the keys, and one query row with no key."""
    mask = rng.random((batch, n_q, n_kv)) < 0.7
    mask[..., 0] = True  # every other row keeps a key
    mask[0, -1] = False  # the last query of the first sequence: nothing allowed
    return mask


def _layer_cases(rng, extra):
    """The cases the three attention checks share: self- and cross-attention, a fully-masked
    row, n_q = 1 without a batch axis, two batch axes, scores of 10^4.
    ``extra(rng, case name, the output's shape, h)`` gives each case's last argument: the
    gates or the output's gradient."""
    n_q, n_kv = distinct_sizes(rng, 2, 7, 2)
    x = normal(rng, 2, n_q, 6)
    cases = [
        ("self-attention, causal, batch of 2", (x, x, *_layer(rng, 6, 6, 12, 12), 3), _causal(n_q)),
        (
            "cross-attention, n_q != n_kv, d_out != d_model",
            (normal(rng, 2, n_q, 5), normal(rng, 2, n_kv, 7), *_layer(rng, 5, 7, 12, 8), 4),
            None,
        ),
        (
            "padded keys and a fully-masked row",
            (normal(rng, 2, n_q, 6), normal(rng, 2, n_kv, 6), *_layer(rng, 6, 6, 8, 8), 2),
            _empty_row_mask(rng, 2, n_q, n_kv),
        ),
        (
            "one head, one query (n_q=1), no batch axis",
            (normal(rng, 1, 4), normal(rng, n_kv, 4), *_layer(rng, 4, 4, 6, 6), 1),
            None,
        ),
        (
            "batch axes (2, 3), one mask for every sequence",
            (normal(rng, 2, 3, n_q, 4), normal(rng, 2, 3, n_kv, 4), *_layer(rng, 4, 4, 8, 8), 4),
            rng.random((n_q, n_kv)) < 0.8,
        ),
        # query and key projections 100 times larger: each head's scores are about +-10^4,
        # and exp overflows without the max shift
        (
            "large scores, 3 heads",
            (normal(rng, 2, n_q, 6), normal(rng, 2, n_kv, 6), *_layer(rng, 6, 6, 12, 12, 100.0), 3),
            None,
        ),
        # every width 1 (one head of width 1) and a single key: the documented shapes' corner
        (
            "one key (n_kv = 1), every width 1 (d_q = d_kv = d_model = d_out = 1)",
            (normal(rng, 2, n_q, 1), normal(rng, 2, 1, 1), *_layer(rng, 1, 1, 1, 1), 1),
            None,
        ),
    ]
    out = []
    for name, args, mask in cases:
        x_q, h, w_o = args[0], args[6], args[5]
        shape = np.shape(x_q)[:-1] + (np.shape(w_o)[1],)  # the output's
        kind = Plain if name.startswith("one key (n_kv = 1)") else Case  # mistakes coincide
        out.append(kind(name, (*args, *extra(rng, name, shape, h)), {"mask": mask}))
    return out


def _gates(rng, name, shape, h):
    if name.startswith("self-attention"):
        return (rng.uniform(-1.0, 2.0, h),)  # (h,): one gate per head for every sequence
    if name.startswith("padded"):
        gates = rng.uniform(0.5, 2.0, (2, h))  # (B, h): one set per sequence
        gates[0, 1] = 0.0  # a pruned head
        return (gates,)
    if name.startswith("batch axes"):
        return (rng.uniform(-1.0, 2.0, (3, h)),)  # (3, h) broadcast over the first axis
    gates = rng.uniform(-1.0, 2.0, shape[:-2] + (h,))
    if name.startswith("large scores"):
        # a negative gate: inside a saturated softmax a positive one changes nothing, so
        # gating the scores would look like ignoring the gates
        gates[..., 0] = -rng.uniform(0.5, 1.0)
    return (gates,)


def _gated_cases(rng):
    cases = _layer_cases(rng, _gates)
    # the gates' own batch axes broadcast against the inputs': (3, 1, h) with a batch of 2
    x = normal(rng, 2, 3, 6)
    cases.append(
        Case(
            "gates (3, 1, h) broadcast over a batch of 2",
            (x, x, *_layer(rng, 6, 6, 12, 12), 3, rng.uniform(-1.0, 2.0, (3, 1, 3))),
        )
    )
    return cases


def _grad_out(rng, name, shape, h):
    return (normal(rng, *shape),)


def _grad_cases(rng):
    return _layer_cases(rng, _grad_out)


# ----------------------------------------------------------------------------------------
# known mistakes, task 1: where the gate goes


def _heads(x_q, x_kv, w_q, w_k, w_v, num_heads, mask, score_gates=None):
    """q, k, v (..., h, n, d_h), weights and heads of eq. ch5-head; ``score_gates``
    (..., h) multiplies each head's scores (a mistake)."""
    q, k, v = (
        answers._to_heads(np.asarray(x, float) @ w, num_heads)
        for x, w in ((x_q, w_q), (x_kv, w_k), (x_kv, w_v))
    )
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (..., h, n_q, n_kv)
    if score_gates is not None:
        scores = np.asarray(score_gates)[..., None, None] * scores
    shared = None if mask is None else np.expand_dims(mask, -3)
    weights = masked_softmax(scores, shared)
    return q, k, v, weights, weights @ v


def _gates_tiled(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, gates, mask=None):
    """Feature j gated by gates[j % h] (np.tile) instead of gates[j // d_h] (np.repeat)."""
    *_, heads = _heads(x_q, x_kv, w_q, w_k, w_v, num_heads, mask)
    gates = np.asarray(gates)
    d_h = heads.shape[-1]
    tiled = np.tile(gates, (1,) * (gates.ndim - 1) + (d_h,))[..., None, :]  # (..., 1, d_model)
    return (tiled * answers._from_heads(heads)) @ w_o


def _gates_after_output(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, gates, mask=None):
    """The output's features, in h blocks, gated after W_o instead of the heads before it."""
    *_, heads = _heads(x_q, x_kv, w_q, w_k, w_v, num_heads, mask)
    out = answers._from_heads(heads) @ w_o  # (..., n_q, d_out)
    if out.shape[-1] % num_heads:
        raise ValueError("d_out is not a multiple of h: this mistake has no meaning here")
    gated = answers._to_heads(out, num_heads) * np.asarray(gates)[..., None, None]
    return answers._from_heads(gated)


def _gates_on_scores(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, gates, mask=None):
    """Each head's scores multiplied by its gate (inside the softmax)."""
    *_, heads = _heads(x_q, x_kv, w_q, w_k, w_v, num_heads, mask, score_gates=gates)
    return answers._from_heads(heads) @ w_o


def _gates_ignored(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, gates, mask=None):
    """Plain multi-head attention: the gates never used."""
    ones = np.ones(np.shape(gates))
    return answers.gated_multihead_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, ones, mask)


# ----------------------------------------------------------------------------------------
# known mistakes, task 2: how the per-example derivatives become one score per head


def _per_example(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, grad_out, mask):
    """(..., h) terms G * (head_h W_o^h), not yet summed: (..., h, n_q, d_out)."""
    *_, heads = _heads(x_q, x_kv, w_q, w_k, w_v, num_heads, mask)
    blocks = np.asarray(w_o).reshape(num_heads, -1, np.shape(w_o)[1])  # (h, d_h, d_out)
    return np.asarray(grad_out)[..., None, :, :] * (heads @ blocks)  # (..., h, n_q, d_out)


def _importance_signed(*args, mask=None):
    terms = _per_example(*args, mask)
    return terms.sum(axis=(-2, -1)).reshape(-1, args[6]).mean(axis=0)


def _importance_abs_after_mean(*args, mask=None):
    return np.abs(_importance_signed(*args, mask=mask))


def _importance_summed(*args, mask=None):
    terms = _per_example(*args, mask)
    return np.abs(terms.sum(axis=(-2, -1))).reshape(-1, args[6]).sum(axis=0)


def _importance_abs_terms(*args, mask=None):
    terms = _per_example(*args, mask)
    return np.abs(terms).sum(axis=(-2, -1)).reshape(-1, args[6]).mean(axis=0)


def _importance_mean_terms(*args, mask=None):
    terms = _per_example(*args, mask)
    return np.abs(terms.mean(axis=(-2, -1))).reshape(-1, args[6]).mean(axis=0)


# ----------------------------------------------------------------------------------------
# known mistakes, task 3: the backward pass with one step wrong


def _backward(
    x_q,
    x_kv,
    w_q,
    w_k,
    w_v,
    w_o,
    num_heads,
    grad_out,
    mask=None,
    *,
    scaled=True,
    row_term=True,
    key_path=True,
    value_path=True,
    swap=True,
    mask_backward=True,
    transpose_dw_o=False,
):
    """``multihead_backward`` with one of its steps switched off or done wrong."""
    x_q, x_kv = np.asarray(x_q, float), np.asarray(x_kv, float)
    grad_out = np.asarray(grad_out, float)
    q, k, v, weights, heads = _heads(x_q, x_kv, w_q, w_k, w_v, num_heads, mask)
    if not mask_backward:  # the weights recomputed without the mask
        *_, weights, _unused = _heads(x_q, x_kv, w_q, w_k, w_v, num_heads, None)
    root = math.sqrt(q.shape[-1]) if scaled else 1.0
    dw_o = answers._summed_outer(answers._from_heads(heads), grad_out)
    if transpose_dw_o:  # square W_o only: otherwise the shape's own hint names it
        if dw_o.shape[0] != dw_o.shape[1]:
            raise ValueError("a transposed dW_o of another shape: the shape check names it")
        dw_o = dw_o.T
    d_merged = grad_out @ np.asarray(w_o).T  # (..., n_q, d_model)
    if swap:
        d_heads = answers._to_heads(d_merged, num_heads)
    else:  # a plain reshape to (..., h, n_q, d_h)
        n, width = d_merged.shape[-2:]
        d_heads = d_merged.reshape(d_merged.shape[:-2] + (num_heads, n, width // num_heads))
    d_weights = d_heads @ np.swapaxes(v, -1, -2)
    dv = np.swapaxes(weights, -1, -2) @ d_heads
    row = np.sum(weights * d_weights, axis=-1, keepdims=True) if row_term else 0.0
    d_scores = weights * (d_weights - row)
    dq = answers._from_heads(d_scores @ k / root)
    dk = answers._from_heads(np.swapaxes(d_scores, -1, -2) @ q / root)
    dv = answers._from_heads(dv)
    dx_kv = (dk @ np.asarray(w_k).T if key_path else 0.0) + (
        dv @ np.asarray(w_v).T if value_path else 0.0
    )
    return (
        dq @ np.asarray(w_q).T,
        dx_kv,
        answers._summed_outer(x_q, dq),
        answers._summed_outer(x_kv, dk),
        answers._summed_outer(x_kv, dv),
        dw_o,
    )


def _backward_with(**wrong):
    def outputs(*args, **kwargs):
        return _backward(*args, **kwargs, **wrong)

    return outputs


def _backward_scale(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, grad_out, mask=None):
    """The size of the terms each gradient sums (docs/conventions.md, "Numbers"): the
    backward pass on absolute values (|x|, |W|, |G|, the weights P), the softmax's terms
    times 1 + max |S| (a weight exp(s - max) carries the rounding of its exponent s)."""
    q, k, v, weights, heads = _heads(x_q, x_kv, w_q, w_k, w_v, num_heads, mask)
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # (..., h, n_q, n_kv)
    exponent = 1.0 + np.max(np.abs(scores), initial=0.0)
    q, k, v = np.abs(q), np.abs(k), np.abs(v)
    # a weight that underflows to a subnormal keeps only a few bits: its error is absolute,
    # about the smallest normal number, whatever its size
    weights = weights + np.finfo(np.float64).tiny
    x_q, x_kv = np.abs(np.asarray(x_q, float)), np.abs(np.asarray(x_kv, float))
    w_q, w_k, w_v, w_o = (np.abs(np.asarray(w, float)) for w in (w_q, w_k, w_v, w_o))
    g = np.abs(np.asarray(grad_out, float))
    merged = answers._from_heads(weights @ v) * exponent  # (..., n_q, d_model)
    d_heads = answers._to_heads(g @ w_o.T, num_heads)  # (..., h, n_q, d_h)
    d_weights = d_heads @ np.swapaxes(v, -1, -2)  # (..., h, n_q, n_kv)
    row = np.sum(weights * d_weights, axis=-1, keepdims=True)
    d_scores = weights * (d_weights + row) * exponent / math.sqrt(q.shape[-1])
    dq = answers._from_heads(d_scores @ k)
    dk = answers._from_heads(np.swapaxes(d_scores, -1, -2) @ q)
    dv = answers._from_heads(np.swapaxes(weights, -1, -2) @ d_heads) * exponent
    return (
        dq @ w_q.T,
        dk @ w_k.T + dv @ w_v.T,
        answers._summed_outer(x_q, dq),
        answers._summed_outer(x_kv, dk),
        answers._summed_outer(x_kv, dv),
        answers._summed_outer(merged, g),
    )


# ----------------------------------------------------------------------------------------
# known mistakes, task 4: the cost model


def _bytes_without_heads(batch, num_heads, n, d_model, itemsize, recompute):
    return answers.attention_backward_bytes(batch, 1, n, d_model, itemsize, recompute)


def _bytes_weights_per_query(batch, num_heads, n, d_model, itemsize, recompute):
    if recompute:
        raise ValueError("the same count as the reference when P is recomputed")
    return answers.attention_backward_bytes(batch, num_heads, n, d_model, itemsize, True)


def _bytes_full_width_heads(batch, num_heads, n, d_model, itemsize, recompute):
    rows = batch * num_heads * n * (1 if recompute else n)
    return int(itemsize * (4 * batch * num_heads * n * d_model + rows))


def _bytes_without_output(batch, num_heads, n, d_model, itemsize, recompute):
    rows = batch * num_heads * n * (1 if recompute else n)
    return int(itemsize * (3 * batch * n * d_model + rows))


def _bytes_cases(rng):
    return [
        Case("one sequence, one head, weights stored", (1, 1, 8, 4, 4, False)),
        Case("8 heads, weights stored, float32", (2, 8, 64, 128, 4, False)),
        Case("8 heads, logsumexp only, float32", (2, 8, 64, 128, 4, True)),
        Case("32 heads of 128, n = 4096, bfloat16, weights stored", (1, 32, 4096, 4096, 2, False)),
        Case("32 heads of 128, n = 4096, bfloat16, logsumexp only", (1, 32, 4096, 4096, 2, True)),
        Case(
            "random sizes",
            (
                int(rng.integers(1, 9)),
                int(rng.choice([2, 4, 8, 16])),
                int(rng.integers(2, 2049)),
                int(rng.choice([2, 4, 8])) * 64,
                int(rng.choice([2, 4, 8])),
                bool(rng.integers(2)),
            ),
        ),
    ]


BACKWARD_OUTPUTS = ("dx_q", "dx_kv", "dw_q", "dw_k", "dw_v", "dw_o")
SUM_THE_BATCH = (
    "a weight's gradient has the weight's shape: sum x^T dY over every batch axis and every item"
)

CHAPTER = register(
    Chapter(
        "ch5_multihead",
        # measured 2026-12-05 (`python -m autograder.grading.measure`) on a machine shared by
        # six builds (2 CPUs, load average 8 to 12): runs 2.69, 0.39, 0.33 s and 4.54, 0.47,
        # 0.36 s. The first run of every chapter was slow at that load (ch2_soft_hard, recorded
        # at 0.2 s, measured 4.27, 0.45, 0.46 s beside it), so T = the slowest warm run, 0.5 s;
        # measure again on a quiet machine
        reference_seconds=0.5,
        checks=(
            Check(
                "gated_multihead_attention",
                answers.gated_multihead_attention,
                _gated_cases,
                outputs=("output",),
                hints={
                    "shape": "the output is (..., n_q, d_out), its batch axes those of the inputs "
                    "and the gates broadcast together",
                    "nan": HINT_EMPTY + "; and " + HINT_MAX_SHIFT,
                },
                mistakes=(
                    Mistake(
                        "the gate of feature j of the merged heads is that of the head that owns "
                        "it: head h owns a block of d_h consecutive features, not every h-th one",
                        _gates_tiled,
                    ),
                    Mistake(
                        "gate each head's output before W_o: gating the output's features after "
                        "W_o mixes every head into every block",
                        _gates_after_output,
                    ),
                    Mistake(
                        "the gate multiplies the head's output, not its scores: a gate inside the "
                        "softmax changes the head's weights instead of scaling what it returns",
                        _gates_on_scores,
                    ),
                    Mistake(
                        "your output does not depend on the gates: multiply head h by gates[..., h]",
                        _gates_ignored,
                    ),
                ),
            ),
            Check(
                "head_importance",
                answers.head_importance,
                _grad_cases,
                outputs=("importance",),
                hints={
                    "shape": "one score per head: (h,), averaged over every batch axis",
                    "nan": HINT_EMPTY + "; and " + HINT_MAX_SHIFT,
                },
                mistakes=(
                    Mistake(
                        "take the absolute value of each example's derivative: I_h averages "
                        "|dL/dxi_h|, so examples of opposite sign do not cancel",
                        _importance_signed,
                        # where every example's derivative has one sign, |mean| is the signed
                        # mean: named only where every failing case agrees
                        everywhere=True,
                    ),
                    Mistake(
                        "take the absolute value of each example's derivative before averaging "
                        "over the batch, not of the average",
                        _importance_abs_after_mean,
                    ),
                    Mistake(
                        "average over the batch, do not sum: I_h is a mean over examples",
                        _importance_summed,
                    ),
                    Mistake(
                        "dL/dxi_h is one number per example: the chain rule sums over every "
                        "query and output feature first, and only that sum's absolute value is "
                        "taken, not every term's",
                        _importance_abs_terms,
                    ),
                    Mistake(
                        "dL/dxi_h sums the products over every query and output feature of the "
                        "example; it does not average them",
                        _importance_mean_terms,
                    ),
                ),
                calls=("gated_multihead_attention",),
            ),
            Check(
                "multihead_backward",
                answers.multihead_backward,
                _grad_cases,
                outputs=BACKWARD_OUTPUTS,
                # ulps of the terms each gradient sums (_backward_scale): the weights' rounding
                # grows with the scores, and the softmax step of the backward cancels
                rtol=1e-9,
                atol=1e-13,
                scale=_backward_scale,
                hints={
                    "arity": "return six gradients (dx_q, dx_kv, dw_q, dw_k, dw_v, dw_o)",
                    "nan": HINT_EMPTY + "; and " + HINT_MAX_SHIFT,
                    "dw_o.transposed": "dW_o has the shape and orientation of W_o, (d_model, "
                    "d_out): W_o maps the merged heads to the output",
                    "dw_q.shape": SUM_THE_BATCH,
                    "dw_k.shape": SUM_THE_BATCH,
                    "dw_v.shape": SUM_THE_BATCH,
                    "dw_o.shape": SUM_THE_BATCH,
                },
                mistakes=(
                    Mistake(
                        "the scores are divided by sqrt(d_h): the chain rule carries that factor "
                        "into the gradients of both the queries and the keys",
                        _backward_with(scaled=False),
                    ),
                    Mistake(
                        "you kept only the diagonal of the softmax's Jacobian: each weight also "
                        "depends on the other scores of its row, through the normaliser",
                        _backward_with(row_term=False),
                    ),
                    Mistake(
                        "x_kv feeds the values too: its gradient gathers what flows back through "
                        "the keys and through the values",
                        _backward_with(value_path=False),
                    ),
                    Mistake(
                        "x_kv feeds the keys too: its gradient gathers what flows back through "
                        "the keys and through the values",
                        _backward_with(key_path=False),
                    ),
                    Mistake(
                        "split the merged heads' gradient into heads as the forward pass split "
                        "the heads: the same reshape, then the same swap of the head and item "
                        "axes",
                        _backward_with(swap=False),
                    ),
                    Mistake(
                        "use the masked weights in the backward pass too: a masked key has "
                        "P = 0 and gets no gradient",
                        _backward_with(mask_backward=False),
                    ),
                    Mistake(
                        "dW_o has the orientation of W_o (d_model x d_out): you computed its "
                        "transpose",
                        _backward_with(transpose_dw_o=True),
                    ),
                ),
            ),
            Check(
                "attention_backward_bytes",
                answers.attention_backward_bytes,
                _bytes_cases,
                outputs=("bytes",),
                rtol=0.0,
                atol=0.0,
                comparator={"kind": "allclose", "integer": True},  # a Python int, exactly
                mistakes=(
                    Mistake(
                        "every head has its own weights and its own logsumexp: count them per "
                        "sequence and per head, not once per sequence",
                        _bytes_without_heads,
                    ),
                    Mistake(
                        "the weights are n x n per sequence and head: one row of n per query, "
                        "not one number per query",
                        _bytes_weights_per_query,
                    ),
                    Mistake(
                        "a head is d_model / h wide: over all heads, Q, K, V and O are each as "
                        "wide as the model, not h times wider",
                        _bytes_full_width_heads,
                    ),
                    Mistake(
                        "the backward pass reads the output O too (each query's softmax term D "
                        "needs it): keep Q, K, V and O",
                        _bytes_without_output,
                    ),
                ),
            ),
        ),
    )
)
