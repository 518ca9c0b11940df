"""Spoken-form text normalisation, shared by the tokenizer, intent classifiers and WER.

SLURP writes what was said ("eight o'clock", "mr richards", "five thirty pm"); Whisper writes
the written form ("8 o'clock", "Mr. Richards", "5:30 p.m."). Whisper's own English normaliser
turns both sides into digits, which changes word counts and fails on times and o'clock. We go
the other way: `to_spoken_form` verbalises digits, times, ordinals, currencies and symbols into
SLURP's spoken words, and `normalize_for_wer` then applies Whisper's English cleanup
(lowercase, punctuation, contractions, titles, British→American spelling) without its number
step. Reference and hypothesis always go through the same function.
"""

import re
from functools import cache

from num2words import num2words

_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "`": "'", "´": "'"})

_SYMBOL_WORDS = {
    "&": " and ",
    "@": " at ",
    "+": " plus ",
    "=": " equals ",
    "°": " degrees ",
}

_CURRENCIES = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "€": ("euro", "euros", "cent", "cents"),
}

_TIME = re.compile(r"\b(\d{1,2}):(\d{2})\b")
_AM_PM = re.compile(r"\b([ap])\.\s?m\b\.?", re.IGNORECASE)
_DIGIT_AM_PM = re.compile(r"(\d)([ap]m)\b", re.IGNORECASE)
_CURRENCY = re.compile(r"([$£€])\s?(\d+(?:,\d{3})*)(?:\.(\d{1,2}))?")
_PERCENT = re.compile(r"(\d)\s?%")
_ORDINAL = re.compile(r"\b(\d+)(st|nd|rd|th)\b", re.IGNORECASE)
_DECIMAL = re.compile(r"\b(\d+)\.(\d+)\b")
_INTEGER = re.compile(r"\d+(?:,\d{3})*")


def _words(number: int, to: str = "cardinal") -> str:
    return " " + num2words(number, to=to).replace("-", " ").replace(",", "") + " "


def _say_integer(digits: str) -> str:
    number = int(digits.replace(",", ""))
    if (
        len(digits) == 4
        and 1100 <= number <= 2099
        and number % 100 != 0
        and not 2000 < number < 2010
    ):
        return _words(number, to="year")
    if len(digits) > 1 and digits.startswith("0"):
        # Codes and phone numbers are read digit by digit.
        return " " + " ".join("oh" if d == "0" else num2words(int(d)) for d in digits) + " "
    return _words(number)


def _say_time(match: re.Match) -> str:
    hour, minute = int(match.group(1)), int(match.group(2))
    if minute == 0:
        return _words(hour)
    if minute < 10:
        return _words(hour) + " oh " + _words(minute)
    return _words(hour) + _words(minute)


def _say_currency(match: re.Match) -> str:
    one, many, cent, cents = _CURRENCIES[match.group(1)]
    amount = int(match.group(2).replace(",", ""))
    spoken = _words(amount) + (one if amount == 1 else many)
    if match.group(3):
        fraction = int(match.group(3).ljust(2, "0"))
        spoken += _words(fraction) + (cent if fraction == 1 else cents)
    return " " + spoken + " "


def _say_decimal(match: re.Match) -> str:
    digits = " ".join(num2words(int(d)) for d in match.group(2))
    return _words(int(match.group(1))) + " point " + digits + " "


def to_spoken_form(text: str) -> str:
    """Rewrite written forms (digits, times, symbols) as the words a speaker would say."""
    s = text.translate(_APOSTROPHES)
    s = _AM_PM.sub(lambda m: m.group(1).lower() + "m", s)
    s = _DIGIT_AM_PM.sub(r"\1 \2", s)
    s = _TIME.sub(_say_time, s)
    s = _CURRENCY.sub(_say_currency, s)
    s = _PERCENT.sub(r"\1 percent", s)
    s = _ORDINAL.sub(lambda m: _words(int(m.group(1)), to="ordinal"), s)
    s = _DECIMAL.sub(_say_decimal, s)
    s = _INTEGER.sub(lambda m: _say_integer(m.group(0)), s)
    for symbol, word in _SYMBOL_WORDS.items():
        s = s.replace(symbol, word)
    return re.sub(r"\s+", " ", s).strip().lower()


@cache
def _whisper_cleanup():
    from whisper_normalizer.english import EnglishTextNormalizer

    normalizer = EnglishTextNormalizer()
    normalizer.standardize_numbers = lambda s: s  # numbers are already words
    return normalizer


_LETTER_RUN = re.compile(r"\b[a-z](?: [a-z]\b)+")


def _join_letters(match: re.Match) -> str:
    letters = match.group(0).split()
    return match.group(0) if set(letters) <= {"a", "i"} else "".join(letters)


def normalize_for_wer(text: str) -> str:
    """The one normalisation applied to references and hypotheses before scoring.

    Spoken form, Whisper's English cleanup, and spelled-out letters joined ("t. v." = "tv").
    """
    cleaned = re.sub(r"\s+", " ", _whisper_cleanup()(to_spoken_form(text))).strip()
    return _LETTER_RUN.sub(_join_letters, cleaned)
