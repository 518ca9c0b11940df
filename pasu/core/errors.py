"""User-facing errors: the CLI prints their message without a traceback."""


class PasuError(Exception):
    """Base class for errors caused by input or configuration, not by a bug."""


class DataError(PasuError):
    """A corpus, split or file is missing or malformed."""


class AudioError(PasuError):
    """Audio could not be read or is not usable speech input."""


class SynthesisError(PasuError):
    """A text-to-speech request could not be served (unknown voice, empty text, engine failure)."""


class ConfigError(PasuError):
    """A configuration value is missing or invalid."""
