"""XLA001 unused-noqa."""
from typing import Iterable, Sequence

from flake8_xla.fixing import Edit, Fix
from flake8_xla.fixing.lines import LineModel
from flake8_xla.noqa import Directive
from flake8_xla.rule import Diagnostic, Example, FileContext, Rule

HEADER = "import torch_xla\nimport torch_xla.core.xla_model as xm\n\n"


class UnusedNoqa(Rule):
    code = "XLA001"
    name = "unused-noqa"
    summary = "A `# noqa` comment lists an XLA code that suppresses nothing"
    off_by_default = True
    level = "note"  # a stale comment, not a problem of the program
    what_it_does = (
        "Flags the XLA codes of a `# noqa: CODE` comment that suppress no finding of the line it stands on "
        "(every line of a multi-line string it follows, as flake8 reads it; only the first `# noqa` there "
        "counts), as ruff's RUF100. Only codes of rules that run and are selected in this run are judged "
        "(turn it on with `--extend-select XLA001`: `--select XLA001` alone judges no code), and a code that a "
        "rule reports there for another torch_xla release flake8-xla knows is used: a `# noqa: XLA102` for "
        "a deprecation on a newer release stays. Other linters' codes (`E501`, `F401`) and a bare `# noqa` "
        "are never judged. An XLA code that no rule has is a warning on stderr instead, with the file and "
        "line (`unknown code in # noqa: XLA999`). The `flake8-xla` command "
        "only: flake8 owns the noqa comments of a flake8 run (the flake8-noqa plugin judges them there)."
    )
    why_bad = (
        "A `# noqa` written for a finding that has since been fixed, or for a rule that never reported "
        "there, hides the next real finding of that code on the line without anyone deciding it should, "
        "and tells the reader of the code about a problem that is not there."
    )
    fix_safety = ("Safe: removes only the unused XLA codes, or the whole `# noqa` comment when no code is "
                  "left (other text of the comment stays); it never leaves a bare `# noqa`, which would "
                  "suppress everything.")
    references = ("https://docs.astral.sh/ruff/rules/unused-noqa/",
                  "https://flake8.pycqa.org/en/latest/user/violations.html#in-line-ignoring-errors")
    valid = (
        Example("import torch_xla  # noqa: F401\n\ntorch_xla.sync()\n",
                title="another linter's code"),
        Example(HEADER + "xm.mark_step()  # noqa: XLA102\nxm.mark_step()  # noqa: XLA1\n",
                title="codes that suppress a finding, by name or by prefix"),
        Example(HEADER + "xm.mark_step()  # noqa: XLA102\n", target="2.4",
                title="a finding of another release (xm.mark_step() is deprecated from 2.8)"),
        Example(HEADER + "torch_xla.sync()  # noqa\n", title="a bare noqa"),
        Example(HEADER + "device = torch_xla.device()  # noqa: XLA501\n",
                title="a rule that does not run (XLA5xx runs under --migrate-to torchtpu)"),
    )
    invalid = (
        Example(
            "import torch_xla\n\ntorch_xla.sync()  # noqa: XLA102\n",
            expect=((3, 19, "noqa code XLA102 suppresses nothing on this line; remove it",
                     "A stale noqa code hides the next finding of that code on this line."),),
            fixed="import torch_xla\n\ntorch_xla.sync()\n",
        ),
        Example(
            HEADER + "xm.mark_step()  # noqa: XLA101, XLA102, XLA303, E501\n",
            expect=((4, 17, "noqa codes XLA101, XLA303 suppress nothing on this line; remove them",
                     "A stale noqa code hides the next finding of that code on this line."),),
            title="some codes of a comment, beside one that is used and another linter's",
            fixed=HEADER + "xm.mark_step()  # noqa: XLA102, E501\n",
        ),
        Example(
            HEADER + "# noqa: XLA102\ntorch_xla.sync()  # type: ignore  # noqa: XLA303 - synced once\n",
            expect=((4, 1, "noqa code XLA102 suppresses nothing on this line; remove it"),
                    (5, 35, "noqa code XLA303 suppresses nothing on this line; remove it")),
            title="a comment on its own line, and a comment with more to say",
            fixed=HEADER + "torch_xla.sync()  # type: ignore - synced once\n",
        ),
    )

    def check(self, ctx: FileContext) -> Iterable[Diagnostic]:
        return ()  # judged where `# noqa` is applied, once the other rules have run: engine.unused_noqa

    def report(self, directive: Directive, unused: Sequence[str]) -> Diagnostic:
        one = len(unused) == 1
        message = (f"noqa code{'' if one else 's'} {', '.join(unused)} suppress{'es' if one else ''} nothing "
                   f"on this line; remove {'it' if one else 'them'}")
        help = STALE if directive.effective else \
            "flake8 applies only the first `# noqa` of a line, here one inside a string: this comment suppresses nothing."
        return Diagnostic(directive.line, directive.col, self.code, message, directive.line, directive.end_col,
                          help=help)

    def fix(self, lines: LineModel, directive: Directive, unused: Sequence[str]) -> Fix:
        """The comment without ``unused``; without the `# noqa` when no code is left (a bare one would
        suppress everything), and without the comment when nothing else is left."""
        comment, start = directive.comment, directive.comment_col
        codes_at, codes_end = directive.codes_col - start, directive.end_col - start
        kept = [code for code in directive.codes if code not in unused]
        if kept:
            listed = comment[codes_at:codes_end]
            tail = listed[len(listed.rstrip(", \t")):]  # what parted the codes from the rest of the comment
            new = comment[:codes_at] + ", ".join(kept) + tail + comment[codes_end:]
            title = f"Remove the unused noqa code{'s' if len(unused) > 1 else ''}"
        else:
            before, rest = comment[:directive.col - start], comment[codes_end:].strip()
            if before.strip():
                new = before.rstrip() + (f" {rest}" if rest else "")
            else:
                new = rest if not rest or rest.startswith("#") else f"# {rest}"
            title = "Remove the unused noqa comment"
        line_start = lines.line_start(directive.line)
        at = line_start + start
        end = at + len(comment)
        if new:
            return Fix(title, (Edit(at, end, new),), safe=True)
        code_before = lines.source[line_start:at].rstrip()
        if code_before:
            return Fix(title, (Edit(line_start + len(code_before), end, ""),), safe=True)
        return Fix(title, (Edit(line_start, lines.line_end(directive.line), ""),), safe=True)  # a line of its own


STALE = "A stale noqa code hides the next finding of that code on this line."
