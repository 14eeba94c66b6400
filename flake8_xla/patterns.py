"""Declarative pattern rules: ast-grep YAML files in ``rules/`` (``xlaNNN_<name>.yml``).

Each file is a valid ast-grep rule (``id``, ``language``, ``rule``, ``message``); flake8-xla's own
fields live under ``metadata:`` (code, docs, examples, and ``resolve``: which qualified names a
metavariable must resolve to, because patterns match text, not bindings). Per file, all pattern
rules share one tree-sitter parse and one ``find_all`` over the union of their rules; each match
is then attributed to its rule(s) and post-filtered through the semantic layer's resolver.
"""
from __future__ import annotations

import functools
import pathlib
import re
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import yaml

from .rule import Diagnostic, Example, FileContext, Rule


@dataclass(frozen=True)
class PatternSpec:
    path: str
    rule: dict  # the ast-grep rule object
    message: str  # may use $NAME for a metavariable's text and {api} for the resolved qualified name
    resolve: Tuple[Tuple[str, frozenset], ...]  # metavariable -> allowed qualified names
    literal: Tuple[Tuple[str, str], ...]  # metavariable -> regex its text must fully match
    prefilter: Optional["re.Pattern[str]"]  # the file must contain this text, or the rule cannot match


def _examples(raw: Sequence[dict]) -> Tuple[Example, ...]:
    return tuple(Example(e["source"], str(e.get("target", "2.9")),
                         tuple(tuple(x) for x in e.get("expect", ())), e.get("title", "")) for e in raw or ())


def load_pattern_rule(path: pathlib.Path) -> type:
    """A Rule class built from one YAML file."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    meta = data["metadata"]
    spec = PatternSpec(
        str(path), data["rule"], data["message"],
        tuple((k, frozenset(v)) for k, v in (meta.get("resolve") or {}).items()),
        tuple((meta.get("literal") or {}).items()),
        re.compile(meta["prefilter"]) if meta.get("prefilter") else None,
    )
    attributes = {
        "code": meta["code"], "name": data["id"], "summary": meta["summary"],
        "what_it_does": meta["what_it_does"], "why_bad": meta["why_bad"],
        "fix_safety": meta.get("fix_safety", "No automatic fix."),
        "references": tuple(meta.get("references", ())),
        "valid": _examples(meta.get("valid")), "invalid": _examples(meta.get("invalid")),
        "spec": spec, "source_file": path.name,
        "__module__": f"flake8_xla.rules.{path.stem}",  # mechanical naming: the YAML file is the unit
    }
    return type(f"PatternRule_{meta['code']}", (PatternRule,), attributes)


class PatternRule(Rule):
    """A rule whose check is an ast-grep pattern (see the module docstring)."""

    spec: PatternSpec
    source_file: str

    @classmethod
    def module_name(cls) -> str:
        return cls.source_file.rsplit(".", 1)[0]

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for match in ctx.pattern_matches.get(self.code, ()):
            yield match


class PatternRun:
    """One file's matches for every pattern rule (one parse, one walk)."""

    def __init__(self, ctx: FileContext, rules: Sequence[PatternRule]) -> None:
        self.by_code: Dict[str, List[Diagnostic]] = {}
        source = "".join(ctx.lines)
        used = None
        active = []
        for rule in rules:
            spec = rule.spec
            if spec.resolve:
                # the resolver decides anyway: skip the parse unless a constrained name is used
                if used is None:
                    used = {r.qualname for r in ctx.model.references if not r.is_import}
                if not any(allowed & used for _, allowed in spec.resolve):
                    continue
            if spec.prefilter is not None and not spec.prefilter.search(source):
                continue
            active.append(rule)
        if not active:
            return
        from ast_grep_py import SgRoot

        root = SgRoot(source, "python").root()
        union = {"rule": {"any": [r.spec.rule for r in active]}}
        refs = _references_by_position(ctx)
        seen = set()
        for node in root.find_all(union):
            span = (node.range().start.index, node.range().end.index)
            for rule in active:
                if (rule.code, span) in seen:
                    continue
                message = _first_accepted(rule.spec, node, span, refs)
                if message is not None:
                    seen.add((rule.code, span))
                    start = node.range().start
                    self.by_code.setdefault(rule.code, []).append(
                        Diagnostic(start.line + 1, start.column, rule.code, message))

    def get(self, code: str, default=()):
        return self.by_code.get(code, default)


def _references_by_position(ctx: FileContext) -> Dict[Tuple[int, int], str]:
    """(line, character column) of every resolved non-import reference -> its qualified name."""
    out = {}
    for ref in ctx.model.references:
        if not ref.is_import:
            out[ctx.column(ref.node)] = ref.qualname
    return out


def _first_accepted(spec: PatternSpec, node, span: Tuple[int, int], refs) -> Optional[str]:
    """Try the rule's alternatives one by one: an ``any`` keeps only the first alternative's
    captures, but each alternative has its own metavariables to resolve."""
    for alternative in spec.rule.get("any", [spec.rule]):
        if not node.matches(**alternative):
            continue
        match = node.find(**alternative)  # the same node, now with this alternative's captures
        if match is None or (match.range().start.index, match.range().end.index) != span:
            continue
        message = _accept(spec, match, refs)
        if message is not None:
            return message
    return None


def _accept(spec: PatternSpec, match, refs: Dict[Tuple[int, int], str]) -> Optional[str]:
    """The message when every metavariable constraint holds, else None."""
    resolved = {}
    for name, allowed in spec.resolve:
        node = match.get_match(name)
        if node is None:
            continue  # another alternative of the rule; its own metavariables are checked
        start = node.range().start
        qualname = refs.get((start.line + 1, start.column))  # a dotted name resolves where its chain starts
        if qualname not in allowed:
            return None
        resolved[name] = qualname
    if spec.resolve and not resolved:
        return None
    for name, pattern in spec.literal:
        node = match.get_match(name)
        if node is None or not re.fullmatch(pattern, node.text()):
            return None
    message = spec.message.replace("{api}", next(iter(resolved.values()), ""))
    for name in re.findall(r"\$([A-Z_][A-Z0-9_]*)", message):
        node = match.get_match(name)
        value = resolved.get(name) or (node.text() if node is not None else name)
        message = message.replace(f"${name}", value)
    return message


@functools.lru_cache(maxsize=None)
def pattern_rules(directory: str) -> Tuple[type, ...]:
    return tuple(load_pattern_rule(p) for p in sorted(pathlib.Path(directory).glob("xla[0-9][0-9][0-9]_*.yml")))
