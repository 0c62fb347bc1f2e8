#!/usr/bin/env bash
# arm64 packages exactly as scripts/emulators.sh cmd_lambda_build does.
set -euo pipefail
cd "$(dirname "$0")"
ROOT="$(cd ../../.. && pwd)"; export PATH="$ROOT/.emulators/venv/bin:$PATH"
export CARGO_ZIGBUILD_ZIG_PATH="$("$ROOT/.emulators/venv/bin/python" -c 'import pathlib, ziglang; print(pathlib.Path(ziglang.__file__).with_name("zig"))')"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}" CARGO_BUILD_JOBS=1
nice -n 10 cargo lambda build --release --arm64 --bin spike-a --bin spike-b --bin spike-c
