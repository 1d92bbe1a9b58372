"""Reference implementations for *Attention, derived*.

One module per chapter; everything the book shows and the grader compares against:

- ``pooling``: average/max pooling, Nadaraya-Watson kernel regression, bandwidth
  fitting.
- ``soft_hard``: score functions, soft and hard attention, REINFORCE and
  Gumbel-softmax; it re-exports the chapter's PyTorch models from ``soft_hard_models``.
- ``seq2seq``: an encoder-decoder with Bahdanau or Luong attention on a synthetic task,
  and Luong's local attention.
- ``self_attention``: self-attention, masks, positional encodings, online-softmax
  attention.
- ``multihead``: head splitting, multi-head attention, a Transformer encoder block.
- ``transformer``: the encoder-decoder (cross-attention, decoder mask, label smoothing,
  the warm-up schedule, greedy and beam-search decoding with a cache), trained on
  ``zh_en``, a generated Chinese-English task with pronouns to resolve; ``shortcuts``,
  the baselines that resolve them without reading the sentence in order (or with it).

Shared by all chapters (``docs/conventions.md``):

- ``conventions``: float conversion, shape and mask checks, the masked softmax (NumPy
  and torch), the cache blocking of the fast attention functions.
- ``fast_attention``: the plain references' fast twins (``fast_attention``,
  ``fast_online_softmax_attention``), cache-blocked and threaded, tested equal to them;
  what the benchmark and the timing figures call.
- ``training``: ``seeded`` and ``train_loop``, the one seeded training loop of every
  PyTorch model; trainers return ``(model, history)``.
"""
