#!/usr/bin/env bash
# Installs the build into a temporary prefix (cmake --install) and runs the installed binary from
# another folder, with no OUTLIERLENS_DATA_DIR: it must find its sample data under
# <prefix>/share/outlierlens, not in the source tree it was built from, and run a demo model there.
# usage: check_install.sh BUILD_DIR
set -euo pipefail
BUILD="$1"
PREFIX="$(mktemp -d)"
trap 'rm -rf "$PREFIX"' EXIT
fail() { echo "check_install: $*" >&2; exit 1; }

cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
unset OUTLIERLENS_DATA_DIR
cd "$(mktemp -d)"
APP="$PREFIX/bin/outlierlens"
DATA="$PREFIX/share/outlierlens/sample_data"

for f in "$APP" "$DATA/SOURCES.md" "$DATA/models/bert-mnli-vanilla/model.safetensors" \
         "$PREFIX/share/applications/outlierlens.desktop" \
         "$PREFIX/share/icons/hicolor/scalable/apps/outlierlens.svg" \
         "$PREFIX/share/icons/hicolor/256x256/apps/outlierlens.png"; do
  [ -e "$f" ] || fail "$f was not installed"
done
[ ! -e "$PREFIX/bin/outlierlens-source-dir" ] || fail "the build tree's marker was installed"

version="$("$APP" --version)"
grep -qxF "sample data: $DATA" <<<"$version" || fail "--version does not name the installed data: $version"

# The command-line path that resolves sample_data/... names (train --corpus etc.) and a real model run.
out="$("$APP" inspect --model "$DATA/models/bert-mnli-vanilla" --text "The cat sat on the mat." \
        --pair "A cat is sitting." 2>&1)" || fail "installed inspect failed: $out"
grep -qiE "entailment|neutral|contradiction" <<<"$out" || fail "no prediction from the installed binary: $out"
if command -v desktop-file-validate >/dev/null; then
  desktop-file-validate "$PREFIX/share/applications/outlierlens.desktop" || fail "invalid .desktop entry"
fi
echo "check_install: installed to a temporary prefix; --version and inspect work from $(pwd)"
