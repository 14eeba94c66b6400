#!/bin/sh
# Real-editor check of docs/editors.md's ALE set-up: Vim with ALE lints a file through
# `flake8-xla server` and prints ALE's location list.
#   benchmarks/editors/check_ale.sh /path/to/ale-checkout [/path/to/flake8-xla]
# Needs vim 8.2+ (jobs and channels) and a checkout of dense-analysis/ale.
set -eu
ale=$1
server=${2:-$(command -v flake8-xla)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
printf '[flake8]\nxla-target-version = 2.9\n' > .flake8
printf 'import torch_xla.core.xla_model as xm\n\nxm.mark_step()\n' > train.py
cat > vimrc <<VIM
set nocompatible
set runtimepath^=$ale
filetype plugin on
let g:ale_linters = {'python': ['flake8_xla']}
call ale#linter#Define('python', {
\   'name': 'flake8_xla',
\   'lsp': 'stdio',
\   'executable': '$server',
\   'command': '%e server',
\   'project_root': function('ale#python#FindProjectRoot'),
\   'initialization_options': {'flake8-xla': {'target-version': '2.8'}},
\})
VIM
printf "edit train.py\nsleep 8\ncall writefile([string(ale#engine#GetLoclist(bufnr('')))], 'loclist.txt')\nqa!\n" > check.vim
vim -N -u vimrc --not-a-term -S check.vim > /dev/null 2>&1 || true
cat loclist.txt
