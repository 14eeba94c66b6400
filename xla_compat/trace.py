"""Run a program and report every place its torch calls cut the XLA graph, as lint findings.

    python -m xla_compat.trace [--steps N] [--warmup K] [--format text|concise|json|sarif|github]
                               [--output FILE] [--fail-on CODES] [--project-root DIR]
                               (SCRIPT | -m MODULE) [ARGS...]

Runs the program with ``PJRT_DEVICE=CPU`` unless the environment sets it, stops it at the step
boundary after ``--warmup`` + ``--steps`` steps (all of it without ``--steps``), and prints the
findings. Exit status: the program's own when it failed, 1 when a finding's code starts with one
of ``--fail-on``'s prefixes, else 0. ``xla_compat.trace()`` is the same trace as a context manager
(this module is callable). See docs/trace.md.
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
import types
from typing import List, Optional, Sequence, Tuple

from .tracing.session import Trace  # imports no torch until a trace starts

FORMATS = ("text", "concise", "json", "sarif", "github")


def _split(argv: Sequence[str]) -> Tuple[List[str], List[str]]:
    """The tracer's options, and the program with its arguments (from SCRIPT or ``-m MODULE`` on)."""
    with_value = {"--steps", "--warmup", "--format", "--output", "-o", "--fail-on", "--project-root"}
    options: List[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "-m":
            return options, list(argv[i:])
        if arg == "--":
            return options, list(argv[i + 1:])
        if not arg.startswith("-") or arg == "-":
            return options, list(argv[i:])
        options.append(arg)
        if arg in with_value and i + 1 < len(argv):
            options.append(argv[i + 1])
            i += 1
        i += 1
    return options, []


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m xla_compat.trace",
        usage="%(prog)s [options] (SCRIPT | -m MODULE) [ARGS...]",
        description="Run a PyTorch/XLA program for a few steps and report every host sync, recompile and "
                    "CPU fallback at its source line, with flake8-xla's codes.")
    parser.add_argument("--steps", type=int, default=None, metavar="N",
                        help="stop the program after N steps past warm-up (default: run it to the end)")
    parser.add_argument("--warmup", type=int, default=2, metavar="K",
                        help="steps whose graph compiles are expected (default: 2)")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="report format (default: text, each finding with its help line: how often, where; "
                             "concise: one line each)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    parser.add_argument("--fail-on", default="", metavar="CODES",
                        help="comma-separated code prefixes (XLA303,XLA309) whose warnings make the exit status 1")
    parser.add_argument("--project-root", metavar="DIR",
                        help="the user's code is under DIR (default: the script's directory, or . with -m)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    options, program = _split(list(sys.argv[1:] if argv is None else argv))
    parser = _parser()
    args = parser.parse_args(options)
    if not program or program == ["-m"]:
        parser.error("a SCRIPT or -m MODULE to run is required")
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be at least 1")
    if args.warmup < 0:
        parser.error("--warmup must be at least 0")
    module = program[1] if program[0] == "-m" else None
    script = None if module else program[0]
    if script is not None and not os.path.isfile(script):
        parser.error(f"no such script: {script}")
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    root = args.project_root or (os.path.dirname(os.path.abspath(script)) if script else os.getcwd())

    trace = Trace(project_root=root, warmup=args.warmup, steps=args.steps)
    status = _run(trace, script, module, program[2:] if module else program[1:])
    report = render(trace, args.format)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(report)
    else:
        sys.stdout.write(report)
    sys.stdout.flush()
    if status:
        return status
    prefixes = tuple(p.strip() for p in args.fail_on.split(",") if p.strip())
    failing = [f for f in trace.findings if f.level == "warning" and prefixes and f.code.startswith(prefixes)]
    return 1 if failing else 0


def _run(trace: Trace, script: Optional[str], module: Optional[str], arguments: List[str]) -> int:
    """Run the program under ``trace`` as ``python SCRIPT`` / ``python -m MODULE`` would; its exit status."""
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    sys.argv = [script or module or ""] + arguments
    if script:
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    else:
        sys.path.insert(0, os.getcwd())
    status = 0
    try:
        with trace:
            if script:
                runpy.run_path(script, run_name="__main__")
            else:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if exit_.code not in (None, 0) and not isinstance(exit_.code, int):
            print(exit_.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
        status = 1
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None and sys.path and sys.path[0] != saved_path0:
            sys.path.pop(0)
    return status


def render(trace: Trace, fmt: str) -> str:
    """The trace's findings in one of :data:`FORMATS`; json is the trace document."""
    if fmt == "json":
        import json

        return json.dumps(trace.document(), indent=2) + "\n"
    from flake8_xla.output.formats import Finding, render_concise, render_github, render_sarif, render_text
    from flake8_xla.rule import Diagnostic

    lint = [Finding(f.path, Diagnostic(f.line, 0, f.code, f.message, level=f.level, help=f.help))
            for f in trace.findings]
    if fmt == "sarif":
        return render_sarif(lint)
    if fmt == "github":
        return render_github(lint)
    # the help says how often and where (the library's line, the shapes): the text report shows it
    text = render_concise(lint) if fmt == "concise" else render_text(lint, show_source=True)
    stopped = ", stopped there" if trace.stopped_early else ""
    summary = (f"Traced {trace.steps_traced} steps ({trace.warmup} warm-up{stopped}; {trace.boundaries} step "
               f"boundaries): {len(lint)} finding{'s' if len(lint) != 1 else ''}.\n")
    return (text if text.endswith("\n") or not text else text + "\n") + summary


class _CallableModule(types.ModuleType):
    """``xla_compat.trace(...)`` is the context manager, whether the attribute is this module or not."""

    def __call__(self, project_root: Optional[str] = None, warmup: int = 2, steps: Optional[int] = None) -> Trace:
        if project_root is None:
            project_root = os.path.dirname(os.path.abspath(sys._getframe(1).f_code.co_filename))
        return Trace(project_root=project_root, warmup=warmup, steps=steps)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    sys.exit(main())
