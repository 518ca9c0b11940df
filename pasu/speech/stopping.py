"""Hard stops for Whisper decoding on unpadded input, where Whisper often never emits its
end-of-text token and repeats itself instead ("5 5 5 5 ...", "go forward 10 meters, go forward
10 meters, ..."): a token budget from the audio's length, and a repetition stop that ends the
text at the first copy of a block the decoder keeps repeating.
"""

from collections.abc import Sequence

MAX_BLOCK_TOKENS = 12  # the longest repeated phrase looked for
# A block seen this many times in a row is a loop, not speech: three times for a word or two
# ("five five" is a command), twice for a phrase of LONG_BLOCK_TOKENS or more.
REPEATS_TO_STOP = 3
LONG_BLOCK_TOKENS = 4


def token_budget(audio_s: float, tokens_per_s: float = 4.0, slack: int = 10) -> int:
    """The most tokens a clip can need: SLURP's commands run at about 2.5 words a second."""
    return int(tokens_per_s * audio_s) + slack


def repeated_tail(tokens: Sequence[int]) -> int | None:
    """If `tokens` ends with a block of 1 to MAX_BLOCK_TOKENS tokens repeated in a row (3 times,
    or twice for a long block), the length to keep (up to the end of its first copy); else
    None."""
    for block in range(1, MAX_BLOCK_TOKENS + 1):
        repeats = 2 if block >= LONG_BLOCK_TOKENS else REPEATS_TO_STOP
        span = block * repeats
        if len(tokens) < span:
            break
        tail = list(tokens[-span:])
        if all(tail[i] == tail[i % block] for i in range(span)):
            return len(tokens) - span + block
    return None
