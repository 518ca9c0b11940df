from pasu.speech.stopping import MAX_BLOCK_TOKENS, repeated_tail, token_budget


def test_a_token_repeated_three_times_is_cut_to_one():
    assert repeated_tail([7, 5, 5, 5]) == 2  # keep [7, 5]


def test_a_repeated_phrase_is_cut_after_its_first_copy():
    phrase = [11, 12, 13]
    assert repeated_tail([1, *phrase, *phrase]) is None  # a short phrase may come twice
    assert repeated_tail([1, *phrase, *phrase, *phrase]) == 4
    sentence = [21, 22, 23, 24, 25]
    assert repeated_tail([*sentence, *sentence]) == 5  # a long one may not


def test_speech_that_repeats_twice_or_not_at_all_goes_on():
    assert repeated_tail([5, 5]) is None  # "five five"
    assert repeated_tail([1, 2, 3, 1, 2, 4, 1, 2, 3]) is None
    assert repeated_tail([]) is None


def test_blocks_longer_than_the_limit_are_not_looked_for():
    block = list(range(MAX_BLOCK_TOKENS + 1))
    assert repeated_tail(block * 2) is None
    assert repeated_tail(block[:-1] * 2) == MAX_BLOCK_TOKENS


def test_the_budget_grows_with_the_audio():
    assert token_budget(0.0) == 10
    assert token_budget(2.5) == 20
