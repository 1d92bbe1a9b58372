"""solutions.zh_en: the generated Chinese-English task has the properties chapter 6 relies on:
different word order, pronouns that only the predicate's role with the voice (or the order of
two pronouns) resolves, minimal-pair twins that defeat every bag-of-words and position rule,
held-out combinations that never reach training, the notes' own sentences."""

import numpy as np
import pytest

from solutions.zh_en import (
    ANIMALS,
    BOS,
    EOS,
    HELD_OUT,
    NOTES_SENTENCES,
    PAD,
    PEOPLE,
    PLACES,
    ROLE_PREDICATES,
    SOURCE_VOCAB,
    TARGET_VOCAB,
    TIMES,
    VERBS,
    bag_of_words_baseline,
    encode_batch,
    make_pairs,
    position_baseline,
    twins,
    wilcoxon_signed_rank,
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


@pytest.mark.parametrize("split", ["train", "test"])
def test_antecedent_is_first_mentioned_in_about_half_the_sentences(split):
    """No rule on surface position resolves the pronoun: first- and second-mentioned
    antecedents are equally likely (0.5 +- 0.05 on 2000 sentences: 4.5 standard errors)."""
    pairs = make_pairs(4000, seed=3, split=split, kinds=("it", "he_she"))
    for kind in ("it", "he_she"):
        first = np.mean([p.antecedent == 0 for p in pairs if p.kind == kind])
        assert abs(first - 0.5) < 0.05, (kind, first)


def test_the_predicates_role_and_the_voice_decide_the_animal_and_either_animal_fits():
    checked = 0
    for p in make_pairs(1000, seed=4, kinds=("it",)):
        first, second = (p.source[i] for i in p.candidates)
        passive = "被" in p.source
        agent, patient = (second, first) if passive else (first, second)
        predicate = p.source[-1]
        role = ROLE_PREDICATES[predicate][1]
        if p.pronoun >= 0:
            checked += 1
            assert p.source[p.pronoun] == "它"
            meant = agent if role == "agent" else patient
        else:  # a predicate with no pronoun: the named animal is meant, whatever the role
            meant = p.source[-2]
            assert meant in (agent, patient)
        assert p.source[p.candidates[p.antecedent]] == meant
        assert p.target[p.answer] == ANIMALS[meant] == p.choices[0]
        assert p.choices[1] == ANIMALS[patient if meant == agent else agent]
    assert 600 < checked < 900  # one sentence in four has no pronoun


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
    for p in make_pairs(300, seed=12, kinds=(kind,)):
        bag, position, both = twins(p)
        assert sorted(bag.source) == sorted(p.source)
        # the other answer word, unless no pronoun: then the named animal stays the answer
        assert bag.choices == (p.choices[::-1] if p.pronoun >= 0 else p.choices)
        assert (len(position.source), position.pronoun, position.candidates) == (
            len(p.source),
            p.pronoun,
            p.candidates,
        )
        assert position.antecedent == 1 - p.antecedent
        assert sorted(both.source) == sorted(position.source)
        assert both.choices == (position.choices[::-1] if p.pronoun >= 0 else position.choices)
        assert {q.combination for q in (p, bag, position, both)} == {p.combination}
    with pytest.raises(ValueError, match="twins"):
        twins(make_pairs(1, seed=0, kinds=("reorder",))[0])


@pytest.mark.parametrize("kind", ["it", "he_she"])
def test_no_bag_of_words_or_position_rule_beats_one_half_on_the_test_split(kind):
    """The test split is closed under twins: a bag rule gives a sentence and its bag twin the
    same answer word (one of them is wrong), a position rule gives a sentence and its position
    twin the same candidate index (one of them is wrong)."""
    train = make_pairs(4000, seed=13, kinds=(kind,))
    test = make_pairs(2000, seed=14, split="test", kinds=(kind,))
    truth = [p.antecedent for p in test if p.pronoun >= 0]
    for baseline in (bag_of_words_baseline, position_baseline):
        guesses = baseline(train)(test)
        assert len(guesses) == len(truth) > 1000
        assert np.mean(np.equal(guesses, truth)) == 0.5, baseline.__name__


def test_the_baselines_find_a_rule_when_the_words_or_the_positions_hold_one():
    """On sentences where the bag decides (the cat, when it is a candidate, is meant) the bag
    rule is right on more than 95%; where the position decides (the first-mentioned is
    meant) the position rule is right on all."""
    pairs = make_pairs(6000, seed=15, kinds=("it",))
    cat = [p for p in pairs if p.choices[0] == "cat" or "猫" not in p.source]
    cat = [p for p in cat if "猫" in p.source and p.pronoun >= 0]
    first = [p for p in pairs if p.antecedent == 0 and p.pronoun >= 0]
    for subset, baseline in ((cat, bag_of_words_baseline), (first, position_baseline)):
        half = len(subset) // 2
        guesses = baseline(subset[:half])(subset[half:])
        truth = [p.antecedent for p in subset[half:]]
        assert half > 100 and np.mean(np.equal(guesses, truth)) > 0.95, baseline.__name__


def test_held_out_combinations_never_reach_training_and_make_up_the_test_split():
    train = make_pairs(5000, seed=6)
    test = make_pairs(2000, seed=6, split="test")
    assert all(p.combination not in HELD_OUT.get(p.kind, ()) for p in train)
    assert all(p.combination in HELD_OUT[p.kind] for p in test)
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


def test_wilcoxon_signed_rank_matches_hand_counted_sign_patterns():
    # five positive differences: W+ = 1+2+3+4+5 = 15, reached by 1 of the 32 sign patterns
    assert wilcoxon_signed_rank([1, 2, 3, 4, 5], [0, 0, 0, 0, 0]) == (15.0, 1 / 32)
    # ranks 1-5, the smallest negative: W+ = 14; W+ >= 14 for {all} and {all but 1}: 2/32
    w, p = wilcoxon_signed_rank([0.9, 0.5, 0.7, 0.6, 0.8], [1.0, 0.3, 0.4, 0.2, 0.3])
    assert w == 14.0 and p == pytest.approx(2 / 32)
    assert wilcoxon_signed_rank([0.9, 0.5, 0.7, 0.6, 0.8], [1.0, 0.3, 0.4, 0.2, 0.3], "less")[
        1
    ] == pytest.approx(31 / 32)
    assert wilcoxon_signed_rank([0.9, 0.5, 0.7, 0.6, 0.8], [1.0, 0.3, 0.4, 0.2, 0.3], "two-sided")[
        1
    ] == pytest.approx(4 / 32)
    # differences 1, -1, 2 (and a zero, dropped): ranks 1.5, 1.5, 3, W+ = 4.5; the eight
    # sign patterns give W+ = 0, 1.5, 1.5, 3, 3, 4.5, 4.5, 6: three of them >= 4.5
    assert wilcoxon_signed_rank([1, 0, 2, 5], [0, 1, 0, 5]) == (4.5, 3 / 8)
    assert wilcoxon_signed_rank([1, 2], [1, 2]) == (0.0, 1.0)
    with pytest.raises(ValueError, match="paired"):
        wilcoxon_signed_rank([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="two-sided"):
        wilcoxon_signed_rank([1], [0], alternative="both")
