"""solutions.zh_en and solutions.shortcuts: the generated Chinese-English task has the
properties chapter 6 relies on: different word order; a 它 that only the predicate's role
with the voice of the *last* event resolves; minimal-pair twins that defeat every rule on
1- and 2-grams, positions or length; held-out combinations that never reach training; the
notes' own sentences. The shortcut baselines, fitted on training sentences, stay below 0.9
on held-out 它, and resolve a one-event grammar where such a shortcut exists; on the
composition split (pairs of predicate and voice never seen together) every baseline, the
GRU included, stays below 0.9."""

import numpy as np
import pytest

from solutions import shortcuts
from solutions.zh_en import (
    ACTIONS,
    ANIMALS,
    BOS,
    EOS,
    HELD_OUT,
    HELD_OUT_VOICE,
    NOTES_SENTENCES,
    PAD,
    PEOPLE,
    PLACES,
    ROLE_PREDICATES,
    SOURCE_VOCAB,
    TARGET_VOCAB,
    TIMES,
    VERBS,
    Pair,
    encode_batch,
    make_pairs,
    twins,
)


def test_time_and_place_precede_the_verb_in_chinese_and_follow_it_in_english():
    pairs = [p for p in make_pairs(900, seed=1) if p.kind == "reorder"]
    checked = 0
    for p in pairs:
        verb = next(w for w in p.source if w in VERBS)
        time = next((w for w in p.source if w in TIMES), None)
        place = next((w for w in p.source if w in PLACES), None)
        if time is None or place is None:
            continue
        checked += 1
        assert p.source.index(time) < p.source.index(place) < p.source.index(verb)
        english = " ".join(p.target)
        assert (
            english.index(VERBS[verb]) < english.index(PLACES[place]) < english.index(TIMES[time])
        )
    assert checked > 100


def test_the_notes_example_sentence_is_a_held_out_combination():
    """(butterfly, park) is held out: the notes' sentence is a test sentence, never trained on."""
    assert ("蝴蝶", "公园") in HELD_OUT["reorder"]
    pairs = make_pairs(3000, seed=2, split="test", kinds=("reorder",))
    wanted = ("我 昨天 在 公园 看见了 一只 蝴蝶", "I saw a butterfly in the park yesterday")
    assert wanted in {(" ".join(p.source), " ".join(p.target)) for p in pairs}


def _ngram_bag(words):
    return sorted(words) + sorted(zip(words, words[1:]))


@pytest.mark.parametrize("split", ["train", "test"])
def test_each_mention_of_the_antecedent_is_about_equally_likely(split):
    """No rule on the order of mention resolves the pronoun: 它 is the first or the second
    animal of the last event (mentions 3 and 4 of 4) equally often, 他/她 the first or the
    second person (0.5 +- 0.05 on about 2000 sentences each: 4.5 standard errors)."""
    pairs = make_pairs(4000, seed=3, split=split, kinds=("it", "he_she"))
    for kind, last_two in (("it", (2, 3)), ("he_she", (0, 1))):
        answers = [p.antecedent for p in pairs if p.kind == kind]
        assert set(answers) == set(last_two)
        first = np.mean(np.equal(answers, last_two[0]))
        assert abs(first - 0.5) < 0.05, (kind, first)


def test_the_predicates_role_and_the_last_events_voice_decide_the_animal():
    for p in make_pairs(600, seed=4, kinds=("it",)):
        assert p.source[p.pronoun] == "它" and p.source[-1] in ROLE_PREDICATES
        assert p.source.count("被") == 1 and p.source.count("，") == 3
        last_event = p.source[p.source.index("，", 2) + 1 : p.pronoun - 2]
        mentions = [p.source[i] for i in p.candidates]
        assert len(set(mentions)) == 4 and mentions[2:] == [w for w in last_event if w in ANIMALS]
        passive = "被" in last_event
        agent, patient = mentions[3:1:-1] if passive else mentions[2:]
        meant = agent if ROLE_PREDICATES[p.source[-1]][1] == "agent" else patient
        assert mentions[p.antecedent] == meant
        assert p.target[p.answer] == ANIMALS[meant] == p.choices[0]
        assert sorted(p.choices) == sorted(ANIMALS[m] for m in mentions)
        assert p.target[: p.answer] == ["the"]  # the reference prefix tells nothing


def test_he_she_sentences_hold_two_pronouns_and_the_first_names_the_subject():
    for p in make_pairs(1000, seed=5, kinds=("he_she",)):
        meant = p.source[p.candidates[p.antecedent]]
        other = p.source[p.candidates[1 - p.antecedent]]
        assert p.source[p.pronoun] == PEOPLE[meant][1] != PEOPLE[other][1]
        assert p.source[p.pronoun + 2] == PEOPLE[other][1]
        assert p.target[p.answer] == PEOPLE[meant][0] == p.choices[0]
        assert p.target[-1] == PEOPLE[other][0] == p.choices[1]


@pytest.mark.parametrize("kind", ["it", "he_she"])
def test_twins_share_the_bag_or_the_positions_and_flip_the_answer(kind):
    """它's bag twin keeps every 1- and 2-gram and changes the antecedent and its mention
    index; 他/她's keeps every word and changes the antecedent. The position twin keeps the
    length and the positions and means another candidate."""
    for p in make_pairs(300, seed=12, kinds=(kind,)):
        bag, position, both = twins(p)
        grams = _ngram_bag if kind == "it" else sorted
        assert grams(bag.source) == grams(p.source)
        assert bag.choices[0] != p.choices[0] and sorted(bag.choices) == sorted(p.choices)
        if kind == "it":
            assert bag.antecedent != p.antecedent
        assert (len(position.source), position.pronoun, position.candidates) == (
            len(p.source),
            p.pronoun,
            p.candidates,
        )
        assert position.antecedent != p.antecedent
        assert grams(both.source) == grams(position.source)
        assert both.choices[0] != position.choices[0]
        assert {q.combination for q in (p, bag, position, both)} == {p.combination}
    with pytest.raises(ValueError, match="twins"):
        twins(make_pairs(1, seed=0, kinds=("reorder",))[0])


# the shortcut baselines of chapter 6, fitted on training sentences; all but the GRU and
# the rule that reads where 被 stands are blind to order beyond two neighbours
ORDER_BLIND = {
    "mention": shortcuts.mention_baseline,
    "length": shortcuts.length_baseline,
    "position": shortcuts.position_baseline,
    "marker_table": shortcuts.marker_table_baseline,
    "bag_of_words": shortcuts.bag_of_words_baseline,
    "bag_of_1_2_grams": lambda train: shortcuts.bag_of_words_baseline(train, bigrams=True),
    "logistic_1_2_grams": lambda train: shortcuts.ngram_logistic_baseline(train, pairs=False),
    "logistic_pairs": shortcuts.ngram_logistic_baseline,
    "pooled_mlp": shortcuts.pooled_ngram_mlp_baseline,
}


# three data seeds: (training sample, held-out sample)
IT_SPLIT_SEEDS = [(13, 14), (23, 24), (33, 34)]


@pytest.fixture(scope="module", params=IT_SPLIT_SEEDS, ids=lambda s: f"data{s[0]}")
def it_split(request):
    train_seed, test_seed = request.param
    return make_pairs(1200, seed=train_seed, kinds=("it",)), make_pairs(
        800, seed=test_seed, split="test", kinds=("it",)
    )


@pytest.mark.parametrize("name", sorted(ORDER_BLIND))
def test_no_shortcut_baseline_reaches_0_9_on_held_out_it(name, it_split):
    """The test split is closed under the twins: a rule on 1- and 2-grams gives a sentence
    and its bag twin the same answer (one of them is wrong), a rule on positions or length
    a sentence and its position twin (one is wrong). Measured on each of the three data
    seeds: 0.500 for every baseline but the two bags of words, which name a word among four
    (0.2475 to 0.255); the test fails at 0.9. The 27 cases take about 26 s of CPU."""
    train, test = it_split
    score = shortcuts.accuracy(ORDER_BLIND[name](train), test)
    assert score < 0.9, (name, score)
    assert score <= 0.5  # the twin argument: at most half, whatever was fitted


@pytest.mark.parametrize("name", ["bag_of_words", "position"])
def test_no_bag_of_words_or_position_rule_beats_one_half_on_held_out_he_she(name):
    train = make_pairs(2000, seed=13, kinds=("he_she",))
    test = make_pairs(800, seed=14, split="test", kinds=("he_she",))
    assert shortcuts.accuracy(ORDER_BLIND[name](train), test) == 0.5


def test_the_bag_rule_on_2_grams_resolves_he_she_from_the_pronoun_after_the_comma():
    """他/她 is decided by a word and its neighbour ("， 他"): the bag rule on 1- and
    2-grams resolves every held-out sentence (measured 1.000), which the chapter reports."""
    train = make_pairs(2000, seed=13, kinds=("he_she",))
    test = make_pairs(800, seed=14, split="test", kinds=("he_she",))
    assert shortcuts.accuracy(ORDER_BLIND["bag_of_1_2_grams"](train), test) >= 0.95


def _one_event(n, seed, split):
    """The grammar before the two events: A V B ， 它 P or B 被 A V ， 它 P, (pair of animals,
    action) held out as in HELD_OUT. There (被 present, predicate) decides the mention."""
    rng = np.random.default_rng(seed)
    pairs = []
    while len(pairs) < n:
        a, b = (list(ANIMALS)[i] for i in rng.choice(len(ANIMALS), 2, replace=False))
        verb = list(ACTIONS)[rng.integers(len(ACTIONS))]
        if ((frozenset((a, b)), verb) in HELD_OUT["it"]) != (split == "test"):
            continue
        predicate = list(ROLE_PREDICATES)[rng.integers(len(ROLE_PREDICATES))]
        passive = rng.random() < 0.5
        time = [list(TIMES)[rng.integers(len(TIMES))]] if rng.random() < 0.5 else []
        source = time + ([b, "被", a, verb] if passive else [a, verb, b]) + ["，", "它", predicate]
        mentions = (b, a) if passive else (a, b)
        meant = a if ROLE_PREDICATES[predicate][1] == "agent" else b
        candidates = tuple(source.index(m) for m in mentions)
        pairs.append(
            Pair("it", source, [], None, source.index("它"), candidates, mentions.index(meant))
        )
    return pairs


@pytest.mark.parametrize("name", ["marker_table", "logistic_pairs", "pooled_mlp"])
def test_the_baselines_resolve_a_one_event_grammar_where_a_shortcut_exists(name):
    """On the one-event grammar (the chapter's before) the 8-entry table, the pair-feature
    logistic regression and the pooled MLP resolve held-out 它 (measured: 1.000, 0.97,
    1.000): the 0.9 test above can fail."""
    train, test = _one_event(800, seed=1, split="train"), _one_event(300, seed=2, split="test")
    assert shortcuts.accuracy(ORDER_BLIND[name](train), test) >= 0.9


def test_the_gru_and_the_position_of_bei_resolve_it_they_read_the_order():
    """What the shortcuts lack is order: a bidirectional GRU without attention, and a table
    of where 被 stands with the predicate, resolve held-out 它 (measured: 1.000 and 1.000)."""
    train, test = (
        make_pairs(1200, seed=13, kinds=("it",)),
        make_pairs(400, seed=14, split="test", kinds=("it",)),
    )
    assert shortcuts.accuracy(shortcuts.marker_position_baseline(train), test) >= 0.9
    assert shortcuts.accuracy(shortcuts.gru_baseline(train), test) >= 0.9


# every baseline of the chapter, the two that read order included
BASELINES = {
    **ORDER_BLIND,
    "marker_position": shortcuts.marker_position_baseline,
    "gru": shortcuts.gru_baseline,
}


@pytest.fixture(scope="module", params=[1, 2, 3], ids=lambda s: f"data{s}")
def voice_split(request):
    """The composition split: training never has a held-out (predicate, voice) pair."""
    train = make_pairs(4000, seed=request.param, notes_every=50, holdout="voice")
    test = make_pairs(300, seed=999 + request.param, split="test", kinds=("it",), holdout="voice")
    return [p for p in train if p.kind == "it"], test


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_no_baseline_reaches_0_9_on_held_out_pairs_of_predicate_and_voice(name, voice_split):
    """The GRU and the 被-index table resolve the combination split (above); on pairs of
    predicate and voice never seen together every baseline falls to a coin or below.
    Measured on these three data seeds: the rules on mention, length and positions and the
    被-index table 0.497-0.540, the bags of words 0.160-0.267, the (被 present, predicate)
    table, both logistic regressions, the MLP and the GRU 0.000-0.003: they answer as for
    the voice they saw. (Data seeds 1-5, 13, 23, 33 with test seed 999: at most 0.563.) The
    test fails at 0.9; the bound of 0.6 is 0.06 above the largest. 33 cases, about 40 s."""
    train, test = voice_split
    score = shortcuts.accuracy(BASELINES[name](train), test)
    assert score < 0.9, (name, score)
    assert score <= 0.6, (name, score)


def test_the_voice_split_holds_out_exactly_its_pairs_and_balances_the_mentions():
    """Training never has 累了 or 躲起来了 after a passive event, nor a held-out combination;
    the test split is only those sentences, and means the passive event's first mention
    for one predicate and its second for the other."""
    train = make_pairs(3000, seed=5, holdout="voice")
    test = make_pairs(400, seed=6, split="test", holdout="voice")
    voice = lambda p: (p.twin["predicate"], p.twin["passive_last"])  # noqa: E731
    its = [p for p in train if p.kind == "it"]
    assert its and not any(voice(p) in HELD_OUT_VOICE for p in its)
    assert not any(e in HELD_OUT["it"] for p in its for e in p.combination)
    assert {voice(p) for p in its} == {
        (q, passive) for q in ROLE_PREDICATES for passive in (False, True)
    } - HELD_OUT_VOICE
    assert {p.kind for p in train} == {"reorder", "it", "he_she"}
    assert all(p.kind == "it" and voice(p) in HELD_OUT_VOICE for p in test)
    assert {voice(p) for p in test} == HELD_OUT_VOICE
    assert {p.antecedent for p in test} == {2, 3}
    by_predicate = {q: {p.antecedent for p in test if voice(p)[0] == q} for q, _ in HELD_OUT_VOICE}
    assert by_predicate == {"累了": {3}, "躲起来了": {2}}
    with pytest.raises(ValueError, match="holdout"):
        make_pairs(3, seed=0, holdout="predicates")


def test_held_out_combinations_never_reach_training_and_make_up_the_test_split():
    """An "it" sentence is held out when either of its events' (pair of animals, action) is."""
    train = make_pairs(5000, seed=6)
    test = make_pairs(2000, seed=6, split="test")

    def held(p):
        events = p.combination if p.kind == "it" else [p.combination]
        return any(e in HELD_OUT.get(p.kind, ()) for e in events)

    assert not any(held(p) for p in train) and all(held(p) for p in test)
    assert any(p.kind == "it" for p in test) and any(p.kind == "it" for p in train)
    # each held-out combination uses words that training does see, in other combinations
    train_words = {w for p in train for w in p.source}
    assert all(set(p.source) <= train_words for p in test)


def test_notes_sentences_are_mixed_into_training_when_asked():
    pairs = make_pairs(300, seed=7, notes_every=10)
    seen = {(" ".join(p.source), " ".join(p.target)) for p in pairs if p.kind == "notes"}
    assert seen == set(NOTES_SENTENCES)
    assert not any(p.kind == "notes" for p in make_pairs(300, seed=7))


def test_vocabularies_cover_every_generated_word_with_specials_first():
    assert SOURCE_VOCAB.itos[:3] == TARGET_VOCAB.itos[:3] == ["<pad>", "<bos>", "<eos>"]
    assert 60 <= len(SOURCE_VOCAB) <= 120 and 60 <= len(TARGET_VOCAB) <= 120
    src, tgt = encode_batch(make_pairs(50, seed=8, notes_every=5))
    assert (tgt[:, 0] == BOS).all() and ((tgt == EOS).sum(1) == 1).all()
    lengths = (src != PAD).sum(1)
    assert all((src[i, : lengths[i]] != PAD).all() for i in range(len(src)))  # pads at the end only


def test_make_pairs_is_deterministic_and_refuses_bad_arguments():
    a, b = make_pairs(30, seed=9), make_pairs(30, seed=9)
    assert [(p.source, p.target) for p in a] == [(p.source, p.target) for p in b]
    with pytest.raises(ValueError, match="split"):
        make_pairs(3, seed=0, split="valid")
    with pytest.raises(ValueError, match="kinds"):
        make_pairs(3, seed=0, kinds=("poetry",))
