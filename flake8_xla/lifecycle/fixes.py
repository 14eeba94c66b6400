"""Fixes for the lifecycle rules, driven by each table row's ``fix`` data.

Kinds: ``rename`` (the callee, mapping its arguments by the row's signature), ``rename_module``
(an aliased or from- import of a moved module), ``delete_import``, ``rename_keyword``,
``keyword_arguments`` (positional -> keyword) and ``drop_arguments``. A fix never introduces an
upstream API newer than the target: before the replacement's release it uses the companion.
"""
from __future__ import annotations

import ast
import tokenize
import re
from typing import List, Optional, Tuple, Union

from ..fixing import Edit, Fix, FixSite, NoFix, removal_edits
from ..analysis import syntax
from ..fixing.lines import LineModel
from .table import ApiRow, LifecycleUse, api_table
from ..tables.fixes import Rewrite, enclosing_statement, reach, source_tokens
from ..versions import Version


def build_fix(use: LifecycleUse, site: FixSite) -> Union[Fix, NoFix, None]:
    row = use.row
    kind = row.fix.kind
    if kind == "manual":
        return NoFix(manual_reason(row))
    if use.ref is None:
        return None
    builder = _BUILDERS.get(kind)
    if builder is None:
        return None
    built = builder(use, site)
    if built is None or isinstance(built, NoFix):
        return built
    edits, imports = built
    title = _TITLES[kind](use, site.target)
    # a rewrite to the companion adds a dependency on it: never safe, whatever the row says
    companion = kind == "rename" and _is_companion(destination(row, site.target))
    # what the applied fix still asks of the user, or what it changes (why the row is unsafe)
    return Fix(title, tuple(edits), row.fix.safety == "safe" and not companion, tuple(imports), row.fix.note)


def manual_reason(row: ApiRow) -> str:
    """Why a row's uses are left to a human (`fix` prints it under each one)."""
    if row.fix.reason:
        return row.fix.reason
    if row.replacement:
        caveat = f": {row.instead}" if row.instead else ""
        return f"{row.replacement} is no drop-in replacement{caveat}"
    if row.kind == "env_var":
        return "what replaces the variable is not another variable with the same meaning"
    return "torch_xla has nothing to rewrite it to"


def _is_companion(dotted: Optional[str]) -> bool:
    return bool(dotted) and dotted.split(".")[0] == "xla_compat"


Built = Union[Rewrite, NoFix, None]


def destination(row: ApiRow, target: Version) -> Optional[str]:
    """What a rename writes: the upstream replacement when the target has it, else the companion."""
    upstream = row.replacement if row.fix.to != "companion" else None
    if upstream and (row.replacement_since is None or target >= row.replacement_since):
        return upstream.rstrip("()=")
    return row.companion


def _rename(use: LifecycleUse, site: FixSite) -> Built:
    locator = site.lines
    ref = use.ref
    if ref.is_import or ref.qualname not in use.row.names or use.node is not ref.node:
        return None
    dest = destination(use.row, site.target)
    if not dest or "." not in dest:
        return None
    module, attr = dest.rsplit(".", 1)
    if _compares_with_replacement(ref.node, dest, site):
        return NoFix(f"the statement also uses {dest} (a test comparing the two): rewriting it would prove nothing")
    reached = reach(site, module, ref)
    if reached is None:
        return None
    prefix, imports = reached
    edits = [Edit(locator.start(ref.node), locator.end(ref.node), f"{prefix}.{attr}")]
    call = ref.call
    if call is not None:
        arguments = _map_arguments(use.row, call, locator, dest)
        if not isinstance(arguments, list):
            return arguments
        edits.extend(arguments)
    return edits, imports


def _compares_with_replacement(node: ast.AST, dest: str, site: FixSite) -> bool:
    """Whether the statement holding ``node`` also uses ``dest`` itself."""
    statement = enclosing_statement(node, site.parents)
    if statement is None:
        return False
    # a compound statement's header only (an `if` test, a `with` item), not its body
    header = [getattr(statement, f) for f in statement._fields if f not in ("body", "orelse", "finalbody", "handlers")]
    nodes = [n for part in header for item in (part if isinstance(part, list) else [part])
             if isinstance(item, ast.AST) for n in syntax.walk([item])]
    qualnames = site.qualnames
    return any(qualnames.get(id(n)) == dest for n in nodes if n is not node)


def _arguments_in_order(call: ast.Call) -> List[ast.AST]:
    return sorted([*call.args, *call.keywords], key=lambda n: (n.lineno, n.col_offset))


def _literal(node: ast.AST) -> Optional[str]:
    if type(node) is ast.Constant and (node.value is None or type(node.value) in (int, bool, str)):
        return repr(node.value)
    return None


def _map_arguments(row: ApiRow, call: ast.Call, locator: LineModel, dest: str) -> Union[List[Edit], NoFix]:
    """Edits that turn the old call's arguments into the new callee's (``dest``), or why they cannot be."""
    fix = row.fix
    if not fix.signature:
        return []
    if any(type(a) is ast.Starred for a in call.args) or any(k.arg is None for k in call.keywords):
        return NoFix("a *args or **kwargs argument: which parameters it fills cannot be read")
    mapping = dict(fix.arguments)
    edits: List[Edit] = []
    deleted: List[ast.AST] = []
    passed: List[Tuple[str, ast.AST, Optional[int]]] = []
    for index, arg in enumerate(call.args):
        if index >= len(fix.signature):
            return NoFix(f"more positional arguments than the {len(fix.signature)} it takes")
        passed.append((fix.signature[index], arg, index))
    passed.extend((k.arg, k, None) for k in call.keywords)
    for name, node, index in passed:
        if name not in fix.signature or name not in mapping:
            return NoFix(f"{dest}() has no counterpart of its `{name}` argument")
        new = mapping[name]
        value = node.value if type(node) is ast.keyword else node
        if new is None:  # the new API has no such parameter and needs no replacement for it
            deleted.append(node)
        elif isinstance(new, dict):
            literal = _literal(value)
            text = new.get(literal if literal is not None else "", None) if literal is not None else None
            if text is None:
                accepted = ", ".join(k for k in new if k)
                return NoFix(f"`{name}={locator.text(value)}` has no counterpart in {dest}() "
                             f"(only {accepted} {'is' if len(new) == 1 else 'are'} mapped)")
            if text == "":
                deleted.append(node)
            else:
                edits.append(Edit(locator.start(node), locator.end(node), text))
        elif index is not None:
            if fix.keep_positional is not None and index >= fix.keep_positional:
                edits.append(Edit(locator.start(node), locator.start(node), f"{new}="))
        elif new != name:
            start = locator.start(node)
            edits.append(Edit(start, start + len(name), str(new)))
    if deleted:
        removal = _delete_arguments(call, deleted, locator)
        if isinstance(removal, NoFix):
            return removal
        edits.extend(removal)
    return edits


def _delete_arguments(call: ast.Call, doomed: List[ast.AST], locator: LineModel) -> Union[List[Edit], NoFix]:
    """Remove whole arguments with their commas."""
    ordered = _arguments_in_order(call)
    keep = [a for a in ordered if a not in doomed]
    if not keep:
        return [Edit(locator.end(call.func), locator.end(call), "()")]
    # a positional argument after a removed one would shift position: only keywords may follow
    for index, arg in enumerate(ordered):
        if arg in doomed and any(type(later) is not ast.keyword for later in ordered[index + 1:] if later in keep):
            return NoFix("removing an argument would shift the positional arguments after it")
    # the removed arguments at the end go in one edit, with the comma after the last kept one
    tail = len(ordered)
    while ordered[tail - 1] in doomed:
        tail -= 1
    edits = [Edit(locator.start(arg), locator.start(ordered[index + 1]), "")
             for index, arg in enumerate(ordered[:tail]) if arg in doomed]
    if tail < len(ordered):
        edits.append(Edit(locator.end(ordered[tail - 1]), locator.end(ordered[-1]), ""))
    for edit in edits:
        if _has_comment(locator.source[edit.start:edit.end]):
            # `nprocs=8,  # use all 8 cores`: the comment would go with it
            return NoFix("a comment sits in what the fix would delete")
    return edits


def _has_comment(text: str) -> bool:
    """Whether a stretch of source between arguments holds a comment (tokens, so `"#"` is no comment)."""
    if "#" not in text:
        return False
    tokens = source_tokens(text)
    return tokens is None or any(t.type == tokenize.COMMENT for t in tokens)  # unsure: keep the argument


def _drop_arguments(use: LifecycleUse, site: FixSite) -> Built:
    locator = site.lines
    call = use.ref.call
    if call is None:
        return None
    node = use.node
    flagged = next((a for a in [*call.args, *call.keywords] if a is node or getattr(a, "value", None) is node), None)
    if flagged is None:
        return None
    edits = _delete_arguments(call, [flagged], locator)
    return (edits, []) if isinstance(edits, list) else edits


def _rename_keyword(use: LifecycleUse, site: FixSite) -> Built:
    locator = site.lines
    call, arg = use.ref.call, use.row.argument
    new = (use.row.replacement or "").rstrip("=")
    if call is None or arg is None or not arg.keyword or not new.isidentifier():
        return None
    if any(k.arg == new for k in call.keywords):
        return NoFix(f"both `{arg.keyword}=` and `{new}=` are given")
    edits = [Edit(locator.start(k), locator.start(k) + len(arg.keyword), new) for k in call.keywords
             if k.arg == arg.keyword]
    return (edits, []) if edits else None


def _keyword_arguments(use: LifecycleUse, site: FixSite) -> Built:
    locator = site.lines
    call, arg, signature = use.ref.call, use.row.argument, use.row.fix.signature
    if call is None or arg is None or arg.position is None or not signature:
        return None
    if any(type(a) is ast.Starred for a in call.args) or len(call.args) > len(signature):
        return None
    given = {k.arg for k in call.keywords}
    edits = []
    for index in range(arg.position, len(call.args)):
        name = signature[index]
        if name in given:
            return NoFix(f"`{name}` is given both by position and by keyword")
        edits.append(Edit(locator.start(call.args[index]), locator.start(call.args[index]), f"{name}="))
    return edits, []


_FROM_MODULE = re.compile(r"from\s+([\w.\s]+?)\s+import\b")


def _rename_module(use: LifecycleUse, site: FixSite) -> Built:
    locator = site.lines
    ref, row = use.ref, use.row
    dest = destination(row, site.target)
    if not ref.is_import or not dest or not dest.startswith("torch_xla"):
        return None  # the companion spmd() is a function, not an importable module
    moved = next((n for n in row.names if syntax.within_dotted(ref.qualname, n)), None)
    if moved is None:
        return None
    stmt = ref.statement
    if type(stmt) is ast.ImportFrom:
        if stmt.level or not stmt.module or not syntax.within_dotted(stmt.module, moved):
            return None
        if stmt.module == moved and any(a.name in row.fix.except_names or a.name == "*" for a in stmt.names):
            return None
        new_module = dest + stmt.module[len(moved):]
        if any(_gone(f"{new_module}.{a.name}", site.target) for a in stmt.names):
            return None  # the name did not survive in the new module either (e.g. using_pjrt)
        match = _FROM_MODULE.match(locator.text(stmt))
        if match is None or re.sub(r"\s", "", match.group(1)) != stmt.module:
            return None
        start = locator.start(stmt) + match.start(1)
        return [Edit(start, start + len(match.group(1)), dest + stmt.module[len(moved):])], []
    alias = use.node if type(use.node) is ast.alias else None
    if alias is None or not alias.asname or alias.name != moved:
        return None  # without an alias every use spells the old path
    if any(_under(r.qualname, moved, row.fix.except_names) for r in site.references):
        return None
    start = locator.start(alias)
    if locator.source[start:start + len(moved)] != moved:
        return None
    return [Edit(start, start + len(moved), dest)], []


def _gone(qualname: str, target: Version) -> bool:
    hit = api_table().lookup(qualname)
    return hit is not None and hit[0].state(target) == "removed"


def _under(qualname: str, module: str, names: Tuple[str, ...]) -> bool:
    if not qualname.startswith(module + "."):
        return False
    return qualname[len(module) + 1:].split(".")[0] in names


def _delete_import(use: LifecycleUse, site: FixSite) -> Built:
    locator = site.lines
    ref = use.ref
    stmt = ref.statement
    if not ref.is_import or stmt is None:
        return None
    if type(stmt) is ast.ImportFrom:
        aliases = list(stmt.names)
    else:
        aliases = [a for a in stmt.names if a is use.node]
    if type(stmt) is ast.Import and any(a.asname for a in aliases):
        return None  # the alias may be used later; a human decides
    edits = removal_edits(locator, [(stmt, aliases)], site.parents)
    return (edits, []) if edits is not None else None


def _title_rename(use: LifecycleUse, target: Version) -> str:
    return f"Replace with {destination(use.row, target)}"


_BUILDERS = {
    "rename": _rename,
    "rename_module": _rename_module,
    "delete_import": _delete_import,
    "rename_keyword": _rename_keyword,
    "keyword_arguments": _keyword_arguments,
    "drop_arguments": _drop_arguments,
}
_TITLES = {
    "rename": _title_rename,
    "rename_module": lambda use, target: f"Import {destination(use.row, target)} instead",
    "delete_import": lambda use, target: "Delete the import",
    "rename_keyword": lambda use, target: f"Rename the keyword to {use.row.replacement}",
    "keyword_arguments": lambda use, target: "Pass the arguments as keywords",
    "drop_arguments": lambda use, target: "Remove the argument",
}
