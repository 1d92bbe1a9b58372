"""The answer key of assignment ch6_transformer: the steps the chapter leaves to the student.

The chapter builds the decoder's mask for one target sentence per row, eq. (ch6-decoder-mask),
and decodes from an empty cache. Two next steps it does not show:

- ``packed_decoder_mask``: several target sentences packed into one row (the padding a
  batch of short sentences wastes is filled with the next sentences), each row labelled by
  segment ids; a query sees the earlier words of its own sentence only.
- ``greedy_decode_cached``: greedy decoding that continues from a GIVEN key/value cache (a
  prompt cache of t0 earlier positions), with the chapter's scaled embeddings
  sqrt(d) e_y + p_t. An implementation that recomputes the prefix instead of reading the
  cache cannot reproduce a cache no token sequence gives.

Plain NumPy; the step itself is the chapter's ``solutions.transformer.decoder_step``.
"""

from __future__ import annotations

import math

import numpy as np

from solutions.transformer import decoder_step


def packed_decoder_mask(segment_ids):
    """The decoder's self-attention mask for packed target rows.

    segment_ids: (..., n) ints, one label per position: the sentence it belongs to
        (1, 2, ...), 0 = padding.
    Returns a boolean (..., n, n), True = may attend: query i sees key j iff j <= i
    (causal, eq. ch6-decoder-mask) and both are in the same non-zero segment; the row of a
    padding query is all False.
    """
    seg = np.asarray(segment_ids)
    n = seg.shape[-1]
    causal = np.arange(n)[None, :] <= np.arange(n)[:, None]  # (n, n): j <= i
    same = seg[..., :, None] == seg[..., None, :]  # (..., n, n): same segment
    real = (seg != 0)[..., :, None]  # (..., n, 1): the query is a word, not padding
    return causal & same & real  # (..., n, n)


def greedy_decode_cached(
    memory,
    embed,
    positions,
    w_out,
    self_attn,
    cross_attn,
    w_1,
    b_1,
    w_2,
    b_2,
    num_heads,
    start_id,
    max_len,
    cache_k,
    cache_v,
    src_mask=None,
):
    """Greedy decoding with a one-layer decoder, continuing from a given key/value cache.

    memory: (B, n_src, d) the encoder output; embed: (V, d) the target embeddings;
    positions: (>= t0 + max_len, d) position vectors; w_out: (d, V) the output layer;
    cache_k, cache_v: (B, t0, d) the keys and values of t0 earlier positions (t0 = 0: an
    empty cache); start_id: the token fed at the first step (position t0);
    the layer's weights, num_heads and src_mask as ``decoder_block``.
    Step t = 0 .. max_len - 1 feeds x = sqrt(d) embed[token] + positions[t0 + t]
    (token = start_id, then the word chosen at step t - 1) to ``decoder_step`` and picks
    argmax(y_t @ w_out).
    Returns (tokens (B, max_len) ints, cache_k (B, t0 + max_len, d), cache_v (same)).
    """
    embed = np.asarray(embed, dtype=float)
    positions = np.asarray(positions, dtype=float)
    cache_k = np.asarray(cache_k, dtype=float)  # (B, t0, d)
    cache_v = np.asarray(cache_v, dtype=float)
    batch, t0 = cache_k.shape[0], cache_k.shape[1]
    scale = math.sqrt(embed.shape[1])  # sqrt(d): the chapter's scaled embedding
    token = np.full(batch, start_id)  # (B,)
    chosen = []
    for t in range(max_len):
        x_t = (scale * embed[token] + positions[t0 + t])[:, None, :]  # (B, 1, d)
        y_t, cache_k, cache_v = decoder_step(
            x_t,
            cache_k,
            cache_v,
            memory,
            self_attn,
            cross_attn,
            w_1,
            b_1,
            w_2,
            b_2,
            num_heads,
            src_mask,
        )  # y_t (B, 1, d); caches (B, t0 + t + 1, d)
        token = (y_t[:, 0] @ w_out).argmax(-1)  # (B,)
        chosen.append(token)
    return np.stack(chosen, axis=1), cache_k, cache_v  # (B, max_len)
