"""The on-device runtime (onnxruntime + numpy, never torch).

`from device import understand` is the firmware API; `Understander` holds a loaded model for
repeated and streaming use. They load lazily, so `import device.audio` stays light.
"""

_API = {"understand", "Understander", "Understanding", "UnderstandingSession"}


def __getattr__(name: str):
    if name in _API:
        from pasu.device import api

        return getattr(api, name)
    raise AttributeError(f"module 'device' has no attribute {name!r}")


__all__ = sorted(_API)
