#!/bin/sh
# Extract the trees listed in repos.txt from bare git mirrors into TREES (default /work/sweep-trees),
# with the real-code sweep's extractor (see benchmarks/realcode/fetch.sh for MIRRORS and NAME ...).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
TREES=${TREES:-/work/sweep-trees} MANIFEST="$HERE/repos.txt" ORIGIN=.sweep-origin \
    exec "$HERE/../benchmarks/realcode/fetch.sh" "$@"
