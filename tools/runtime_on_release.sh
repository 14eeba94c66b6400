#!/usr/bin/env bash
# Run the companion runtime's tests (all of tests/runtime/) against one torch_xla release, in a
# virtualenv of its own:   tools/runtime_on_release.sh 2.1.0
# torch of the same release is installed with it (X.Y.0 when torch has no such patch release).
# Tests of behaviour the release lacks are deselected by their `release` marker and listed with
# the reason at the end of the run (tests/runtime/conftest.py); nothing is skipped.
set -euo pipefail
version="${1:?usage: tools/runtime_on_release.sh TORCH_XLA_VERSION (e.g. 2.1.0)}"
cd "$(dirname "$0")/.."
venv=".venv-torch_xla-${version}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)
minor="${version%.*}"
needs=("torch_xla==${version}" pytest)
case "$minor" in
    # built against NumPy 1.x, and torch_xla imports numpy without declaring it
    2.1|2.2|2.3) needs+=("numpy<2") ;;
esac
"${pip[@]}" "torch==${version}" "${needs[@]}" 2>/dev/null || "${pip[@]}" "torch==${minor}.0" "${needs[@]}"
"${pip[@]}" --no-deps -e .
# what tests/runtime needs besides torch_xla: the linter's own dependencies, and gcsfs with a GCS emulator
# and s3fs with moto's S3 server for the object-storage tests (the versions setup.cfg pins in its `test` extra)
"${pip[@]}" flake8 PyYAML ast-grep-py gcsfs==2026.10.1 gcp-storage-emulator==2026.7.19 s3fs==2026.9.0 \
    "moto[server]==5.2.6"
start=$(date +%s)
status=0
PJRT_DEVICE=CPU "$venv/bin/python" -m pytest -q -p no:cacheprovider -rfE tests/runtime || status=$?
echo "torch_xla ${version}: tests/runtime took $(( $(date +%s) - start )) s"
exit "$status"
