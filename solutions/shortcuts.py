"""Shortcut baselines for the pronoun sentences of ``solutions.zh_en`` (chapter 6).

Each baseline is fitted on training pairs and returns
``predict(pairs) -> list of ints``: for every pair with a pronoun (``pronoun >= 0``), in
order, the index of the candidate it names as the antecedent (0 = the first mentioned).
``accuracy(predict, pairs)`` scores it against ``pair.antecedent``. They are the cheap
rules a model could use instead of reading the sentence in order:

- ``mention_baseline``: always the candidate mentioned k-th, k the most frequent answer
  in training (a first- or second-mention rule);
- ``length_baseline``: the most frequent answer for each sentence length;
- ``position_baseline``: the most frequent answer for each (length, pronoun position,
  candidate positions);
- ``marker_table_baseline``: the most frequent answer for each (被 present, last word) —
  on a grammar with one event, where the last word is the predicate, this 8-entry table
  resolves every 它;
- ``marker_position_baseline``: the same with the index of 被 in place of its presence:
  a rule that reads one position, so it sees some of the order;
- ``bag_of_words_baseline``: per candidate word, add-one log-odds of being meant
  alongside each other word of the sentence (it names a word, not a position);
- ``ngram_logistic_baseline``: logistic regression on the sentence's 1- and 2-grams and,
  with ``pairs=True``, on every product of two of them;
- ``pooled_ngram_mlp_baseline``: an MLP on the mean of learned 1- and 2-gram embeddings;
- ``gru_baseline``: a bidirectional GRU over the words, no attention, its two final
  states into a linear layer.

Three more read exactly what the twins leave out, three words in a row or a position
with the predicate, and show what decides 它 on the combination split: the word before
"， 所以" (the last event's last word: an animal after an active event, its verb after a
passive one) together with the predicate.

- ``pronoun_context_baseline``: the most frequent answer for each (3 words before the
  pronoun, word after it): for 它, the 3-gram "X ， 所以" and the predicate;
- ``position_predicate_baseline``: ``position_baseline``'s key with the last word (the
  predicate of a 它 sentence) added;
- ``cnn_baseline``: a convolution of width 3 over the word embeddings, max-pooled over
  the sentence, then an MLP: a function of the set of 3-grams.

The trained ones (the logistic regressions, the MLP, the GRU, the CNN) use Adam through
``solutions.training.train_loop`` (seeded, one thread, deterministic); all of them see
only the Chinese source. Every one but ``marker_position_baseline``,
``position_baseline``, ``gru_baseline`` and the three above is blind to the order of the
words beyond two neighbours (a function of the bag of 1- and 2-grams, or of the length),
so on a set closed under ``solutions.zh_en.twins`` it is right on at most half of the 它
sentences.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import torch
from torch import nn

from solutions.training import train_loop
from solutions.zh_en import SOURCE_VOCAB

__all__ = [
    "accuracy",
    "mention_baseline",
    "length_baseline",
    "position_baseline",
    "marker_table_baseline",
    "marker_position_baseline",
    "bag_of_words_baseline",
    "ngram_logistic_baseline",
    "pooled_ngram_mlp_baseline",
    "gru_baseline",
    "pronoun_context_baseline",
    "position_predicate_baseline",
    "cnn_baseline",
]


def _resolution(pairs):
    return [p for p in pairs if p.pronoun >= 0]


def accuracy(predict, pairs) -> float:
    """The fraction of the pronoun pairs of ``pairs`` whose antecedent ``predict``
    names."""
    truth = [p.antecedent for p in _resolution(pairs)]
    if not truth:
        raise ValueError("expected at least one pair with a pronoun to score")
    return float(np.mean(np.equal(predict(pairs), truth)))


def _table_baseline(key):
    """Majority answer per ``key(pair)`` in training; an unseen key: the overall
    majority."""

    def fit(train_pairs):
        votes: dict[object, Counter] = defaultdict(Counter)
        overall = Counter()
        for p in _resolution(train_pairs):
            votes[key(p)][p.antecedent] += 1
            overall[p.antecedent] += 1
        default = min(overall, key=lambda a: (-overall[a], a)) if overall else 0

        def predict(pairs):
            out = []
            for p in _resolution(pairs):
                v = votes.get(key(p))
                out.append(min(v, key=lambda a: (-v[a], a)) if v else default)
            return out

        return predict

    return fit


mention_baseline = _table_baseline(lambda p: None)
mention_baseline.__doc__ = (
    "Always the k-th mentioned candidate, k the commonest answer in training."
)
length_baseline = _table_baseline(lambda p: len(p.source))
length_baseline.__doc__ = "The commonest answer in training for each sentence length."
position_baseline = _table_baseline(lambda p: (len(p.source), p.pronoun, p.candidates))
position_baseline.__doc__ = (
    "The commonest answer in training for each (length, pronoun index, "
    "candidate indices)."
)
marker_table_baseline = _table_baseline(lambda p: ("被" in p.source, p.source[-1]))
marker_table_baseline.__doc__ = (
    "The commonest answer in training for each (被 present, last word)."
)
marker_position_baseline = _table_baseline(
    lambda p: (p.source.index("被") if "被" in p.source else -1, p.source[-1])
)
marker_position_baseline.__doc__ = (
    "The commonest answer in training for each (index of 被 or -1, last word): "
    "it reads a position."
)


position_predicate_baseline = _table_baseline(
    lambda p: (len(p.source), p.pronoun, p.candidates, p.source[-1])
)
position_predicate_baseline.__doc__ = (
    "The commonest answer in training for each (length, pronoun index, candidate "
    "indices, last word): the positions tell whether an animal or a verb ends the last "
    "event, the last word of a 它 sentence is its predicate."
)


def pronoun_context_baseline(train_pairs, before=3, after=1):
    """The commonest answer in training for each window around the pronoun: the
    ``before`` words before it and the ``after`` words after it (an unseen window: the
    overall commonest answer).

    For 它 with the defaults the window is "X ， 所以 它 P": the 3-gram that ends in
    所以, whose first word X ends the last event (its second animal after an active
    event, its verb after a passive one), and the predicate P. Both are 3-grams of the
    sentence ("X ， 所以" and "所以 它 P"), which the twins do not keep: the bag twin
    swaps the two events, so X changes.
    """

    def window(p):
        return tuple(p.source[max(p.pronoun - before, 0) : p.pronoun + 1 + after])

    return _table_baseline(window)(train_pairs)


def bag_of_words_baseline(train_pairs, bigrams=False):
    """A resolver that sees only the multiset of source words (with ``bigrams=True``, of
    1- and 2-grams), fitted on ``train_pairs``.

    For every (candidate word, feature of the sentence) it counts how often the
    candidate was the antecedent and how often not; a sentence's candidate scores the
    sum of the add-one log-odds over the sentence's features, and the highest score wins
    (ties: the candidate whose word sorts first, a rule blind to order). It names a
    word, not a mention: on 他/她 with ``bigrams=True`` the feature "， 他" tells it
    that the man acted.
    """
    features = _ngrams if bigrams else set
    meant, other = Counter(), Counter()
    for p in _resolution(train_pairs):
        feats = features(p.source)
        for c, i in enumerate(p.candidates):
            table = meant if c == p.antecedent else other
            for f in feats:
                table[p.source[i], f] += 1

    def score(p, i, feats):
        word = p.source[i]
        return sum(np.log((meant[word, f] + 1) / (other[word, f] + 1)) for f in feats)

    def predict(pairs):
        out = []
        for p in _resolution(pairs):
            feats = features(p.source)
            scored = [
                (-score(p, i, feats), p.source[i], c)
                for c, i in enumerate(p.candidates)
            ]
            out.append(min(scored)[2])
        return out

    return predict


# --------------------------------------------------------------------------------------
# trained baselines: 1-2-gram features, pooled embeddings, a recurrent network


def _ngrams(words):
    return sorted(set(words) | {(a, b) for a, b in zip(words, words[1:])}, key=str)


def _class_count(pairs):
    return max(len(p.candidates) for p in pairs)


def _targets_and_mask(pairs, classes):
    """(P,) antecedent indices and a (P, classes) mask of the candidates each pair
    has."""
    y = torch.tensor([p.antecedent for p in pairs])
    has = torch.tensor([[c < len(p.candidates) for c in range(classes)] for p in pairs])
    return y, has


class _Bags(nn.Module):
    """Logistic regression (``hidden = 0``: a weight per feature and class, summed over
    the sentence's features) or pooled embeddings (the mean of the features'
    ``hidden``-wide embeddings, then an MLP). Input: (B, K) feature ids, padded with
    ``n_features`` (a row of zeros that is never trained) and the (B,) feature
    counts."""

    def __init__(self, n_features, classes, hidden):
        super().__init__()
        width = hidden or classes
        self.table = nn.Embedding(n_features + 1, width, padding_idx=n_features)
        if not hidden:
            nn.init.zeros_(self.table.weight)
        self.bias = nn.Parameter(torch.zeros(width))
        self.hidden = hidden
        self.head = (
            nn.Sequential(
                nn.ReLU(),
                nn.Linear(hidden, hidden),
                nn.ReLU(),
                nn.Linear(hidden, classes),
            )
            if hidden
            else nn.Identity()
        )

    def forward(self, ids, counts):
        pooled = self.table(ids).sum(1)  # (B, width)
        if self.hidden:
            pooled = pooled / counts[:, None]
        return self.head(pooled + self.bias)


def _bag_baseline(train_pairs, features, hidden, steps, lr, l2, seed):
    """Train ``_Bags`` full-batch on the training pairs' feature lists; unseen features
    -> 0."""
    train = _resolution(train_pairs)
    classes = _class_count(train)
    index: dict = {}
    train_feats = [features(p.source) for p in train]
    for feats in train_feats:
        for f in feats:
            index.setdefault(f, len(index))
    pad = len(index)

    def encode(feature_lists):
        known = [[index[f] for f in feats if f in index] for feats in feature_lists]
        ids = torch.full((len(known), max(map(len, known))), pad, dtype=torch.long)
        for r, row in enumerate(known):
            ids[r, : len(row)] = torch.tensor(row, dtype=torch.long)
        # the mean pools over all the sentence's features; unseen ones add zero
        return ids, torch.tensor(
            [max(len(f), 1) for f in feature_lists], dtype=torch.float32
        )

    ids, counts = encode(train_feats)
    y, has = _targets_and_mask(train, classes)

    def batch_loss(model, step):  # full batch: every training sentence at every step
        logits = model(ids, counts).masked_fill(~has, -1e9)
        return (
            nn.functional.cross_entropy(logits, y) + l2 * (model.table.weight**2).sum()
        )

    model, _ = train_loop(
        lambda: _Bags(pad, classes, hidden), batch_loss, steps=steps, seed=seed, lr=lr
    )

    @torch.no_grad()
    def predict(pairs):
        pairs = _resolution(pairs)
        logits = model(*encode([features(p.source) for p in pairs]))
        _, mask = _targets_and_mask(pairs, classes)
        return logits.masked_fill(~mask, -1e9).argmax(-1).tolist()

    return predict


def _with_products(words):
    grams = _ngrams(words)
    return grams + [(a, b) for i, a in enumerate(grams) for b in grams[i + 1 :]]


def ngram_logistic_baseline(
    train_pairs, pairs=True, steps=100, lr=0.3, l2=1e-5, seed=0
):
    """Multinomial logistic regression over the candidates (the k-th mentioned, k = 0,
    1, ...) on binary features: every 1- and 2-gram of the source and, with
    ``pairs=True``, every product of two of them (a feature pair that occurs together).
    Fitted full-batch with Adam (``steps``, ``lr``) and an L2 penalty ``l2``; a feature
    never seen in training weighs nothing."""
    features = _with_products if pairs else _ngrams
    return _bag_baseline(train_pairs, features, 0, steps, lr, l2, seed)


def pooled_ngram_mlp_baseline(
    train_pairs, hidden=64, steps=200, lr=0.01, l2=1e-6, seed=0
):
    """An MLP on the mean of learned ``hidden``-wide embeddings of the source's 1- and
    2-grams (two ReLU layers), a softmax over the candidates; fitted as
    ``ngram_logistic_baseline``."""
    return _bag_baseline(train_pairs, _ngrams, hidden, steps, lr, l2, seed)


def _encode_words(pairs, min_length=1):
    """(B, n) source ids, padded with 0, n at least ``min_length``; (B,) lengths."""
    lengths = torch.tensor([len(p.source) for p in pairs])
    src = torch.zeros(len(pairs), max(int(lengths.max()), min_length), dtype=torch.long)
    for i, p in enumerate(pairs):
        src[i, : len(p.source)] = torch.tensor(SOURCE_VOCAB.encode(p.source))
    return src, lengths


class _BiGRU(nn.Module):
    def __init__(self, vocab, width, classes):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.gru = nn.GRU(width, width, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * width, classes)

    def forward(self, src, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(
            self.embed(src), lengths, batch_first=True, enforce_sorted=False
        )
        _, last = self.gru(
            packed
        )  # (2, B, width): the forward and the backward final states
        return self.out(torch.cat([last[0], last[1]], dim=-1))


def gru_baseline(train_pairs, width=32, steps=300, batch_size=64, lr=0.01, seed=0):
    """A bidirectional GRU (``width`` per direction) over the source words, no
    attention: the two final states, concatenated, go through a linear layer to a
    softmax over the candidates. Adam on minibatches of ``batch_size`` training pairs
    (drawn with a generator seeded by ``seed``), ``steps`` updates."""
    train = _resolution(train_pairs)
    classes = _class_count(train)
    src, lengths = _encode_words(train)
    y, has = _targets_and_mask(train, classes)
    rows = np.random.default_rng(seed).integers(len(train), size=(steps, batch_size))

    def batch_loss(model, step):
        b = torch.from_numpy(rows[step])
        logits = model(src[b], lengths[b]).masked_fill(~has[b], -1e9)
        return nn.functional.cross_entropy(logits, y[b])

    model, _ = train_loop(
        lambda: _BiGRU(len(SOURCE_VOCAB), width, classes),
        batch_loss,
        steps=steps,
        seed=seed,
        lr=lr,
    )

    @torch.no_grad()
    def predict(pairs):
        pairs = _resolution(pairs)
        _, mask = _targets_and_mask(pairs, classes)
        return model(*_encode_words(pairs)).masked_fill(~mask, -1e9).argmax(-1).tolist()

    return predict


class _WindowCNN(nn.Module):
    """Word embeddings, one convolution of width ``kernel`` (no padding: each output
    reads ``kernel`` words in a row), ReLU, the maximum over the sentence's windows,
    then an MLP to the candidates: a function of the set of ``kernel``-grams."""

    def __init__(self, vocab, width, channels, classes, kernel):
        super().__init__()
        self.kernel = kernel
        self.embed = nn.Embedding(vocab, width)
        self.conv = nn.Conv1d(width, channels, kernel)
        self.head = nn.Sequential(
            nn.Linear(channels, channels), nn.ReLU(), nn.Linear(channels, classes)
        )

    def forward(self, src, lengths):
        x = self.embed(src).transpose(1, 2)  # (B, width, n)
        windows = torch.relu(self.conv(x))  # (B, C, n - kernel + 1)
        # windows that run into the padding after a short sentence are not read
        real = torch.arange(windows.shape[-1]) < (lengths[:, None] - self.kernel + 1)
        pooled = windows.masked_fill(~real[:, None, :], -torch.inf).amax(-1)  # (B, C)
        return self.head(pooled)


def cnn_baseline(
    train_pairs,
    width=32,
    channels=64,
    kernel=3,
    steps=300,
    batch_size=64,
    lr=0.01,
    seed=0,
):
    """A convolutional network of width ``kernel`` over the source words, no attention
    and no recurrence: ``channels`` filters over ``kernel`` words in a row, max-pooled
    over the sentence, an MLP to a softmax over the candidates. It sees which
    ``kernel``-grams occur, not where. Adam on minibatches of ``batch_size`` training
    pairs (drawn with a generator seeded by ``seed``), ``steps`` updates."""
    train = _resolution(train_pairs)
    classes = _class_count(train)
    if min(len(p.source) for p in train) < kernel:
        raise ValueError(f"expected sentences of at least {kernel} words")
    src, lengths = _encode_words(train, kernel)
    y, has = _targets_and_mask(train, classes)
    rows = np.random.default_rng(seed).integers(len(train), size=(steps, batch_size))

    def batch_loss(model, step):
        b = torch.from_numpy(rows[step])
        logits = model(src[b], lengths[b]).masked_fill(~has[b], -1e9)
        return nn.functional.cross_entropy(logits, y[b])

    model, _ = train_loop(
        lambda: _WindowCNN(len(SOURCE_VOCAB), width, channels, classes, kernel),
        batch_loss,
        steps=steps,
        seed=seed,
        lr=lr,
    )

    @torch.no_grad()
    def predict(pairs):
        pairs = _resolution(pairs)
        _, mask = _targets_and_mask(pairs, classes)
        logits = model(*_encode_words(pairs, kernel))
        return logits.masked_fill(~mask, -1e9).argmax(-1).tolist()

    return predict
