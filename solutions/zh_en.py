"""A generated Chinese-English translation task (chapter 6,
``book/ch6_transformer.ipynb``).

What this file builds:

- A small grammar with three kinds of sentence pairs, tokenised into words:
  ``"reorder"``: time and place come before the verb in Chinese and after it in English
  (我 昨天 在 公园 看见了 一只 蝴蝶 -> I saw a butterfly in the park yesterday), so a
  translation has to read the source out of order;
  ``"it"``: a time, two events, then 所以 它 ("so it") and a predicate:
  昨天 ， 狗 追了 猫 ， 马 被 熊 咬了 ， 所以 它 跑走了 "the horse ran away because the
  dog chased the cat and the horse was bitten by the bear yesterday". One event is in
  the active voice and one in the 被 passive, in either order, each optionally with a
  place; the four animals differ. 它 is an animal of the *last* event: the predicate
  says which role (the one that acted got tired or was pleased; the one acted on ran
  away or hid), the last event's voice says which of its two mentions has that role. The
  English puts the antecedent first, so the reference prefix before it ("the") tells
  nothing;
  ``"he_she"``: a man and a woman, then two pronouns: 他 帮了 她 "he helped her" vs 她
  帮了 他; which pronoun comes first decides who is the subject. That is a cue of one
  word and its neighbour (the 2-gram "， 他"), so these sentences test reading a
  pronoun's gender, not the order of the sentence. Optional time and place words vary
  the lengths.
- Minimal pairs: ``make_pairs(..., split="test")`` returns every resolution sentence
  with its *bag twin* and its *position twin*, and the twin of both. For 它 the bag twin
  swaps the two events (the same multiset of 1- and 2-grams, since each event sits
  between two commas; the other antecedent, and the other mention index); for 他/她 it
  swaps the two pronouns (the same multiset of words). The position twin keeps the
  length and the candidate positions and means the other candidate (the predicate of the
  other role; the two people in the other order). On such a set every rule that sees
  only the 1- and 2-grams (for 他/她, only the words), or only the positions, is right
  on at most half; ``solutions.shortcuts`` fits such rules, and others, on training
  sentences.
- ``HELD_OUT_VOICE``, the composition split (``make_pairs(..., holdout="voice")``):
  two (predicate, passive last) pairs that training never shows, 累了 and 躲起来了 after
  a passive event. Each predicate's role shows after an active event, and what the
  passive does to the order of mention shows with the other predicate of each role; a
  test sentence needs the two together.
- The lecture notes' own sentences (``NOTES_SENTENCES``): 知识就是力量 "knowledge is
  power" and 这只蝴蝶真漂亮，停在花朵上，我很喜欢它 with "it" spelled out.
- ``HELD_OUT``: combinations (object with place; {animal, animal} with verb, in either
  event of an "it" sentence; {man, woman} with verb) that never occur in training; the
  test split is made of sentences that contain one, so held-out accuracy measures
  generalisation to new combinations of known words.
- ``make_pairs`` samples pairs; ``Vocab`` maps words to ids (0 = pad, 1 = bos, 2 = eos);
  ``encode_batch`` makes padded id tensors.
"""

from __future__ import annotations

import dataclasses
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
    "HELD_OUT_VOICE",
    "Pair",
    "Vocab",
    "SOURCE_VOCAB",
    "TARGET_VOCAB",
    "make_pairs",
    "twins",
    "encode_batch",
]

PAD, BOS, EOS = 0, 1, 2
_SPECIALS = ["<pad>", "<bos>", "<eos>"]
KINDS = ("reorder", "it", "he_she")

# --------------------------------------------------------------------------------------
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
VERBS = {
    "看见了": "saw",
    "画了": "drew",
    "拍了": "photographed",
    "找到了": "found",
    "喂了": "fed",
}
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
# the "it" sentences: animal acts on animal; Chinese verb -> (active, passive
# participle)
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
ACTIONS = {
    "追了": ("chased", "chased"),
    "咬了": ("bit", "bitten"),
    "推了": ("pushed", "pushed"),
}
# predicate -> (English, role): "agent" = the one that acted, "patient" = the one acted
# on
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
PEOPLE_VERBS = {
    "帮了": "helped",
    "谢了": "thanked",
    "叫了": "called",
    "等了": "waited for",
}

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
    # {animal, animal} with an action: 28 pairs x 3 actions = 84 combinations, 17 held
    # out
    animal_pairs = list(itertools.combinations(ANIMALS, 2))
    it = {
        (frozenset(pair), verb)
        for (i, pair), (j, verb) in itertools.product(
            enumerate(animal_pairs), enumerate(ACTIONS)
        )
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
    return {
        "reorder": frozenset(obj_place),
        "it": frozenset(it),
        "he_she": frozenset(he_she),
    }


HELD_OUT = _held_out()
# The composition split (``make_pairs(..., holdout="voice")``): (predicate, whether the
# last event is passive) pairs that no training sentence has. Each held-out predicate is
# seen only with the active voice last, where its role shows; the passive is seen only
# with the other predicate of its role. Their antecedents are the second and the first
# mention of the passive event, so "always the k-th mention" scores one half.
HELD_OUT_VOICE = frozenset({("累了", True), ("躲起来了", True)})


@dataclass
class Pair:
    """One sentence pair. ``source``/``target`` are word lists (no specials).

    For the resolution sentences: ``pronoun`` is the index of (the first) 它/他/她 in
    ``source``, ``candidates`` the source indices of the candidates in order of mention
    (four animals; two people), ``antecedent`` which of them is meant (an index into
    ``candidates``), ``answer`` the index in ``target`` of the word that names the
    antecedent, and ``choices`` the English words that could stand there: the
    antecedent's first, then the other candidates'. -1 / () where not applicable.
    ``combination`` is what decides the split (see ``HELD_OUT``); ``twin`` holds the
    choices that made the sentence (``twins`` flips them).
    """

    kind: str
    source: list[str]
    target: list[str]
    combination: tuple | None = None
    pronoun: int = -1
    candidates: tuple[int, ...] = ()
    antecedent: int = -1
    answer: int = -1
    choices: tuple[str, ...] = ()
    twin: dict = dataclasses.field(default_factory=dict, repr=False)


def _pick(rng, options):
    return options[rng.integers(len(options))]


def _reorder(rng) -> Pair:
    subj, verb, noun = (
        _pick(rng, list(SUBJECTS)),
        _pick(rng, list(VERBS)),
        _pick(rng, list(NOUNS)),
    )
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
    en = (PLACES[place].split() if place else []) + (
        TIMES[time].split() if time else []
    )
    return zh_time, zh_place, en


def _clause(agent, patient, verb, passive, place):
    """One event: (Chinese words, English words, the two animals in order of
    mention)."""
    active_en, passive_en = ACTIONS[verb]
    zh_place = ["在", place] if place else []
    en_place = PLACES[place].split() if place else []
    if passive:  # 猫 被 狗 追了: the patient is mentioned first
        zh = [patient] + zh_place + ["被", agent, verb]
        en = [
            "the",
            ANIMALS[patient],
            "was",
            *passive_en.split(),
            "by",
            "the",
            ANIMALS[agent],
        ]
        return zh, en + en_place, (patient, agent)
    zh = [agent] + zh_place + [verb, patient]
    return (
        zh,
        ["the", ANIMALS[agent], *active_en.split(), "the", ANIMALS[patient]] + en_place,
        (
            agent,
            patient,
        ),
    )


def _it_sentence(events, passive_last, predicate, time) -> Pair:
    """events: two (agent, patient, verb, place) tuples, the active event and the
    passive one; passive_last: whether the passive clause comes second (it is the one 它
    refers to)."""
    active, passive = events
    order = (active, passive) if passive_last else (passive, active)
    clauses = [
        _clause(a, p, v, e is passive, place) for e in order for a, p, v, place in [e]
    ]
    source = [
        time,
        "，",
        *clauses[0][0],
        "，",
        *clauses[1][0],
        "，",
        "所以",
        "它",
        predicate,
    ]
    mentions = clauses[0][2] + clauses[1][2]  # the four animals in order of mention
    english, role = ROLE_PREDICATES[predicate]
    agent, patient = order[1][:2]  # the last event's roles
    meant = agent if role == "agent" else patient
    others = [m for m in mentions if m != meant]
    target = ["the", ANIMALS[meant], *english.split(), "because", *clauses[0][1], "and"]
    target += clauses[1][1] + TIMES[time].split()
    return Pair(
        "it",
        source,
        target,
        combination=frozenset((frozenset(e[:2]), e[2]) for e in events),
        pronoun=source.index("它"),
        candidates=tuple(source.index(m) for m in mentions),
        antecedent=mentions.index(meant),
        answer=1,
        choices=(ANIMALS[meant], *(ANIMALS[m] for m in others)),
        twin=dict(
            events=events, passive_last=passive_last, predicate=predicate, time=time
        ),
    )


def _it(rng) -> Pair:
    animals = [list(ANIMALS)[i] for i in rng.choice(len(ANIMALS), 4, replace=False)]
    events = tuple(
        (
            animals[2 * k],
            animals[2 * k + 1],
            _pick(rng, list(ACTIONS)),
            _pick(rng, list(PLACES)) if rng.random() < 0.5 else None,
        )
        for k in range(2)
    )
    return _it_sentence(
        events,
        bool(rng.random() < 0.5),
        _pick(rng, list(ROLE_PREDICATES)),
        _pick(rng, list(TIMES)),
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
        twin=dict(
            first=first,
            second=second,
            subject=subject,
            verb=verb,
            time=time,
            place=place,
        ),
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


def _held_out_voice(pair: Pair) -> bool:
    """Whether an "it" sentence has a held-out (predicate, passive last) pair."""
    if pair.kind != "it":
        return False
    return (pair.twin["predicate"], pair.twin["passive_last"]) in HELD_OUT_VOICE


def _held_out_pair(pair: Pair) -> bool:
    """Whether a pair belongs to the test split: its combination is held out (an "it"
    sentence: either of its two events' (pair of animals, action) is)."""
    if pair.combination is None:
        return False
    if pair.kind == "it":
        return any(event in HELD_OUT["it"] for event in pair.combination)
    return pair.combination in HELD_OUT[pair.kind]


_FLIPPED_ROLE = {"agent": "patient", "patient": "agent"}


def twins(pair: Pair) -> tuple[Pair, Pair, Pair]:
    """The minimal-pair twins of a resolution sentence: (bag twin, position twin, both).

    Bag twin, the other answer from the same bag: for 它 the two events swap places
    (each sits between two commas, so the multiset of 1- and 2-grams stays the same; the
    last event, hence the antecedent and its mention index, changes); for 他/她 the two
    pronouns swap places (the same multiset of words). Position twin: the same length,
    pronoun and candidate positions with the other candidate meant (the predicate of the
    other role; the two people swap order of mention).
    """
    t = pair.twin
    if pair.kind == "it":
        role = ROLE_PREDICATES[t["predicate"]][1]
        same_slot = [
            p for p in ROLE_PREDICATES if ROLE_PREDICATES[p][1] == _FLIPPED_ROLE[role]
        ]
        other_pred = same_slot[list(ROLE_PREDICATES).index(t["predicate"]) % 2]
        bag = {**t, "passive_last": not t["passive_last"]}
        position = {**t, "predicate": other_pred}
        both = {**bag, "predicate": other_pred}
        return tuple(_it_sentence(**a) for a in (bag, position, both))
    if pair.kind == "he_she":
        other = t["second"] if t["subject"] == t["first"] else t["first"]
        bag = {**t, "subject": other}
        position = {**t, "first": t["second"], "second": t["first"]}
        both = {**position, "subject": other}
        return tuple(_he_she_sentence(**a) for a in (bag, position, both))
    raise ValueError(
        f"only 'it' and 'he_she' sentences have twins, got a {pair.kind!r} sentence"
    )


def make_pairs(
    n,
    seed,
    split="train",
    kinds=("reorder", "it", "he_she"),
    weights=None,
    notes_every=0,
    holdout="combinations",
):
    """Sample ``n`` sentence pairs.

    split: ``"train"`` keeps only pairs whose ``combination`` is not held out;
    ``"test"`` only pairs whose combination IS held out (``HELD_OUT``), so every test
    sentence combines known words in a way never seen in training. In the test split
    each sampled "it" or "he_she" sentence comes with its three ``twins`` (four
    sentences in a row; the list is cut at ``n``), so no rule on 1- and 2-grams (for
    他/她, on words), positions or length beats one half on a list of whole groups of
    four.
    kinds: which kinds to sample, with probabilities ``weights`` (default uniform).
    notes_every: in the training split, replace every k-th pair by one of the notes' own
    sentences (``NOTES_SENTENCES``) so the model learns them; 0 = never.
    holdout: ``"combinations"`` (the above) or ``"voice"``, the composition split:
    training also leaves out every "it" sentence whose (predicate, passive last) is in
    ``HELD_OUT_VOICE``, and the test split is exactly those "it" sentences (whatever
    their animals; no twins, other kinds skipped).
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
    if holdout not in ("combinations", "voice"):
        raise ValueError(f"expected holdout 'combinations' or 'voice', got {holdout!r}")
    rng = np.random.default_rng(seed)
    pairs: list[Pair] = []
    while len(pairs) < n:
        if (
            split == "train"
            and notes_every
            and len(pairs) % notes_every == notes_every - 1
        ):
            zh, en = NOTES_SENTENCES[rng.integers(len(NOTES_SENTENCES))]
            pairs.append(Pair("notes", zh.split(), en.split()))
            continue
        kind = kinds[rng.choice(len(kinds), p=weights / weights.sum())]
        pair = _MAKERS[kind](rng)
        if holdout == "voice":
            if split == "train" and not (_held_out_pair(pair) or _held_out_voice(pair)):
                pairs.append(pair)
            elif split == "test" and _held_out_voice(pair):
                pairs.append(pair)
            continue
        held = _held_out_pair(pair)
        if held == (split == "test"):
            pairs.append(pair)
            if split == "test" and kind != "reorder":
                pairs.extend(twins(pair))  # twins keep the combination: held out too
    return pairs[:n]


# --------------------------------------------------------------------------------------
# vocabularies and tensors


class Vocab:
    """Words <-> ids: 0 = <pad>, 1 = <bos>, 2 = <eos>, then the words in a fixed
    order."""

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
    zh = (
        set(SUBJECTS) | set(TIMES) | set(PLACES) | set(VERBS) | set(NOUNS) | set(PEOPLE)
    )
    zh |= set(ANIMALS) | set(ACTIONS) | set(ROLE_PREDICATES) | set(PEOPLE_VERBS)
    zh |= {"在", "一只", "一朵", "和", "被", "见面了", "，", "所以", "它", "他", "她"}
    en = {"a", "the", "and", "was", "by", "met", ",", "because"}
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
