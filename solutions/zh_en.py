"""A generated Chinese-English translation task (chapter 6, ``book/ch6_transformer.ipynb``).

What this file builds:

- A small grammar with three kinds of sentence pairs, tokenised into words:
  ``"reorder"``: time and place come before the verb in Chinese and after it in English
  (我 昨天 在 公园 看见了 一只 蝴蝶 -> I saw a butterfly in the park yesterday), so a
  translation has to read the source out of order;
  ``"it"``: two candidate nouns, then 它 ("it") and a predicate that fits only one of them
  (它 飞走了 "flew away": a flier; 它 很香 "smells sweet": a flower). The English side spells
  the antecedent out (... , the butterfly flew away), so translating 它 means resolving it;
  ``"he_she"``: two people, then 他 or 她; the pronoun's gender decides the antecedent.
  In both resolution kinds the antecedent is the first-mentioned candidate in about half of
  the sentences and the second in the other half: no rule on surface position resolves it.
- The lecture notes' own sentences (``NOTES_SENTENCES``): 知识就是力量 "knowledge is power"
  and 这只蝴蝶真漂亮，停在花朵上，我很喜欢它 with "it" spelled out.
- ``HELD_OUT``: combinations (object with place; antecedent with predicate) that never
  occur in training; the test split is made of sentences that contain one, so held-out
  accuracy measures generalisation to new combinations of known words.
- ``make_pairs`` samples pairs; ``Vocab`` maps words to ids (0 = pad, 1 = bos, 2 = eos);
  ``encode_batch`` makes padded id tensors.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "PAD",
    "BOS",
    "EOS",
    "KINDS",
    "NOTES_SENTENCES",
    "HELD_OUT",
    "Pair",
    "Vocab",
    "SOURCE_VOCAB",
    "TARGET_VOCAB",
    "make_pairs",
    "encode_batch",
]

PAD, BOS, EOS = 0, 1, 2
_SPECIALS = ["<pad>", "<bos>", "<eos>"]
KINDS = ("reorder", "it", "he_she")

# ----------------------------------------------------------------------------------------
# the lexicon: Chinese word -> English words

SUBJECTS = {
    "我": "I",
    "你": "you",
    "我们": "we",
    "他们": "they",
    "小明": "Xiaoming",
    "小红": "Xiaohong",
    "爸爸": "dad",
    "妈妈": "mum",
}
TIMES = {
    "昨天": "yesterday",
    "今天": "today",
    "上周": "last week",
    "早上": "in the morning",
    "晚上": "in the evening",
    "去年": "last year",
}
PLACES = {
    "公园": "in the park",
    "花园": "in the garden",
    "学校": "at school",
    "河边": "by the river",
    "山上": "on the mountain",
    "家": "at home",
}
VERBS = {"看见了": "saw", "画了": "drew", "拍了": "photographed", "找到了": "found", "喂了": "fed"}
# noun -> (English, measure word, category); the category decides which predicates fit
NOUNS = {
    "蝴蝶": ("butterfly", "只", "flier"),
    "鸟": ("bird", "只", "flier"),
    "蜜蜂": ("bee", "只", "flier"),
    "猫": ("cat", "只", "runner"),
    "狗": ("dog", "只", "runner"),
    "兔子": ("rabbit", "只", "runner"),
    "花朵": ("flower", "朵", "plant"),
    "玫瑰": ("rose", "朵", "plant"),
    "百合": ("lily", "朵", "plant"),
}
PREDICATES = {  # category -> {Chinese predicate: English predicate}
    "flier": {"飞走了": "flew away", "飞得很高": "flies high"},
    "runner": {"跑走了": "ran away", "睡着了": "fell asleep"},
    "plant": {"很香": "smells sweet", "开了": "has bloomed"},
}
PEOPLE = {
    "小明": ("Xiaoming", "他"),
    "爸爸": ("dad", "他"),
    "哥哥": ("my brother", "他"),
    "小红": ("Xiaohong", "她"),
    "妈妈": ("mum", "她"),
    "姐姐": ("my sister", "她"),
}
PEOPLE_PREDICATES = {"很高兴": "is happy", "很累": "is tired", "在唱歌": "is singing"}

NOTES_SENTENCES = [
    ("知识 就是 力量", "knowledge is power"),
    ("时间 就是 金钱", "time is money"),
    (
        "这只 蝴蝶 真 漂亮 ， 停在 花朵 上 ， 我 很 喜欢 它",
        "this butterfly is really beautiful , it landed on the flower , "
        "I like the butterfly very much",
    ),
]


def _held_out() -> dict[str, frozenset]:
    """Combinations that never occur in training (about one in five of each kind)."""
    nouns, places = list(NOUNS), list(PLACES)
    obj_place = {
        (n, p)
        for (i, n), (j, p) in itertools.product(enumerate(nouns), enumerate(places))
        if (i + 2 * j) % 5 == 0
    }
    # every noun keeps one of its two predicates in training; a third of the nouns lose the other
    noun_pred = set()
    for i, noun in enumerate(nouns):
        if i % 3 == 0:
            preds = list(PREDICATES[NOUNS[noun][2]])
            noun_pred.add((noun, preds[(i // 3) % 2]))
    people_pred = {
        (p, q)
        for (i, p), (j, q) in itertools.product(enumerate(PEOPLE), enumerate(PEOPLE_PREDICATES))
        if (i + j) % 4 == 0
    }
    return {
        "reorder": frozenset(obj_place),
        "it": frozenset(noun_pred),
        "he_she": frozenset(people_pred),
    }


HELD_OUT = _held_out()


@dataclass
class Pair:
    """One sentence pair. ``source``/``target`` are word lists (no specials).

    For the resolution kinds: ``pronoun`` is the index of 它/他/她 in ``source``,
    ``candidates`` the source indices of the two candidates (in order of mention),
    ``antecedent`` 0 or 1 (which candidate is meant) and ``answer`` the index in ``target``
    of the word that names the antecedent (butterfly; brother in "my brother"); -1 where
    not applicable.
    ``combination`` is the pair of words that decides the split (see ``HELD_OUT``).
    """

    kind: str
    source: list[str]
    target: list[str]
    combination: tuple[str, str] | None = None
    pronoun: int = -1
    candidates: tuple[int, int] = (-1, -1)
    antecedent: int = -1
    answer: int = -1


def _pick(rng, options):
    return options[rng.integers(len(options))]


def _reorder(rng) -> Pair:
    subj, verb, noun = _pick(rng, list(SUBJECTS)), _pick(rng, list(VERBS)), _pick(rng, list(NOUNS))
    time = _pick(rng, list(TIMES)) if rng.random() < 0.8 else None
    place = _pick(rng, list(PLACES)) if rng.random() < 0.8 else None
    english, measure, _ = NOUNS[noun]
    source = [subj] + ([time] if time else []) + (["在", place] if place else [])
    source += [verb, "一" + measure, noun]
    target = [SUBJECTS[subj], VERBS[verb], "a", english]
    target += PLACES[place].split() if place else []
    target += TIMES[time].split() if time else []
    return Pair("reorder", source, target, combination=(noun, place) if place else None)


def _it(rng) -> Pair:
    categories = list(PREDICATES)
    c1, c2 = rng.choice(len(categories), size=2, replace=False)
    n1 = _pick(rng, [n for n in NOUNS if NOUNS[n][2] == categories[c1]])
    n2 = _pick(rng, [n for n in NOUNS if NOUNS[n][2] == categories[c2]])
    which = int(rng.integers(2))
    meant = (n1, n2)[which]
    pred = _pick(rng, list(PREDICATES[NOUNS[meant][2]]))
    e1, e2, em = NOUNS[n1][0], NOUNS[n2][0], NOUNS[meant][0]
    if rng.random() < 0.5:  # 我 看见了 N1 和 N2 ， 它 P
        subj = _pick(rng, list(SUBJECTS))
        source = [subj, "看见了", n1, "和", n2, "，", "它", pred]
        cand = (2, 4)
        target = [SUBJECTS[subj], "saw", "the", e1, "and", "the", e2, ","]
    else:  # N1 在 N2 旁边 ， 它 P
        source = [n1, "在", n2, "旁边", "，", "它", pred]
        cand = (0, 2)
        target = ["the", e1, "is", "next", "to", "the", e2, ","]
    answer = len(target) + 1
    target += ["the", em] + PREDICATES[NOUNS[meant][2]][pred].split()
    return Pair(
        "it",
        source,
        target,
        combination=(meant, pred),
        pronoun=source.index("它"),
        candidates=cand,
        antecedent=which,
        answer=answer,
    )


def _he_she(rng) -> Pair:
    men = [p for p in PEOPLE if PEOPLE[p][1] == "他"]
    women = [p for p in PEOPLE if PEOPLE[p][1] == "她"]
    pair = [_pick(rng, men), _pick(rng, women)]
    if rng.random() < 0.5:
        pair.reverse()
    which = int(rng.integers(2))
    p1, p2 = pair
    meant = pair[which]
    pred = _pick(rng, list(PEOPLE_PREDICATES))
    place = _pick(rng, list(PLACES))
    source = [p1, "和", p2, "在", place, "，", PEOPLE[meant][1], pred]
    e1, e2 = PEOPLE[p1][0].split(), PEOPLE[p2][0].split()
    target = e1 + ["and"] + e2 + ["are"] + PLACES[place].split() + [","]
    answer = len(target) + len(PEOPLE[meant][0].split()) - 1  # "Xiaoming"; "my *brother*"
    target += PEOPLE[meant][0].split() + PEOPLE_PREDICATES[pred].split()
    return Pair(
        "he_she",
        source,
        target,
        combination=(meant, pred),
        pronoun=6,
        candidates=(0, 2),
        antecedent=which,
        answer=answer,
    )


_MAKERS = {"reorder": _reorder, "it": _it, "he_she": _he_she}


def make_pairs(
    n, seed, split="train", kinds=("reorder", "it", "he_she"), weights=None, notes_every=0
):
    """Sample ``n`` sentence pairs.

    split: ``"train"`` keeps only pairs whose ``combination`` is not held out;
    ``"test"`` only pairs whose combination IS held out (``HELD_OUT``), so every test
    sentence combines known words in a way never seen in training.
    kinds: which kinds to sample, with probabilities ``weights`` (default uniform).
    notes_every: in the training split, replace every k-th pair by one of the notes' own
    sentences (``NOTES_SENTENCES``) so the model learns them; 0 = never.
    Returns a list of ``Pair``. Deterministic given ``seed``.
    """
    if split not in ("train", "test"):
        raise ValueError(f"expected split 'train' or 'test', got {split!r}")
    unknown = [k for k in kinds if k not in _MAKERS]
    if unknown or not kinds:
        raise ValueError(f"expected kinds among {KINDS}, got {kinds!r}")
    if weights is None:
        weights = np.full(len(kinds), 1 / len(kinds))
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (len(kinds),) or (weights < 0).any() or not weights.sum() > 0:
        raise ValueError(f"expected {len(kinds)} non-negative weights, got {weights!r}")
    rng = np.random.default_rng(seed)
    pairs: list[Pair] = []
    while len(pairs) < n:
        if split == "train" and notes_every and len(pairs) % notes_every == notes_every - 1:
            zh, en = NOTES_SENTENCES[rng.integers(len(NOTES_SENTENCES))]
            pairs.append(Pair("notes", zh.split(), en.split()))
            continue
        kind = kinds[rng.choice(len(kinds), p=weights / weights.sum())]
        pair = _MAKERS[kind](rng)
        held = pair.combination is not None and pair.combination in HELD_OUT[kind]
        if held == (split == "test"):
            pairs.append(pair)
    return pairs


class Vocab:
    """Words <-> ids: 0 = <pad>, 1 = <bos>, 2 = <eos>, then the words in a fixed order."""

    def __init__(self, words):
        self.itos = _SPECIALS + sorted(set(words) - set(_SPECIALS))
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, words) -> list[int]:
        missing = [w for w in words if w not in self.stoi]
        if missing:
            raise KeyError(f"words not in the vocabulary: {missing}")
        return [self.stoi[w] for w in words]

    def decode(self, ids) -> list[str]:
        """Ids -> words, stopping at the first <eos> and skipping <bos>/<pad>."""
        words = []
        for i in ids:
            i = int(i)
            if i == EOS:
                break
            if i not in (PAD, BOS):
                words.append(self.itos[i])
        return words


def _all_words():
    zh = set(SUBJECTS) | set(TIMES) | set(PLACES) | set(VERBS) | set(NOUNS) | set(PEOPLE)
    zh |= {"在", "一只", "一朵", "和", "旁边", "，", "它", "他", "她", "看见了"}
    zh |= {w for preds in PREDICATES.values() for w in preds} | set(PEOPLE_PREDICATES)
    en = {"a", "the", "and", "is", "next", "to", "are", ",", "saw"}
    for phrase in itertools.chain(
        SUBJECTS.values(),
        TIMES.values(),
        PLACES.values(),
        VERBS.values(),
        PEOPLE_PREDICATES.values(),
        (v for preds in PREDICATES.values() for v in preds.values()),
        (e for e, _, _ in NOUNS.values()),
        (e for e, _ in PEOPLE.values()),
    ):
        en |= set(phrase.split())
    for source, target in NOTES_SENTENCES:
        zh |= set(source.split())
        en |= set(target.split())
    return zh, en


SOURCE_VOCAB, TARGET_VOCAB = (Vocab(words) for words in _all_words())


def encode_batch(pairs):
    """Padded id tensors for a list of ``Pair``.

    Returns ``(src, tgt)``: src int64 (B, n_src) = source words padded with <pad>;
    tgt int64 (B, n_tgt) = <bos> target words <eos>, padded with <pad>.
    """
    src = [SOURCE_VOCAB.encode(p.source) for p in pairs]
    tgt = [[BOS] + TARGET_VOCAB.encode(p.target) + [EOS] for p in pairs]
    src_t = torch.full((len(pairs), max(map(len, src))), PAD, dtype=torch.long)
    tgt_t = torch.full((len(pairs), max(map(len, tgt))), PAD, dtype=torch.long)
    for i, (s, t) in enumerate(zip(src, tgt)):
        src_t[i, : len(s)] = torch.tensor(s)
        tgt_t[i, : len(t)] = torch.tensor(t)
    return src_t, tgt_t
