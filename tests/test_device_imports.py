import subprocess
import sys

DEVICE_MODULES = [
    "device",
    "device.audio",
    "device.frontend",
    "device.model",
    "device.encoder",
    "device.engine",
    "device.decoding",
    "device.ctc_prefix",
    "device.offload",
    "device.api",
    "device.intent",
    "offramp.features",
    "offramp.scores",
    "offramp.policy",
    "offramp.calibrate",
    "models.tokenizer",
    "models.text",
]


def test_device_runtime_never_imports_torch():
    code = (
        f"import sys; import {', '.join(DEVICE_MODULES)}; "
        "sys.exit(1 if 'torch' in sys.modules or 'sklearn' in sys.modules else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr or "the device runtime imported torch or sklearn"
