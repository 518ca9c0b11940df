"""Configuration of the cloud service: limits, API keys and which models to run."""

import ipaddress
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from pasu.core.errors import ConfigError

SETTINGS_ENV = "PASU_SERVE_SETTINGS"  # JSON, how `pasu serve` hands settings to uvicorn workers
API_KEYS_ENV = "PASU_API_KEYS"  # comma-separated keys


@dataclass(frozen=True)
class ServiceSettings:
    """Everything a service replica needs; replicas share nothing else (stateless)."""

    api_keys: tuple[str, ...] = ()
    require_auth: bool = True
    max_body_bytes: int = 10 * 1024 * 1024
    max_audio_seconds: float = 30.0
    model_workers: int = 1  # utterances decoded at the same time by one replica
    max_queue: int = 8  # waiting requests beyond the busy workers before answering 503
    request_timeout_s: float = 30.0
    retry_after_s: int = 2
    model: str = "whisper-base"
    intent: str = "minilm"
    intent_path: str | None = None
    short_window: bool = False
    cpu_threads: int = 2
    debug_audio_dir: str | None = None  # only when set are received clips kept (for debugging)

    def __post_init__(self):
        if self.require_auth and not self.api_keys:
            raise ConfigError(
                f"no API keys: set {API_KEYS_ENV}, pass --api-keys-file, "
                "or use --no-auth for local development"
            )
        for name in ("max_body_bytes", "model_workers", "cpu_threads"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.max_queue < 0 or self.max_audio_seconds <= 0 or self.request_timeout_s <= 0:
            raise ConfigError("max_queue, max_audio_seconds and request_timeout_s must be positive")

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> "ServiceSettings":
        raw = os.environ.get(SETTINGS_ENV)
        if not raw:
            raise ConfigError(f"{SETTINGS_ENV} is not set; start the service with `pasu serve`")
        values = json.loads(raw)
        values["api_keys"] = tuple(values["api_keys"])
        return cls(**values)


def read_api_keys(path: str | Path | None) -> tuple[str, ...]:
    """Keys from a file (one per line, # comments) and from $PASU_API_KEYS."""
    keys = [k.strip() for k in os.environ.get(API_KEYS_ENV, "").split(",") if k.strip()]
    if path:
        file = Path(path).expanduser()
        if not file.is_file():
            raise ConfigError(f"API key file not found: {file}")
        lines = (line.split("#", 1)[0].strip() for line in file.read_text().splitlines())
        keys.extend(line for line in lines if line)
    short = [k for k in keys if len(k) < 16]
    if short:
        raise ConfigError(f"{len(short)} API key(s) shorter than 16 characters; use longer keys")
    return tuple(dict.fromkeys(keys))


def check_no_auth_host(host: str) -> None:
    """--no-auth is for development on this machine only."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise ConfigError(f"--no-auth is only allowed on a loopback host, not {host}")
