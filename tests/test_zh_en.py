"""solutions.zh_en: the generated Chinese-English task has the properties chapter 6 relies on:
different word order, pronouns that only the predicate (or the gender) resolves, held-out
combinations that never reach training, the notes' own sentences."""

import numpy as np
import pytest

from solutions.zh_en import (
    BOS,
    EOS,
    HELD_OUT,
    NOTES_SENTENCES,
    NOUNS,
    PAD,
    PEOPLE,
    PLACES,
    PREDICATES,
    SOURCE_VOCAB,
    TARGET_VOCAB,
    TIMES,
    VERBS,
    encode_batch,
    make_pairs,
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


def test_the_predicate_fits_the_antecedent_and_not_the_other_candidate():
    for p in make_pairs(1000, seed=4, kinds=("it",)):
        meant = p.source[p.candidates[p.antecedent]]
        other = p.source[p.candidates[1 - p.antecedent]]
        predicate = p.source[-1]
        assert predicate in PREDICATES[NOUNS[meant][2]]
        assert predicate not in PREDICATES[NOUNS[other][2]]
        assert p.source[p.pronoun] == "它"
        assert p.target[p.answer] == NOUNS[meant][0]


def test_he_she_agrees_in_gender_with_the_antecedent_only():
    for p in make_pairs(1000, seed=5, kinds=("he_she",)):
        meant = p.source[p.candidates[p.antecedent]]
        other = p.source[p.candidates[1 - p.antecedent]]
        assert p.source[p.pronoun] == PEOPLE[meant][1] != PEOPLE[other][1]
        assert p.target[p.answer] == PEOPLE[meant][0].split()[-1]


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
