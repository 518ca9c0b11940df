#!/usr/bin/env bash
# Installs the Debian packages PASU needs: the offline TTS engines for SLURP-TTS and
# audio tools. Enables Debian's contrib and non-free components (MBROLA voices, SVOX pico).
# Safe to run again: apt skips what is installed. Needs root (or sudo).
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

enable_components() {
  local f=/etc/apt/sources.list.d/debian.sources
  if [ -f "$f" ] && ! grep -q "non-free" "$f"; then
    $SUDO sed -i -E 's/^Components: main$/Components: main contrib non-free/' "$f"
  elif [ -f /etc/apt/sources.list ] && grep -qE '^deb .* main$' /etc/apt/sources.list; then
    $SUDO sed -i -E 's/^(deb .* main)$/\1 contrib non-free/' /etc/apt/sources.list
  fi
}

REQUIRED=(espeak-ng sox libsndfile1 ffmpeg)
OPTIONAL=(mbrola mbrola-us1 mbrola-us2 mbrola-us3 mbrola-en1
          mbrola-af1 mbrola-de1 mbrola-de2 mbrola-de3 mbrola-de4 mbrola-de5 mbrola-de6
          mbrola-fr1 mbrola-fr4 mbrola-gr2 mbrola-hu1 mbrola-nl2 mbrola-pl1 mbrola-ro1 mbrola-sw1
          flite festival festvox-kallpc16k festvox-kdlpc16k festvox-rablpc16k festvox-us-slt-hts
          libttspico-utils libpopt0)

enable_components
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${REQUIRED[@]}"
for pkg in "${OPTIONAL[@]}"; do
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$pkg" \
    || echo "warning: optional package $pkg could not be installed; its voices will be skipped" >&2
done
