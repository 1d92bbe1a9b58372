"""A generated Chinese-English translation task (chapter 6, ``book/ch6_transformer.ipynb``).

What this file builds:

- A small grammar with three kinds of sentence pairs, tokenised into words:
  ``"reorder"``: time and place come before the verb in Chinese and after it in English
  (我 昨天 在 公园 看见了 一只 蝴蝶 -> I saw a butterfly in the park yesterday), so a
  translation has to read the source out of order;
  ``"it"``: one animal acts on another (狗 追了 猫 "the dog chased the cat", or in the
  passive 猫 被 狗 追了 "the cat was chased by the dog"), then 它 ("it") and a predicate.
  Any predicate fits either animal; the predicate says which *role* is meant (the one
  that acted got tired or was pleased; the one acted on ran away or hid) and the voice
  (被 or not) says which mention has that role. The English side spells the antecedent
  out (... , the cat ran away), so translating 它 means resolving it. In one sentence in
  four the second clause names an animal instead of 它 (a predicate with no pronoun);
  ``"he_she"``: a man and a woman, then two pronouns: 他 帮了 她 "he helped her" vs 她 帮了
  他; which pronoun comes first decides who is the subject.
  Optional time and place words vary the sentence lengths, so no position is fixed.
- Minimal pairs: ``make_pairs(..., split="test")`` returns every resolution sentence with
  its *bag twin* (the same multiset of source words, the other answer: the two animals, or
  the two pronouns, swapped) and its *position twin* (the same length and candidate
  positions, the other candidate: the predicate's role, or the order of the two people,
  swapped), and the twin of both. On such a set every rule that sees only the bag of
  words, or only the positions, is right on exactly half: ``bag_of_words_baseline`` and
  ``position_baseline`` are two such rules, fitted on training sentences.
- The lecture notes' own sentences (``NOTES_SENTENCES``): 知识就是力量 "knowledge is power"
  and 这只蝴蝶真漂亮，停在花朵上，我很喜欢它 with "it" spelled out.
- ``HELD_OUT``: combinations (object with place; {animal, animal} with verb; {man,
  woman} with verb) that never occur in training; the test split is made of sentences
  that contain one, so held-out accuracy measures generalisation to new combinations of
  known words.
- ``wilcoxon_signed_rank``: the exact paired test for comparing two resolvers over seeds
  (chapter 6's one head against several).
- ``make_pairs`` samples pairs; ``Vocab`` maps words to ids (0 = pad, 1 = bos, 2 = eos);
  ``encode_batch`` makes padded id tensors.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter, defaultdict
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
    "twins",
    "encode_batch",
    "bag_of_words_baseline",
    "position_baseline",
    "wilcoxon_signed_rank",
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
# noun -> (English, measure word); the objects of the "reorder" sentences
NOUNS = {
    "蝴蝶": ("butterfly", "只"),
    "鸟": ("bird", "只"),
    "蜜蜂": ("bee", "只"),
    "猫": ("cat", "只"),
    "狗": ("dog", "只"),
    "兔子": ("rabbit", "只"),
    "花朵": ("flower", "朵"),
    "玫瑰": ("rose", "朵"),
    "百合": ("lily", "朵"),
}
# the "it" sentences: animal acts on animal; Chinese verb -> (active, passive participle)
ANIMALS = {
    "猫": "cat",
    "狗": "dog",
    "兔子": "rabbit",
    "老鼠": "mouse",
    "狐狸": "fox",
    "熊": "bear",
    "马": "horse",
    "羊": "sheep",
}
ACTIONS = {"追了": ("chased", "chased"), "咬了": ("bit", "bitten"), "推了": ("pushed", "pushed")}
# predicate -> (English, role): "agent" = the one that acted, "patient" = the one acted on
ROLE_PREDICATES = {
    "累了": ("got tired", "agent"),
    "很得意": ("was pleased", "agent"),
    "跑走了": ("ran away", "patient"),
    "躲起来了": ("hid", "patient"),
}
# the "he_she" sentences
PEOPLE = {
    "小明": ("Xiaoming", "他"),
    "小刚": ("Xiaogang", "他"),
    "爸爸": ("dad", "他"),
    "小红": ("Xiaohong", "她"),
    "小丽": ("Xiaoli", "她"),
    "妈妈": ("mum", "她"),
}
PEOPLE_VERBS = {"帮了": "helped", "谢了": "thanked", "叫了": "called", "等了": "waited for"}

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
    # {animal, animal} with an action: 28 pairs x 3 actions = 84 combinations, 17 held out
    animal_pairs = list(itertools.combinations(ANIMALS, 2))
    it = {
        (frozenset(pair), verb)
        for (i, pair), (j, verb) in itertools.product(enumerate(animal_pairs), enumerate(ACTIONS))
        if (i + 2 * j) % 5 == 0
    }
    men = [p for p in PEOPLE if PEOPLE[p][1] == "他"]
    women = [p for p in PEOPLE if PEOPLE[p][1] == "她"]
    # {man, woman} with a verb: 9 pairs x 4 verbs = 36 combinations, 9 held out
    he_she = {
        (frozenset((m, w)), verb)
        for (i, (m, w)), (j, verb) in itertools.product(
            enumerate(itertools.product(men, women)), enumerate(PEOPLE_VERBS)
        )
        if (i + j) % 4 == 0
    }
    return {"reorder": frozenset(obj_place), "it": frozenset(it), "he_she": frozenset(he_she)}


HELD_OUT = _held_out()


@dataclass
class Pair:
    """One sentence pair. ``source``/``target`` are word lists (no specials).

    For the resolution sentences: ``pronoun`` is the index of (the first) 它/他/她 in
    ``source``, ``candidates`` the source indices of the two candidates (in order of
    mention), ``antecedent`` 0 or 1 (which candidate is meant), ``answer`` the index in
    ``target`` of the word that names the antecedent, and ``choices`` the two English
    words that could stand there: (the antecedent's, the other candidate's). -1 / () where
    not applicable (an "it" sentence without a pronoun keeps ``candidates`` and ``answer``
    but has ``pronoun = -1``).
    ``combination`` is what decides the split (see ``HELD_OUT``); ``twin`` holds the
    choices that made the sentence (``twins`` flips them).
    """

    kind: str
    source: list[str]
    target: list[str]
    combination: tuple | None = None
    pronoun: int = -1
    candidates: tuple[int, int] = (-1, -1)
    antecedent: int = -1
    answer: int = -1
    choices: tuple[str, ...] = ()
    twin: dict = dataclasses.field(default_factory=dict, repr=False)


def _pick(rng, options):
    return options[rng.integers(len(options))]


def _reorder(rng) -> Pair:
    subj, verb, noun = _pick(rng, list(SUBJECTS)), _pick(rng, list(VERBS)), _pick(rng, list(NOUNS))
    time = _pick(rng, list(TIMES)) if rng.random() < 0.8 else None
    place = _pick(rng, list(PLACES)) if rng.random() < 0.8 else None
    english, measure = NOUNS[noun]
    source = [subj] + ([time] if time else []) + (["在", place] if place else [])
    source += [verb, "一" + measure, noun]
    target = [SUBJECTS[subj], VERBS[verb], "a", english]
    target += PLACES[place].split() if place else []
    target += TIMES[time].split() if time else []
    return Pair("reorder", source, target, combination=(noun, place) if place else None)


def _frame(time, place):
    """Optional time and place: (Chinese before the verb, English after the clause)."""
    zh_time = [time] if time else []
    zh_place = ["在", place] if place else []
    en = (PLACES[place].split() if place else []) + (TIMES[time].split() if time else [])
    return zh_time, zh_place, en


def _it_sentence(agent, patient, verb, passive, predicate, named, time, place) -> Pair:
    """named: None for 它, else the animal named in the second clause (no pronoun)."""
    zh_time, zh_place, en_frame = _frame(time, place)
    active_en, passive_en = ACTIONS[verb]
    if passive:  # 猫 被 狗 追了: the patient is mentioned first
        first, second = patient, agent
        source = zh_time + [patient] + zh_place + ["被", agent, verb]
        target = ["the", ANIMALS[patient], "was", *passive_en.split(), "by", "the", ANIMALS[agent]]
    else:
        first, second = agent, patient
        source = zh_time + [agent] + zh_place + [verb, patient]
        target = ["the", ANIMALS[agent], *active_en.split(), "the", ANIMALS[patient]]
    cand = (source.index(first), source.index(second))
    english, role = ROLE_PREDICATES[predicate]
    meant = named if named is not None else (agent if role == "agent" else patient)
    other = second if meant == first else first
    target += en_frame + [","]
    source += ["，", named if named is not None else "它", predicate]
    answer = len(target) + 1
    target += ["the", ANIMALS[meant], *english.split()]
    return Pair(
        "it",
        source,
        target,
        combination=(frozenset((agent, patient)), verb),
        pronoun=-1 if named is not None else source.index("它"),
        candidates=cand,
        antecedent=int(meant == second),
        answer=answer,
        choices=(ANIMALS[meant], ANIMALS[other]),
        twin=dict(
            agent=agent,
            patient=patient,
            verb=verb,
            passive=passive,
            predicate=predicate,
            named=named,
            time=time,
            place=place,
        ),
    )


def _it(rng) -> Pair:
    agent, patient = (list(ANIMALS)[i] for i in rng.choice(len(ANIMALS), 2, replace=False))
    named = None
    if rng.random() < 0.25:  # a predicate with no pronoun: either animal may be named
        named = (agent, patient)[rng.integers(2)]
    return _it_sentence(
        agent,
        patient,
        _pick(rng, list(ACTIONS)),
        bool(rng.random() < 0.5),
        _pick(rng, list(ROLE_PREDICATES)),
        named,
        _pick(rng, list(TIMES)) if rng.random() < 0.5 else None,
        _pick(rng, list(PLACES)) if rng.random() < 0.5 else None,
    )


def _he_she_sentence(first, second, subject, verb, time, place) -> Pair:
    """first, second: the people in order of mention; subject: the one who acts."""
    zh_time, zh_place, en_frame = _frame(time, place)
    obj = second if subject == first else first
    source = zh_time + [first, "和", second] + zh_place + ["见面了", "，"]
    source += [PEOPLE[subject][1], verb, PEOPLE[obj][1]]
    target = [PEOPLE[first][0], "and", PEOPLE[second][0], "met"] + en_frame + [","]
    answer = len(target)
    target += [PEOPLE[subject][0], *PEOPLE_VERBS[verb].split(), PEOPLE[obj][0]]
    return Pair(
        "he_she",
        source,
        target,
        combination=(frozenset((first, second)), verb),
        pronoun=len(source) - 3,
        candidates=(source.index(first), source.index(second)),
        antecedent=int(subject == second),
        answer=answer,
        choices=(PEOPLE[subject][0], PEOPLE[obj][0]),
        twin=dict(first=first, second=second, subject=subject, verb=verb, time=time, place=place),
    )


def _he_she(rng) -> Pair:
    men = [p for p in PEOPLE if PEOPLE[p][1] == "他"]
    women = [p for p in PEOPLE if PEOPLE[p][1] == "她"]
    pair = [_pick(rng, men), _pick(rng, women)]
    if rng.random() < 0.5:
        pair.reverse()
    return _he_she_sentence(
        pair[0],
        pair[1],
        pair[int(rng.integers(2))],
        _pick(rng, list(PEOPLE_VERBS)),
        _pick(rng, list(TIMES)) if rng.random() < 0.5 else None,
        _pick(rng, list(PLACES)) if rng.random() < 0.5 else None,
    )


_MAKERS = {"reorder": _reorder, "it": _it, "he_she": _he_she}
_FLIPPED_ROLE = {"agent": "patient", "patient": "agent"}


def twins(pair: Pair) -> tuple[Pair, Pair, Pair]:
    """The minimal-pair twins of a resolution sentence: (bag twin, position twin, both).

    Bag twin: the same multiset of source words with the other answer (the two animals
    swap roles; the two pronouns swap places). Position twin: the same length, pronoun and
    candidate positions with the other candidate meant (the predicate of the other role;
    the two people swap order of mention). For an "it" sentence without a pronoun the
    twins swap the animals and, for the position twin, the named animal.
    """
    t = pair.twin
    if pair.kind == "it":
        args = dict(t)
        bag = {**args, "agent": t["patient"], "patient": t["agent"]}
        role = ROLE_PREDICATES[t["predicate"]][1]
        same_slot = [p for p in ROLE_PREDICATES if ROLE_PREDICATES[p][1] == _FLIPPED_ROLE[role]]
        other_pred = same_slot[list(ROLE_PREDICATES).index(t["predicate"]) % 2]
        position = {**args, "predicate": other_pred}
        if t["named"] is not None:  # no pronoun: name the other animal instead
            position["named"] = t["patient"] if t["named"] == t["agent"] else t["agent"]
        both = {**bag, "predicate": position["predicate"], "named": position["named"]}
        return tuple(_it_sentence(**a) for a in (bag, position, both))
    if pair.kind == "he_she":
        other = t["second"] if t["subject"] == t["first"] else t["first"]
        bag = {**t, "subject": other}
        position = {**t, "first": t["second"], "second": t["first"]}
        both = {**position, "subject": other}
        return tuple(_he_she_sentence(**a) for a in (bag, position, both))
    raise ValueError(f"only 'it' and 'he_she' sentences have twins, got a {pair.kind!r} sentence")


def make_pairs(
    n, seed, split="train", kinds=("reorder", "it", "he_she"), weights=None, notes_every=0
):
    """Sample ``n`` sentence pairs.

    split: ``"train"`` keeps only pairs whose ``combination`` is not held out;
    ``"test"`` only pairs whose combination IS held out (``HELD_OUT``), so every test
    sentence combines known words in a way never seen in training. In the test split each
    sampled "it" or "he_she" sentence comes with its three ``twins`` (four sentences in a
    row; the list is cut at ``n``), so no bag-of-words or position rule beats one half.
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
            if split == "test" and kind != "reorder":
                pairs.extend(twins(pair))  # twins keep the combination: held out too
    return pairs[:n]


# ----------------------------------------------------------------------------------------
# baselines: rules that see only the bag of words, or only the positions


def _resolution(pairs):
    return [p for p in pairs if p.pronoun >= 0]


def bag_of_words_baseline(train_pairs):
    """A pronoun resolver that sees only the multiset of source words, fitted on ``train_pairs``.

    For every (candidate word, other source word) it counts how often the candidate was
    the antecedent and how often not; a sentence's candidate scores the sum of the
    add-one log-odds over the sentence's words, and the higher score wins (ties: the
    candidate whose word sorts first, a rule blind to order). Returns
    ``predict(pairs) -> list of 0/1`` (candidate index per resolution pair, in order).
    On the old grammar, where {noun, noun, predicate} fixed the answer, such a rule was
    right every time; on a set closed under ``twins`` any bag rule is right on half.
    """
    meant, other = Counter(), Counter()
    for p in _resolution(train_pairs):
        words = Counter(p.source)
        for c in (0, 1):
            word = p.source[p.candidates[c]]
            table = meant if c == p.antecedent else other
            for w in words:
                table[word, w] += 1

    def score(p, c):
        word = p.source[p.candidates[c]]
        return sum(np.log((meant[word, w] + 1) / (other[word, w] + 1)) for w in set(p.source))

    def predict(pairs):
        out = []
        for p in _resolution(pairs):
            s0, s1 = score(p, 0), score(p, 1)
            w0, w1 = (p.source[i] for i in p.candidates)
            out.append(int(s1 > s0 or (s1 == s0 and w1 < w0)))
        return out

    return predict


def position_baseline(train_pairs):
    """A pronoun resolver that sees only positions, fitted on ``train_pairs``.

    Key: (kind, sentence length, pronoun index, candidate indices); prediction: the
    candidate (0 = first mentioned) that was the antecedent more often under that key in
    training (unseen key or tie: the first mentioned). Returns ``predict(pairs)`` as
    ``bag_of_words_baseline``.
    """
    votes: dict[tuple, Counter] = defaultdict(Counter)
    for p in _resolution(train_pairs):
        votes[p.kind, len(p.source), p.pronoun, p.candidates][p.antecedent] += 1

    def predict(pairs):
        out = []
        for p in _resolution(pairs):
            v = votes.get((p.kind, len(p.source), p.pronoun, p.candidates), Counter())
            out.append(int(v[1] > v[0]))
        return out

    return predict


def wilcoxon_signed_rank(a, b, alternative="greater"):
    """Exact Wilcoxon signed-rank test of paired samples ``a``, ``b`` (e.g. one score per seed).

    The differences ``a - b`` that are zero are dropped; the others are ranked by absolute
    value (ties share their mean rank) and ``w`` is the sum of the ranks of the positive
    ones. Under the null hypothesis (each difference as likely positive as negative) every
    one of the ``2**n`` sign patterns over those ranks is equally likely; the p-value counts
    them, so it is exact for small ``n`` and with ties. alternative: ``"greater"`` (a > b),
    ``"less"`` or ``"two-sided"`` (twice the smaller tail, at most 1).
    Returns ``(w, p)``; with no non-zero difference, ``(0.0, 1.0)``.
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 1 or a.shape != b.shape or np.isnan(a).any() or np.isnan(b).any():
        raise ValueError(
            f"expected two paired 1-d samples of one length without NaN, got {a!r}, {b!r}"
        )
    d = a - b
    if alternative not in ("greater", "less", "two-sided"):
        raise ValueError(f"expected 'greater', 'less' or 'two-sided', got {alternative!r}")
    d = d[d != 0]
    if len(d) > 20:
        raise ValueError(f"the exact test enumerates 2**n sign patterns; n = {len(d)} > 20")
    if len(d) == 0:
        return 0.0, 1.0
    order = np.abs(d)
    ranks = np.array([(order < x).sum() + ((order == x).sum() + 1) / 2 for x in order])
    w = float(ranks[d > 0].sum())
    signs = np.array(list(itertools.product((0, 1), repeat=len(d))))  # (2**n, n)
    null = signs @ ranks  # W+ under every sign pattern
    greater, less = np.mean(null >= w - 1e-9), np.mean(null <= w + 1e-9)
    p = {"greater": greater, "less": less, "two-sided": min(1.0, 2 * min(greater, less))}
    return w, float(p[alternative])


# ----------------------------------------------------------------------------------------
# vocabularies and tensors


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
    zh |= set(ANIMALS) | set(ACTIONS) | set(ROLE_PREDICATES) | set(PEOPLE_VERBS)
    zh |= {"在", "一只", "一朵", "和", "被", "见面了", "，", "它", "他", "她"}
    en = {"a", "the", "and", "was", "by", "met", ","}
    for phrase in itertools.chain(
        SUBJECTS.values(),
        TIMES.values(),
        PLACES.values(),
        VERBS.values(),
        ANIMALS.values(),
        PEOPLE_VERBS.values(),
        (e for e, _ in NOUNS.values()),
        (e for e, _ in PEOPLE.values()),
        (e for e, _ in ROLE_PREDICATES.values()),
        (w for pair in ACTIONS.values() for w in pair),
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
