#!/usr/bin/env bash
# Run on the development machine (Debian 12, network) before tests/gpu/check.sh:
# downloads the .deb files of the build dependencies a bare GPU machine may
# lack (oneDNN, cJSON, libpng, libjpeg-turbo, cmocka; about 8 MB) into
# tests/gpu/deps/, which git ignores. Carry that folder to the GPU machine
# (the device tool's `carry: ["tests/gpu/deps"]`); check.sh unpacks them there.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p deps
cd deps
apt-get download libdnnl-dev libdnnl2 ocl-icd-libopencl1 libcjson-dev libcjson1 libpng-dev libpng16-16 \
    zlib1g-dev libjpeg62-turbo-dev libjpeg62-turbo libcmocka-dev libcmocka0
ls -l
