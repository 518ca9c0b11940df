#!/usr/bin/env bash
# Creates .venv at the repo root with everything PASU needs, on a fresh Debian machine.
# Idempotent: a second run only checks. Usage: bash scripts/setup.sh [--no-system] [--no-train]
set -euo pipefail
cd "$(dirname "$0")/.."

WITH_SYSTEM=1
WITH_TRAIN=1
for arg in "$@"; do
  case "$arg" in
    --no-system) WITH_SYSTEM=0 ;;
    --no-train) WITH_TRAIN=0 ;;
    *) echo "unknown option $arg" >&2; exit 2 ;;
  esac
done

if [ "$WITH_SYSTEM" = 1 ]; then
  bash scripts/install-system-deps.sh
fi

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check)
"${PIP[@]}" --upgrade "pip>=24" "setuptools>=77.0.3,<81" wheel
# torch first, pinned, so that nothing later pulls a CUDA build (the cloud's MiniLM intent
# model needs it too, so it is installed even with --no-train).
"${PIP[@]}" "torch==2.13.0"
EXTRAS="device,eval,cloud,azure,dev"
if [ "$WITH_TRAIN" = 1 ]; then
  EXTRAS="$EXTRAS,train"
fi
"${PIP[@]}" -e ".[$EXTRAS]"
if [ "$WITH_TRAIN" = 1 ]; then
  "${PIP[@]}" --no-deps "espnet==202511"
fi
echo "PASU environment ready: .venv/bin/pasu"
