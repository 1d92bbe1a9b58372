"""Answer key of assignment ch3_seq2seq: attention that remembers where it has been.

The chapter builds Bahdanau's additive score {eq}`ch3-bahdanau-score`, in which every decoder
step chooses its source positions afresh, knowing nothing of the steps before. The graded
tasks add that memory, in the two forms the literature gives it:

- coverage (See et al., 2017): the running sum of the earlier steps' weights, fed into the
  score as one more feature, and a loss that penalises attending again where the coverage
  is already high (``coverage_loss``, ``coverage_context``, ``coverage_attention_steps``);
- location-aware attention (Chorowski et al., 2015): features convolved from the previous
  step's weights, so that the score can say "just to the right of where I was"
  (``location_aware_context``).

Conventions as in ``docs/conventions.md``: batch first, weights used as ``x @ w``, boolean
masks with True = counts (may attend), a row with nothing allowed gets zero weights and a
zero context. Dimensions: B batch, T decoder steps, n source positions, d_dec / d_enc the
widths of the decoder and encoder states, d_att the width of the score's hidden layer,
k the number of location filters, r their (odd) width.
"""

from __future__ import annotations

import numpy as np

from solutions.conventions import masked_softmax


def _attend(scores, h, mask):
    """Masked softmax of the scores, then the weighted sum of the encoder states.

    scores: (B, n); h: (B, n, d_enc); mask: (B, n) bool or None.
    Returns (context (B, d_enc), weights (B, n)); a fully masked row gives zeros.
    """
    weights = masked_softmax(scores, mask)  # (B, n)
    context = np.einsum("bn,bnd->bd", weights, h)  # (B, d_enc), c_t = sum_i a_ti h_i
    return context, weights


def coverage_vectors(weights):
    """The coverage before each step: c_t = sum_{t' < t} a_t', c_1 = 0 (See et al. eq. 10).

    weights: (B, T, n) attention weights of T decoder steps over n source positions.
    Returns coverage (B, T, n): the sum of the weights of the steps strictly before t.
    """
    total = np.cumsum(weights, axis=-2)  # (B, T, n), sum over t' <= t
    return total - weights  # (B, T, n), sum over t' < t


def coverage_loss(weights, mask=None):
    """The coverage loss of See et al. (2017, eq. 12), summed over the steps: one per row.

    weights: (B, T, n) attention weights of T decoder steps over n source positions.
    mask:    bool, broadcastable to (B, T, n), True = this (step, position) counts: e.g.
             (B, 1, n) for the real source words, (B, T, 1) for the real output steps, or
             their ``&``; None = everything counts. A masked entry counts as weight 0: it
             adds nothing to the coverage of later steps and nothing to the loss.
    Returns loss (B,): sum_t sum_i min(a_ti, c_ti) with c_t = sum_{t' < t} a_t'.
    """
    weights = np.asarray(weights, dtype=np.float64)
    if mask is not None:
        weights = np.where(mask, weights, 0.0)  # (B, T, n)
    coverage = coverage_vectors(weights)  # (B, T, n)
    return np.minimum(weights, coverage).sum(axis=(-2, -1))  # (B,)


def coverage_context(s_prev, h, coverage, w_s, w_h, w_c, v, mask=None):
    """Additive attention with a coverage feature for one decoder step (See et al. eq. 11).

    s_prev:   (B, d_dec) previous decoder state (the query)
    h:        (B, n, d_enc) encoder states
    coverage: (B, n) the sum of the earlier steps' weights at each source position
    w_s: (d_dec, d_att), w_h: (d_enc, d_att), w_c: (d_att,), v: (d_att,)
    mask:     (B, n) bool, True = a real source word; None = all
    Returns (context (B, d_enc), weights (B, n)) with
    e_i = v . tanh(s_prev W_s + h_i W_h + c_i w_c), a = masked softmax(e), context = a h.
    """
    s_prev, h = np.asarray(s_prev, dtype=np.float64), np.asarray(h, dtype=np.float64)
    coverage = np.asarray(coverage, dtype=np.float64)
    query = (s_prev @ w_s)[:, None, :]  # (B, 1, d_att)
    feature = coverage[..., None] * np.asarray(w_c)  # (B, n, d_att), c_i w_c
    scores = np.tanh(query + h @ w_h + feature) @ v  # (B, n), eq. 11
    return _attend(scores, h, mask)


def location_features(prev_weights, filters):
    """The location features f = F * a_{t-1} of Chorowski et al. (2015, eq. 8).

    prev_weights: (B, n) the previous step's attention weights
    filters:      (k, r) k filters of odd width r
    Returns f (B, n, k): f_ij = sum_m F_jm a_{i + p - m}, p = (r - 1) / 2, a 1-D convolution
    (the filter flipped) of the same length n as the source, zeros read outside it.
    """
    prev_weights = np.asarray(prev_weights, dtype=np.float64)
    filters = np.asarray(filters, dtype=np.float64)
    n, r = prev_weights.shape[-1], filters.shape[1]
    p = (r - 1) // 2
    padded = np.pad(prev_weights, ((0, 0), (p, p)))  # (B, n + 2p)
    # windows[b, i, u] = a_{i - p + u}, u = 0 .. r - 1
    windows = np.stack([padded[:, u : u + n] for u in range(r)], axis=-1)  # (B, n, r)
    return windows @ filters[:, ::-1].T  # (B, n, k): tap u meets F_{j, r-1-u}


def location_aware_context(s_prev, h, prev_weights, w_s, w_h, filters, w_f, v, mask=None):
    """Location-aware attention for one decoder step (Chorowski et al. 2015, eqs. 8-9).

    s_prev:       (B, d_dec) previous decoder state (the query)
    h:            (B, n, d_enc) encoder states
    prev_weights: (B, n) the previous step's attention weights a_{t-1}
    w_s: (d_dec, d_att), w_h: (d_enc, d_att)
    filters:      (k, r) k convolution filters of odd width r
    w_f: (k, d_att), v: (d_att,)
    mask:         (B, n) bool, True = a real source word; None = all
    Returns (context (B, d_enc), weights (B, n)) with
    e_i = v . tanh(s_prev W_s + h_i W_h + f_i W_f), f = F * a_{t-1}.
    """
    s_prev, h = np.asarray(s_prev, dtype=np.float64), np.asarray(h, dtype=np.float64)
    features = location_features(prev_weights, filters)  # (B, n, k), eq. 8
    query = (s_prev @ w_s)[:, None, :]  # (B, 1, d_att)
    scores = np.tanh(query + h @ w_h + features @ w_f) @ v  # (B, n), eq. 9
    return _attend(scores, h, mask)


def coverage_attention_steps(s, h, w_s, w_h, w_c, v, mask=None):
    """Coverage attention over T decoder steps, and the coverage loss of the sequence.

    s:    (B, T, d_dec) the query of every step (s[:, t] is the state before output t)
    h:    (B, n, d_enc) encoder states
    w_s: (d_dec, d_att), w_h: (d_enc, d_att), w_c: (d_att,), v: (d_att,)
    mask: (B, n) bool, True = a real source word; None = all
    Returns (weights (B, T, n), loss (B,)): step t attends with the coverage of the steps
    before it (zero at the first step), and loss is ``coverage_loss`` of those weights.
    """
    s, h = np.asarray(s, dtype=np.float64), np.asarray(h, dtype=np.float64)
    coverage = np.zeros(h.shape[:-1])  # (B, n), c_1 = 0
    steps = []
    for t in range(s.shape[1]):
        _, weights = coverage_context(s[:, t], h, coverage, w_s, w_h, w_c, v, mask)  # (B, n)
        steps.append(weights)
        coverage = coverage + weights  # c_{t+1} = c_t + a_t
    weights = np.stack(steps, axis=1)  # (B, T, n)
    return weights, coverage_loss(weights)  # (B, T, n), (B,)
