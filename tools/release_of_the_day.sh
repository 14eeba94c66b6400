#!/usr/bin/env bash
# The torch_xla release between the oldest (2.1) and the newest (2.9) that CI runs the runtime
# tests on for the current commit: one per weekday of the commit's date (Monday 2.2 ... Sunday 2.8),
# the newest patch of each, so that a week of commits covers every claimed release.
#   tools/release_of_the_day.sh [WEEKDAY 1-7]
set -euo pipefail
middle=(2.2.0 2.3.0 2.4.0 2.5.1 2.6.1 2.7.0 2.8.1)
day="${1:-$(git -C "$(dirname "$0")" log -1 --format=%cd --date=format:%u 2>/dev/null || date +%u)}"
echo "${middle[day - 1]}"
