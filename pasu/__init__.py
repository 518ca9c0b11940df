"""PASU: hybrid device/cloud speech understanding with pilot inference.

`from pasu import understand` is the firmware API; `Understander` holds a loaded model for
repeated and streaming use. They load lazily, so `import pasu.core.audio` stays light.
"""

__version__ = "0.1.0"

_API = {"understand", "Understander", "Understanding", "UnderstandingSession"}


def __getattr__(name: str):
    if name in _API:
        from pasu import api

        return getattr(api, name)
    raise AttributeError(f"module 'pasu' has no attribute {name!r}")


__all__ = sorted(_API)
