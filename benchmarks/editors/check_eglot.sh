#!/bin/sh
# Real-editor check of docs/editors.md's Eglot set-up: Emacs in batch mode connects Eglot to
# `flake8-xla server` and prints the Flymake diagnostics, once with the project's settings and
# once with a `select` from .dir-locals.el (eglot-workspace-configuration).
#   benchmarks/editors/check_eglot.sh /path/to/dir-with-eglot.el [/path/to/flake8-xla]
# Needs emacs 26.3+ and eglot.el 1.9+ (on Emacs 29+, the built-in Eglot: pass an empty dir).
set -eu
eglot=$1
server=${2:-$(command -v flake8-xla)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/ws"
cd "$work/ws"
git init -q
printf '[flake8]\nxla-target-version = 2.9\n' > .flake8
printf 'import torch_xla.core.xla_model as xm\n\nxm.mark_step()\nxm.xrt_world_size()\n' > train.py
cat > ../check.el <<ELISP
(add-to-list 'load-path "$eglot")
(setq enable-local-variables :all)
(require 'eglot)
(add-to-list 'eglot-server-programs
             '((python-mode python-ts-mode)
               . ("$server" "server" :initializationOptions (:flake8-xla (:target-version "2.8")))))
(find-file "$work/ws/train.py")
(call-interactively 'eglot)
(dotimes (_ 60) (accept-process-output nil 0.25))
(flymake-start)
(dotimes (_ 20) (accept-process-output nil 0.25))
(dolist (d (flymake-diagnostics))
  (message "line %s: %s" (line-number-at-pos (flymake-diagnostic-beg d)) (flymake-diagnostic-text d)))
(kill-emacs 0)
ELISP
echo "project settings:"
emacs --batch -Q -l ../check.el 2>&1 | grep '^line' || true
printf '((python-mode . ((eglot-workspace-configuration . (:flake8-xla (:select ["XLA101"]))))))\n' > .dir-locals.el
echo "with select XLA101 from .dir-locals.el:"
emacs --batch -Q -l ../check.el 2>&1 | grep '^line' || true
