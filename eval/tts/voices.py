"""The SLURP-TTS voice catalogue, split into three disjoint groups as SLURP keeps speakers apart.

Test and devel voices are listed by name; train gets every other voice and variant. A voice
name (`Voice.slug`) appears in every clip's file name, so group membership can be checked from
a corpus alone. Test and devel espeak-ng accents are held out with all their variants.
"""

import re
from dataclasses import dataclass

from pasu.core.errors import SynthesisError

ENGINES = ("espeak", "mbrola", "flite", "festival", "pico", "piper")


@dataclass(frozen=True)
class Voice:
    """One speaker: an engine, its voice id and, for espeak-ng, a voice variant."""

    engine: str
    name: str
    variant: str = ""

    @property
    def slug(self) -> str:
        """File-name-safe identifier, e.g. `espeak-en-us-nyc` or `espeak-en-029-f3`."""
        raw = f"{self.engine}-{self.name}" + (f"-{self.variant}" if self.variant else "")
        return re.sub(r"[^a-z0-9]+", "-", raw.lower()).strip("-")


# espeak-ng's English accents; the held-out ones are owned by test/devel with every variant.
ESPEAK_ACCENTS = (
    "en-gb",
    "en-us",
    "en-029",
    "en-gb-x-gbclan",
    "en-gb-x-gbcwmd",
    "en-gb-scotland",
    "en-gb-x-rp",
    "en-us-nyc",
)

# espeak-ng 1.51's variants (Debian bookworm), minus whispered and special-effect ones that no
# SLURP speaker resembles. Fixed here, not read from the machine, so plans are reproducible.
ESPEAK_VARIANTS = (
    "adam",
    "Alex",
    "Alicia",
    "Andrea",
    "Andy",
    "Annie",
    "AnxiousAndy",
    "antonio",
    "aunty",
    "belinda",
    "benjamin",
    "boris",
    "caleb",
    "croak",
    "david",
    "Denis",
    "Diogo",
    "ed",
    "edward",
    "edward2",
    "f1",
    "f2",
    "f3",
    "f4",
    "f5",
    "Gene",
    "Gene2",
    "grandma",
    "grandpa",
    "gustave",
    "Henrique",
    "Hugo",
    "iven",
    "iven2",
    "iven3",
    "iven4",
    "Jacky",
    "john",
    "kaukovalta",
    "klatt",
    "klatt2",
    "klatt3",
    "klatt4",
    "klatt5",
    "klatt6",
    "Lee",
    "linda",
    "m1",
    "m2",
    "m3",
    "m4",
    "m5",
    "m6",
    "m7",
    "m8",
    "marcelo",
    "Marco",
    "Mario",
    "max",
    "Michael",
    "michel",
    "miguel",
    "Mike",
    "norbert",
    "Nguyen",
    "pablo",
    "paul",
    "pedro",
    "quincy",
    "RicishayMax",
    "RicishayMax2",
    "RicishayMax3",
    "rob",
    "robert",
    "sandro",
    "shelby",
    "steph",
    "steph2",
    "steph3",
    "travis",
    "Tweaky",
    "victor",
    "zac",
)

TEST_VOICES = (
    Voice("piper", "en_US-joe-medium"),
    Voice("pico", "en-US"),
    Voice("festival", "cmu_us_slt_arctic_hts"),
    Voice("mbrola", "us1"),
    Voice("espeak", "en-us-nyc"),
    Voice("espeak", "en-gb-x-rp"),
)

DEVEL_VOICES = (
    Voice("pico", "en-GB"),
    Voice("mbrola", "us2"),
    Voice("flite", "slt"),
    Voice("espeak", "en-gb-scotland"),
    Voice("festival", "ked_diphone"),
)

_HELD_OUT = TEST_VOICES + DEVEL_VOICES
_HELD_OUT_ACCENTS = {v.name for v in _HELD_OUT if v.engine == "espeak"}

# Train voices by engine family; the corpus planner draws a family by weight, then a voice.
TRAIN_FAMILIES: dict[str, tuple[Voice, ...]] = {
    "espeak": tuple(
        Voice("espeak", accent, variant)
        for accent in ESPEAK_ACCENTS
        if accent not in _HELD_OUT_ACCENTS
        for variant in ("", *ESPEAK_VARIANTS)
    ),
    "mbrola": (Voice("mbrola", "en1"), Voice("mbrola", "us3")),
    "flite": (
        Voice("flite", "kal"),
        Voice("flite", "kal16"),
        Voice("flite", "awb"),
        Voice("flite", "rms"),
    ),
    "festival": (Voice("festival", "kal_diphone"),),
}
TRAIN_FAMILY_WEIGHTS = {"espeak": 0.4, "mbrola": 0.2, "flite": 0.25, "festival": 0.15}

# MBROLA diphone voices of other languages that espeak-ng drives with English phonemes (its
# `mb-XX-en` voices): new speakers for the renditions added after the first six, five of them
# female. Before them every non-espeak train voice was male, while three of the four test
# voices from unseen engines are female (see README, "Voice perturbation"). sw2-en is left out:
# its diphone set lacks English pairs and espeak-ng replaces them with silence.
FOREIGN_MBROLA_VOICES = tuple(
    Voice("mbrola", f"{name}-en")
    for name in (
        "af1", "de1", "de2", "de3", "de4", "de5", "de6", "fr1",
        "fr4", "gr2", "hu1", "nl2", "pl1", "ro1", "sw1",
    )
)  # fmt: skip
# Families of the extra renditions, with Festival's British diphone voice beside them.
EXTRA_TRAIN_FAMILIES: dict[str, tuple[Voice, ...]] = {
    "mbrola": FOREIGN_MBROLA_VOICES,
    "festival": (Voice("festival", "rab_diphone"),),
}
EXTRA_TRAIN_FAMILY_WEIGHTS = {"mbrola": 0.8, "festival": 0.2}

TRAIN_VOICES = tuple(
    v
    for families in (TRAIN_FAMILIES, EXTRA_TRAIN_FAMILIES)
    for family in families.values()
    for v in family
)

VOICE_GROUPS: dict[str, tuple[Voice, ...]] = {
    "train": TRAIN_VOICES,
    "devel": DEVEL_VOICES,
    "test": TEST_VOICES,
}

_BY_SLUG = {v.slug: v for group in VOICE_GROUPS.values() for v in group}


def group_of(voice: Voice) -> str:
    """Which split's group a voice belongs to."""
    for split, voices in VOICE_GROUPS.items():
        if voice in voices:
            return split
    raise SynthesisError(f"voice {voice.slug} is in no group")


def voice_by_slug(slug: str) -> Voice:
    """Look a voice up by its slug; unknown names get a clear error with examples."""
    try:
        return _BY_SLUG[slug]
    except KeyError:
        examples = ", ".join(v.slug for v in TEST_VOICES + DEVEL_VOICES)
        raise SynthesisError(
            f"unknown voice {slug!r}; see `pasu data voices` (e.g. {examples})"
        ) from None
