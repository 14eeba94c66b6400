"""Fixes for the mechanical TorchTPU rewrites, driven by each row's ``fix`` data.

Kinds: ``delete`` (the call's statement), ``replace`` (the call becomes a text), ``rename`` (the
callee), ``value`` (a string literal argument), ``master_print`` (a print under a local-rank test).
A fix is built only for the argument lists the row accepts; anything else is left to a human.
"""
from __future__ import annotations

import ast
import re
import tokenize
from typing import List, Optional, Tuple, Union

from ..fixing import Edit, Fix, FixSite, NoFix, PlannedImport, removal_edits
from ..fixing.edits import alone_on_its_lines, statement_removal
from ..fixing.lines import line_ending
from ..tables.fixes import Rewrite, enclosing_statement, reach, source_tokens
from .matching import MigrationUse, argument_value

_ROOTS = re.compile(r"(?<![\w.])(torch|os)\.")  # torch.tpu.x is reached through torch
# where a comparison put in place of a call keeps its meaning without parentheses
_BARE_PARENTS = (ast.Expr, ast.Assign, ast.AnnAssign, ast.Return, ast.If, ast.While, ast.Assert, ast.BoolOp,
                 ast.keyword, ast.IfExp)
MASTER = 'int(os.environ.get("{rank}", "0")) == 0'


_UNFIT = ("the rewrite does not fit how this use is written (a statement sharing its line, a call over several "
          "lines with fd= or local=, a name torch or os already means something else): apply it by hand")


def build_fix(use: MigrationUse, site: FixSite) -> Union[Fix, NoFix, None]:
    row, ref = use.row, use.ref
    if not use.mechanical:
        return None  # a human's rewrite (the row's, or this use's: see MigrationUse.why)
    if row is not None and row.kind == "device_string":
        return _device_string(use, site)
    if row is None or row.fix is None or ref is None:
        return use.env is not None and _env_fix(use, site) or None
    if row.fix.kind == "delete_import":
        edits = removal_edits(site.lines, [(use.node, use.node.names)], site.parents)
        return Fix(f"Remove the unused {use.api}", tuple(edits), True) if edits else None
    call = ref.call
    if call is None:
        return None
    built = _BUILDERS[row.fix.kind](use, call, site)
    if built is None:
        return NoFix(_UNFIT)
    edits, imports = built
    return Fix(f"Migrate {use.api} to TorchTPU", tuple(edits), True, tuple(imports))


Built = Optional[Rewrite]


def _statement(call: ast.Call, site: FixSite) -> Optional[ast.Expr]:
    parent = site.parents.get(id(call))
    return parent if type(parent) is ast.Expr and parent.value is call else None


def _delete(use: MigrationUse, call: ast.Call, site: FixSite) -> Built:
    stmt = _statement(call, site)
    if stmt is None:
        return None
    edits = statement_removal(site.lines, stmt, site.parents)
    return None if edits is None else (edits, [])


def _with_roots(text: str, use: MigrationUse, site: FixSite) -> Optional[Tuple[str, List[PlannedImport]]]:
    """``text`` with its ``torch.``/``os.`` prefixes spelled as the file reaches them, and the imports needed."""
    planned: List[PlannedImport] = []
    prefixes = {}
    for module in sorted(set(_ROOTS.findall(text))):
        reached = reach(site, module, use.ref)
        if reached is None:
            return None
        prefixes[module], needed = reached
        planned.extend(needed)
    return _ROOTS.sub(lambda m: prefixes[m.group(1)] + ".", text), planned


def _replace(use: MigrationUse, call: ast.Call, site: FixSite) -> Built:
    reached = _with_roots(use.row.fix.to, use, site)
    if reached is None:
        return None
    text, planned = reached
    parent = site.parents.get(id(call))
    bare = isinstance(parent, _BARE_PARENTS) or (type(parent) is ast.UnaryOp and type(parent.op) is ast.Not) or \
        (type(parent) is ast.Call and parent.func is not call)
    if not bare and not re.fullmatch(r"[\w.]+\(.*\)", text):
        text = f"({text})"
    return [Edit(site.lines.start(call), site.lines.end(call), text)], planned


def _rename(use: MigrationUse, call: ast.Call, site: FixSite) -> Built:
    reached = _with_roots(use.row.fix.to, use, site)
    if reached is None:
        return None
    text, planned = reached
    return [Edit(site.lines.start(call.func), site.lines.end(call.func), text)], planned


def _value(use: MigrationUse, call: ast.Call, site: FixSite) -> Built:
    node = argument_value(use.row, call)
    edit = None if node is None else _literal(node, use.row.fix.to, site)
    return None if edit is None else ([edit], [])


def _device_string(use: MigrationUse, site: FixSite) -> Optional[Fix]:
    """``"xla"`` -> ``"tpu"``, ``"xla:0"`` -> ``"tpu:0"``, in the literal's own quotes."""
    edit = _literal(use.node, use.row.fix.to, site)
    return None if edit is None else Fix(f"Name the device {edit.text[1:-1]}", (edit,), True)


def _literal(node: ast.Constant, to: str, site: FixSite) -> Optional[Edit]:
    """The string literal ``node`` rewritten to ``to`` in its own quotes, keeping a device index ("xla:0" ->
    "tpu:0"); None for a prefixed or implicitly concatenated literal."""
    written = site.lines.text(node)
    quote = written[-1]
    if written[0] != quote:
        return None
    return Edit(site.lines.start(node), site.lines.end(node), f"{quote}{new_value(node.value, to)}{quote}")


def new_value(value: str, to: str) -> str:
    """What a fix of kind value writes for the string ``value``: ``to``, keeping a device index ("xla:0" ->
    "tpu:0")."""
    return to + (value[len("xla"):] if value.startswith("xla:") else "")


def _master_print(use: MigrationUse, call: ast.Call, site: FixSite) -> Built:
    """``xm.master_print(a, fd=f, flush=True)`` alone on its lines -> ``if <rank 0>:`` + ``print(a, file=f,
    flush=True)``. master_print's default is the global master (``local=False``): RANK; ``local=True``: LOCAL_RANK.
    A call over several lines keeps its argument text as written when it has no ``fd=`` or ``local=``."""
    stmt = _statement(call, site)
    if stmt is None or any(type(a) is ast.Starred for a in call.args[1:]):
        return None
    lines = site.lines
    keywords = {k.arg: k.value for k in call.keywords}
    local = keywords.pop("local", None)
    if local is not None and not (type(local) is ast.Constant and type(local.value) is bool):
        return None
    if set(keywords) - {"fd", "flush"}:
        return None
    line = lines.lines[stmt.lineno - 1]
    indent = line[:len(line) - len(line.lstrip())]
    if lines.source[lines.line_start(stmt.lineno):lines.start(stmt)] != indent:
        return None  # shares its line with another statement
    rank = "LOCAL_RANK" if local is not None and local.value else "RANK"
    reached = _with_roots(MASTER.format(rank=rank), use, site)
    if reached is None:
        return None
    test, planned = reached
    if stmt.lineno != stmt.end_lineno:
        if local is not None or "fd" in keywords or not alone_on_its_lines(lines, stmt):
            return None
        arguments = lines.source[lines.end(call.func):lines.end(call)]  # "(...)" as written, comments too
    else:
        passed = [lines.text(a) for a in call.args]
        passed += [f"{'file' if name == 'fd' else name}={lines.text(keywords[name])}" for name in ("fd", "flush")
                   if name in keywords]
        arguments = f"({', '.join(passed)})"
    step = "\t" if indent.startswith("\t") else "    "
    text = f"if {test}:{line_ending(line) or chr(10)}{indent}{step}print{arguments}"
    return [Edit(lines.start(stmt), lines.end(stmt), text)], planned


def _env_fix(use: MigrationUse, site: FixSite) -> Optional[Fix]:
    """``os.environ["PJRT_DEVICE"] = "TPU"`` (or ``setdefault``) alone as a statement goes."""
    stmt = enclosing_statement(use.node, site.parents)
    simple = (type(stmt) is ast.Assign and len(stmt.targets) == 1 and type(stmt.targets[0]) is ast.Subscript
              and stmt.targets[0].slice is use.node) or \
        (type(stmt) is ast.Expr and type(stmt.value) is ast.Call and use.ref.qualname == "os.environ.setdefault"
         and stmt.value.args and stmt.value.args[0] is use.node)
    if not simple:
        return None
    edits = statement_removal(site.lines, stmt, site.parents)
    if edits is None:
        return None
    # unsafe: another module or a child process may read what the statement set
    return Fix(f"Remove {use.api}, which TorchTPU does not read", tuple(edits), False)


def _unwrap_with(use: MigrationUse, call: ast.Call, site: FixSite) -> Built:
    """``with torch_xla.step():`` alone on its line -> its body, one level out. Declined where re-indenting
    could change a value (a string spanning lines) or a line has less indentation than the step."""
    item = site.parents.get(id(call))
    stmt = site.parents.get(id(item))
    if type(item) is not ast.withitem or item.optional_vars is not None or type(stmt) is not ast.With \
            or len(stmt.items) != 1:
        return None
    lines = site.lines
    first = stmt.body[0]
    if first.lineno == stmt.lineno or not _alone(lines, stmt.lineno):
        return None
    outer = lines.source[lines.line_start(stmt.lineno):lines.start(stmt)]
    inner = lines.source[lines.line_start(first.lineno):lines.start(first)]
    if not inner.startswith(outer) or inner == outer or _strings_span_lines(lines.text(stmt)):
        return None
    step = len(inner) - len(outer)
    body = []
    for number in range(stmt.lineno + 1, stmt.end_lineno + 1):
        text = lines.lines[number - 1]
        if not text.strip():
            body.append(text.lstrip(" \t"))  # a blank line keeps its ending
        elif text[:step].isspace() and len(text) > step:
            body.append(text[step:])
        else:
            return None
    start, end = lines.line_start(stmt.lineno), lines.line_end(stmt.end_lineno)
    return [Edit(start, end, "".join(body))], []


def _alone(lines, lineno: int) -> bool:
    """The ``with`` header is the only thing on its line, but for a comment."""
    header = lines.lines[lineno - 1].strip()
    return header.endswith(":") or "#" in header and header.split("#", 1)[0].rstrip().endswith(":")


def _strings_span_lines(text: str) -> bool:
    tokens = source_tokens(text)
    if tokens is None:
        return True
    return any(t.type == tokenize.STRING and t.start[0] != t.end[0] for t in tokens) or \
        any(t.type == getattr(tokenize, "FSTRING_START", -1) for t in tokens)


_BUILDERS = {"delete": _delete, "replace": _replace, "rename": _rename, "value": _value,
             "master_print": _master_print, "unwrap_with": _unwrap_with}
