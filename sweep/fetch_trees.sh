#!/bin/sh
# Extract the trees listed in repos.txt from bare git mirrors into TREES (default /work/sweep-trees).
# MIRRORS holds one bare repository per entry at $MIRRORS/<owner>+<name>/repo (what the session's
# `fetch` tool produces); any bare clone works, e.g. `git clone --bare https://github.com/OWNER/NAME
# $MIRRORS/OWNER+NAME/repo`.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
TREES=${TREES:-/work/sweep-trees}
MIRRORS=${MIRRORS:-/work/.mirror}
mkdir -p "$TREES"
grep -v '^[[:space:]]*#' "$HERE/repos.txt" | grep -v '^[[:space:]]*$' |
while read -r repo commit paths name; do
    gitdir="$MIRRORS/$(echo "$repo" | tr / +)/repo"
    dest="$TREES/$name"
    if [ -d "$dest" ]; then echo "skip $name (exists)"; continue; fi
    mkdir -p "$dest"
    if [ "$paths" = "." ]; then set -- ; else set -- $(echo "$paths" | tr , ' '); fi
    git --git-dir="$gitdir" archive "$commit" -- "$@" | tar -x -C "$dest"
    echo "$repo $commit" > "$dest/.sweep-origin"
    echo "$name: $(find "$dest" -type f | wc -l) files"
done
