import pytest

from pasu.core.text import normalize_for_wer, to_spoken_form


@pytest.mark.parametrize(
    ("spoken", "written"),
    [
        ("wake me up at eight o'clock", "Wake me up at 8 o'clock."),
        ("mister richards", "Mr. Richards"),
        ("mr richards", "Mr. Richards"),
        ("set an alarm for five thirty pm", "Set an alarm for 5:30 p.m."),
        ("wake me at seven oh five am", "Wake me at 7:05am"),
        ("twenty five percent", "25%"),
        ("remind me on the third", "Remind me on the 3rd."),
        ("it costs five dollars fifty cents", "It costs $5.50"),
        ("in twenty nineteen", "in 2019"),
        ("turn the colour up", "Turn the color up!"),
        ("what's the weather", "What is the weather?"),
        ("turn on the t. v.", "Turn on the TV"),
    ],
)
def test_spoken_and_written_forms_normalise_alike(spoken, written):
    assert normalize_for_wer(spoken) == normalize_for_wer(written)


def test_different_words_stay_different():
    assert normalize_for_wer("five thirty") != normalize_for_wer("five thirteen")
    assert normalize_for_wer("turn off") != normalize_for_wer("turn of")


def test_spoken_form_verbalises_digits_without_other_changes():
    assert to_spoken_form("Call 911 at 10:15") == "call nine hundred and eleven at ten fifteen"
    assert to_spoken_form("dial 0123") == "dial oh one two three"


def test_normalised_text_keeps_single_words_apart():
    assert normalize_for_wer("  Hello,   WORLD!! ") == "hello world"
