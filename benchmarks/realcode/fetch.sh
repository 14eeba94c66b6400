#!/bin/sh
# Materialize the trees of manifest.txt from bare git mirrors into $TREES (default
# /work/realcode-trees). $MIRRORS (default /work/.mirror) holds one repository per entry at
# $MIRRORS/<owner>+<name>/repo (a bare git dir, or a work tree whose .git is used); any clone
# works, e.g. `git clone --bare https://github.com/OWNER/NAME $MIRRORS/OWNER+NAME/repo`.
# Existing trees are kept (delete one to re-extract it). Usage: fetch.sh [NAME ...]
# MANIFEST and ORIGIN (the provenance file written in each tree) let the fix sweep reuse it.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
TREES=${TREES:-/work/realcode-trees}
MIRRORS=${MIRRORS:-/work/.mirror}
MANIFEST=${MANIFEST:-$HERE/manifest.txt}
ORIGIN=${ORIGIN:-.realcode-origin}
mkdir -p "$TREES"
want=" $* "
grep -v '^[[:space:]]*#' "$MANIFEST" | grep -v '^[[:space:]]*$' |
while read -r repo commit paths name; do
    if [ "$want" != "  " ] && ! echo "$want" | grep -q " $name "; then continue; fi
    gitdir="$MIRRORS/$(echo "$repo" | tr / +)/repo"
    [ -d "$gitdir/.git" ] && gitdir="$gitdir/.git"
    dest="$TREES/$name"
    if [ -d "$dest" ]; then echo "skip $name (exists)"; continue; fi
    if ! git --git-dir="$gitdir" cat-file -e "$commit^{commit}" 2>/dev/null; then
        echo "MISSING $name: no commit $commit in $gitdir (fetch $repo first)" >&2; continue
    fi
    mkdir -p "$dest"
    if [ "$paths" = "." ]; then set -- ; else set -- $(echo "$paths" | tr , ' '); fi
    git --git-dir="$gitdir" archive "$commit" -- "$@" | tar -x -C "$dest"
    echo "$repo $commit" > "$dest/$ORIGIN"
    echo "$name: $(find "$dest" -type f | wc -l) files"
done
