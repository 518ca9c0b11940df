import subprocess
import sys

DEVICE_MODULES = [
    "pasu.device",
    "pasu.device.audio",
    "pasu.device.frontend",
    "pasu.device.model",
    "pasu.device.encoder",
    "pasu.device.engine",
    "pasu.device.decoding",
    "pasu.device.ctc_prefix",
    "pasu.device.offload",
    "pasu.device.api",
    "pasu.device.intent",
    "pasu.offramp.features",
    "pasu.offramp.scores",
    "pasu.offramp.policy",
    "pasu.offramp.calibrate",
    "pasu.models.tokenizer",
    "pasu.models.text",
]


def test_device_runtime_never_imports_torch():
    code = (
        f"import sys; import {', '.join(DEVICE_MODULES)}; "
        "sys.exit(1 if 'torch' in sys.modules or 'sklearn' in sys.modules else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr or "the device runtime imported torch or sklearn"
