#!/usr/bin/env bash
# Run the companion runtime's behaviour tests against an older torch_xla release in its own
# virtualenv: tools/runtime_on_release.sh 2.5.1   (torch of the same version is installed with it)
set -euo pipefail
version="${1:?usage: tools/runtime_on_release.sh TORCH_XLA_VERSION (e.g. 2.5.1)}"
cd "$(dirname "$0")/.."
venv=".venv-torch_xla-${version}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q "torch==${version}" "torch_xla==${version}" pytest
"$venv/bin/python" -m pip install -q --no-deps -e .
"$venv/bin/python" -m pip install -q flake8 PyYAML ast-grep-py
PJRT_DEVICE=CPU "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    tests/runtime/test_runtime_single_process.py tests/runtime/test_runtime_multiprocess.py \
    tests/runtime/test_runtime_checkpoint.py
