"""Reference implementations for *Attention, derived*.

One module per chapter; everything the book shows and the grader compares against:

- ``pooling``: average/max pooling, Nadaraya-Watson kernel regression, bandwidth fitting.
- ``soft_hard``: softmax and masked softmax, scoring functions, soft and hard attention,
  REINFORCE and Gumbel-softmax.
- ``seq2seq``: an encoder-decoder with Bahdanau or Luong attention on a synthetic task.
- ``self_attention``: self-attention, masks, positional encodings, online-softmax attention.
- ``multihead``: head splitting, multi-head attention, a Transformer encoder block.
"""
