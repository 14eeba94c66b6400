"""Declarative pattern rules: ast-grep YAML files (``xlaNNN_<name>.yml``) in the top-level ``rules/``.

Each file is a valid ast-grep rule (``id``, ``language``, ``rule``, ``message``); flake8-xla's own
fields live under ``metadata:`` (code, docs, examples, and the metavariable constraints patterns
cannot express, because they match text, not bindings: ``resolve`` (which qualified names it must
resolve to: the whole metavariable, so ``torch.where(c, a, b).unsqueeze`` is not ``torch.where``),
``literal`` (a regex for its text), ``tensor`` / ``mask`` (it must be a device tensor / a boolean
one, asked of flake8_xla/analysis/tensors.py and masks.py), ``not_host`` (it must not be known to live on the host: a
CPU tensor has no XLA fallback). A constraint applies to the alternatives that bind its
metavariable; every match must pass at least one name or type constraint. Per file, all pattern
rules share one tree-sitter parse and one ``find_all`` over the union of their rules; each match
is then attributed to its rule(s) and post-filtered through the semantic layer's resolver.
"""
from __future__ import annotations

import ast
import functools
import os
import re
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import flake8_xla.rules as rule_units  # the index: family_of, pattern_units
from flake8_xla import ruledata
from flake8_xla.rule import Diagnostic, Example, FileContext, Level, Rule, character_column
from flake8_xla.analysis.semantic import SemanticModel
from flake8_xla.analysis.masks import Masks
from flake8_xla.analysis.tensors import TensorFacts
from flake8_xla.analysis.off_xla import OffXla
from flake8_xla.analysis.syntax import NodeIndex


class PatternSpec(NamedTuple):
    path: str
    rule: dict  # the ast-grep rule object
    message: str  # may use $NAME for a metavariable's text and {api} for the resolved qualified name
    resolve: Tuple[Tuple[str, frozenset], ...]  # metavariable -> allowed qualified names
    literal: Tuple[Tuple[str, str], ...]  # metavariable -> regex its text must fully match
    prefilter: Optional["re.Pattern[str]"]  # the file must contain this text, or the rule cannot match
    tensor: Tuple[str, ...] = ()  # metavariables that must be device tensors (flake8_xla/analysis/tensors.py)
    mask: Tuple[str, ...] = ()  # metavariables that must be boolean device tensors
    not_host: Tuple[str, ...] = ()  # metavariables that must not be known CPU tensors or host values
    note: Optional[str] = None  # ast-grep's `note`: the detail behind the message (a diagnostic's help)


def _examples(raw: Sequence[dict]) -> Tuple[Example, ...]:
    return tuple(Example(e["source"], str(e.get("target", "2.9")),
                         tuple(tuple(x) for x in e.get("expect", ())), e.get("title", "")) for e in raw or ())


# ast-grep's severities as levels; "off" disables a rule in ast-grep and is refused here (the
# select/ignore options turn rules off)
_LEVELS: Dict[str, Level] = {"error": "error", "warning": "warning", "info": "note", "hint": "note"}


def load_pattern_rule(path: str) -> type:
    """A Rule class built from one YAML file."""
    data = ruledata.read_data(path)
    meta = data["metadata"]
    name = os.path.basename(path)
    spec = PatternSpec(
        path, data["rule"], data["message"],
        tuple((k, frozenset(v)) for k, v in (meta.get("resolve") or {}).items()),
        tuple((meta.get("literal") or {}).items()),
        re.compile(meta["prefilter"]) if meta.get("prefilter") else None,
        tuple(meta.get("tensor") or ()), tuple(meta.get("mask") or ()), tuple(meta.get("not_host") or ()),
        " ".join(data["note"].split()) if data.get("note") else None,
    )
    attributes = {
        "code": meta["code"], "name": data["id"], "summary": meta["summary"],
        "what_it_does": meta["what_it_does"], "why_bad": meta["why_bad"],
        "fix_safety": meta.get("fix_safety", "No automatic fix."),
        "references": tuple(meta.get("references", ())),
        "valid": _examples(meta.get("valid")), "invalid": _examples(meta.get("invalid")),
        "level": _LEVELS[data.get("severity", "warning")], "spec": spec, "source_file": name,
        # mechanical naming: the YAML file is the unit, named as if it sat in its family's folder
        "__module__": f"flake8_xla.rules.{rule_units.family_of(meta['code'])}.{os.path.splitext(name)[0]}",
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
        for match in ctx.get(PatternRun).get(self.code, ()):
            yield match


class PatternRun:
    """One file's matches for every pattern rule (one parse, one walk)."""

    @classmethod
    def from_context(cls, ctx) -> "PatternRun":
        return cls(ctx, _pattern_rule_instances())

    def __init__(self, ctx: FileContext, rules: Sequence[PatternRule]) -> None:
        self.by_code: Dict[str, List[Diagnostic]] = {}
        source = "".join(ctx.lines)
        candidates = _Candidates(ctx, source)
        active = []
        for rule in rules:
            spec = rule.spec
            if spec.prefilter is not None and not spec.prefilter.search(source):
                continue
            # an alternative that cannot match here stays out of the walk (and no walk, no parse)
            alternatives = tuple(a for a in _alternatives(spec) if candidates.may_match(spec, a))
            if alternatives:
                active.append((rule, alternatives))
        if not active:
            return  # skip the parse
        from ast_grep_py import SgRoot

        root = SgRoot(source, "python").root()
        union = {"rule": {"any": [alternative[0] for _, alternatives in active for alternative in alternatives]}}
        refs = _ReferencesByPosition(ctx)
        expressions = _Expressions(ctx)
        seen = set()
        for node in root.find_all(union):
            span = (node.range().start.index, node.range().end.index)
            for rule, alternatives in active:
                if (rule.code, span) in seen:
                    continue
                message = _first_accepted(rule.spec, alternatives, node, span, refs, expressions)
                if message is not None and not expressions.never_on_xla(node):
                    seen.add((rule.code, span))
                    start, end = node.range().start, node.range().end  # ast-grep counts characters
                    self.by_code.setdefault(rule.code, []).append(
                        Diagnostic(start.line + 1, start.column, rule.code, message, end.line + 1, end.column,
                                   help=rule.spec.note))

    def get(self, code: str, default=()):
        return self.by_code.get(code, default)


class _ReferencesByPosition:
    """(line, character column) of a resolved non-import reference -> its qualified name, worked
    out per line on first use (most lines of a file are never asked about)."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._by_line: Optional[Dict[int, list]] = None

    def get(self, position: Tuple[int, int], end: Tuple[int, int]) -> Optional[str]:
        """The qualified name of the reference spanning exactly ``position`` to ``end`` (a longer
        chain that merely starts with one, ``torch.where(...).unsqueeze``, has none)."""
        if self._by_line is None:
            self._by_line = {}
            for ref in self.ctx.get(SemanticModel).references:
                if not ref.is_import:
                    self._by_line.setdefault(ref.node.lineno, []).append(ref)
        line, column = position
        for ref in self._by_line.get(line, ()):
            node = ref.node
            if self.ctx.column(node)[1] == column and \
                    (node.end_lineno, character_column(self.ctx.lines, node.end_lineno, node.end_col_offset)) == end:
                return ref.qualname
        return None


class _Expressions:
    """Python AST expressions by character span, to ask the tensor layer about a metavariable."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._by_line: Optional[Dict[int, List[ast.expr]]] = None

    def at(self, node):
        while node.kind() == "parenthesized_expression" and len(node.children()) == 3:
            node = node.children()[1]  # ast drops the parentheses
        ctx = self.ctx
        if self._by_line is None:
            self._by_line = {}
            for kind, nodes in ctx.get(NodeIndex).by_type.items():
                if issubclass(kind, ast.expr):
                    for expr in nodes:
                        self._by_line.setdefault(expr.lineno, []).append(expr)
        start, end = node.range().start, node.range().end
        wanted = (start.column, end.line + 1, end.column)
        for expr in self._by_line.get(start.line + 1, ()):
            if (ctx.column(expr)[1], expr.end_lineno,
                    character_column(ctx.lines, expr.end_lineno, expr.end_col_offset)) == wanted:
                return expr
        return None

    def never_on_xla(self, node) -> bool:
        """Whether the match sits in code that never runs on XLA (a CUDA-only branch or class)."""
        expr = self.at(node)
        return expr is not None and id(expr) in self.ctx.get(OffXla).nodes

    def holds(self, spec: PatternSpec, match) -> Optional[bool]:
        """Whether the tensor and mask constraints hold (None: the match has none of them)."""
        tensors, checked = self.ctx.get(TensorFacts), False
        for names, test in ((spec.tensor, tensors.is_device), (spec.mask, self.ctx.get(Masks).is_mask),
                            (spec.not_host, tensors.may_be_on_device)):
            for name in names:
                node = match.get_match(name)
                if node is None:
                    continue
                checked = True
                if not test(self.at(node)):
                    return False
        return True if checked else None


def _first_accepted(spec: PatternSpec, alternatives, node, span: Tuple[int, int], refs,
                    expressions: _Expressions) -> Optional[str]:
    """Try the rule's alternatives one by one: an ``any`` keeps only the first alternative's
    captures, but each alternative has its own metavariables to resolve. Alternatives whose
    pattern is of another node kind (a call pattern on a subscript) are not tried."""
    kind = node.kind()
    for alternative, alternative_kind, _, _, _ in alternatives:
        if alternative_kind is not None and alternative_kind != kind:
            continue
        if not node.matches(**alternative):
            continue
        match = node.find(**alternative)  # the same node, now with this alternative's captures
        if match is None or (match.range().start.index, match.range().end.index) != span:
            continue
        message = _accept(spec, match, refs, expressions)
        if message is not None:
            return message
    return None


class Shape(NamedTuple):
    """What a call pattern says about the calls it can match, read from its text."""

    callee: Optional[str]  # ``F`` in ``$F($INPUT)``
    receiver: Optional[str]  # ``X`` in ``$X.nonzero()``
    method: Optional[str]  # ``nonzero`` there
    arguments: int  # arguments it spells out (``$$$ARGS`` not counted)
    more: bool  # whether a ``$$$ARGS`` lets a call have more


# per alternative: the rule, the node kind it matches, what its pattern needs in the source, its
# metavariables, and the shape of the calls it matches (None: not a call pattern)
Word = Tuple[str, str]  # an identifier, and the regex of it as the pattern spells it (compiled on need)
Alternative = Tuple[dict, Optional[str], Tuple[Word, ...], frozenset, Optional[Shape]]
_ALTERNATIVES: Dict[str, Tuple[Alternative, ...]] = {}


def _alternatives(spec: PatternSpec) -> Tuple[Alternative, ...]:
    """Each alternative of a rule with what :meth:`_Candidates.may_match` needs (worked out once per rule)."""
    found = _ALTERNATIVES.get(spec.path)
    if found is None:
        found = _ALTERNATIVES[spec.path] = tuple(
            (alternative, _pattern_kind(alternative), _pattern_words(alternative),
             frozenset(re.findall(r"\$\$?\$?([A-Z_][A-Z0-9_]*)", repr(alternative))),
             _call_shape(alternative))
            for alternative in spec.rule.get("any", [spec.rule]))
    return found


def _pattern_text(alternative: dict) -> Optional[str]:
    pattern = alternative.get("pattern")
    if pattern is None:
        pattern = next((a["pattern"] for a in alternative.get("all", ())
                        if isinstance(a, dict) and "pattern" in a), None)
    return pattern if isinstance(pattern, str) else None


def _pattern_words(alternative: dict) -> Tuple[Word, ...]:
    """What the source must contain for the pattern to match: each identifier it spells out (not
    metavariables, not keyword-argument names), with the ``.`` before and ``(`` after it that the
    pattern has (``$X.unique($$$A)`` needs ``.unique(``, not a docstring's "unique")."""
    text = _pattern_text(alternative) or ""
    out = []
    for match in re.finditer(r"(?<![$\w])([A-Za-z_]\w*)\b(?!\s*=[^=])", text):
        before = r"\.\s*" if text[:match.start()].rstrip().endswith(".") else r"\b"
        after = r"\s*\(" if text[match.end():].lstrip().startswith("(") else r"\b"
        out.append((match.group(1), before + re.escape(match.group(1)) + after))
    return tuple(out)


def _call_shape(alternative: dict) -> Optional[Shape]:
    """The shape of a call pattern, from its text made Python (``$$$A`` -> ``*A``, ``$A`` -> ``A``)."""
    text = _pattern_text(alternative)
    if text is None:
        return None
    try:
        call = ast.parse(re.sub(r"\$([A-Z_][A-Z0-9_]*)", r"\1", re.sub(r"\$\$\$", "*", text)), mode="eval").body
    except SyntaxError:
        return None
    if type(call) is not ast.Call:
        return None
    func = call.func
    callee = func.id if type(func) is ast.Name else None
    method = func.attr if type(func) is ast.Attribute else None
    receiver = func.value.id if method and type(func.value) is ast.Name else None
    fixed = [a for a in call.args if type(a) is not ast.Starred] + list(call.keywords)
    return Shape(callee, receiver, method, len(fixed), len(fixed) < len(call.args) + len(call.keywords))


class _Candidates:
    """Whether an alternative can match anything in one file, judged without parsing it for
    ast-grep: from its text, the names it uses, and the questions a match would be asked anyway
    (is this receiver a device tensor, this index a boolean mask)."""

    def __init__(self, ctx: FileContext, source: str) -> None:
        self.ctx = ctx
        self.source = source
        self._calls: Optional[Dict[str, List[ast.Call]]] = None

    @functools.cached_property
    def used(self) -> set:
        return {r.qualname for r in self.ctx.get(SemanticModel).references if not r.is_import}

    def calls_of(self, qualname: str) -> List[ast.Call]:
        if self._calls is None:
            self._calls = {}
            for ref in self.ctx.get(SemanticModel).references:
                call = None if ref.is_import else ref.call
                if call is not None:
                    self._calls.setdefault(ref.qualname, []).append(call)
        return self._calls.get(qualname, [])

    @functools.cached_property
    def has_mask_index(self) -> bool:
        masks = self.ctx.get(Masks)
        return masks.may_have_masks and any(masks.is_mask(node.slice)
                                            for node in self.ctx.get(NodeIndex).of(ast.Subscript))

    @functools.cached_property
    def _method_calls(self) -> Dict[str, List[ast.Call]]:
        out: Dict[str, List[ast.Call]] = {}
        for call in self.ctx.get(NodeIndex).of(ast.Call):
            if type(call.func) is ast.Attribute:
                out.setdefault(call.func.attr, []).append(call)
        return out

    def has_device_method_call(self, method: str) -> bool:
        tensors = self.ctx.get(TensorFacts)
        return any(tensors.is_device(call.func.value) for call in self._method_calls.get(method, ()))

    def may_match(self, spec: PatternSpec, alternative: Alternative) -> bool:
        """False when the alternative surely finds nothing here: a metavariable must resolve to names
        the file never uses (or never calls with as many arguments), a word of its pattern
        (``nonzero`` in ``$X.nonzero()``) is not in the text, it needs a boolean mask and no
        subscript indexes with one, or a method called on a device tensor and none is."""
        _, _, words, names, shape = alternative
        if not all(allowed & self.used for name, allowed in spec.resolve if name in names):
            return False
        # the plain substring first: most files lack most words, and a regex compile costs ~0.3 ms
        if not all(word in self.source and re.search(regex, self.source) for word, regex in words):
            return False
        if any(name in names for name in spec.mask) and not self.has_mask_index:
            return False
        if shape is None:
            return True
        if shape.receiver in spec.tensor and not self.has_device_method_call(shape.method):
            return False
        allowed = dict(spec.resolve).get(shape.callee) if shape.callee else None
        if allowed is not None:
            counts = (len(c.args) + len(c.keywords) for name in allowed for c in self.calls_of(name))
            return any(n == shape.arguments or (shape.more and n >= shape.arguments) for n in counts)
        return True


def _pattern_kind(alternative: dict) -> Optional[str]:
    """The tree-sitter kind a pattern alternative matches (``call``, ``subscript``), when it says."""
    pattern = _pattern_text(alternative)
    if pattern is None:
        return None
    from ast_grep_py import SgRoot

    statement = SgRoot(pattern, "python").root().find(kind="expression_statement")
    children = [c for c in statement.children() if c.is_named()] if statement is not None else []
    return children[0].kind() if len(children) == 1 else None


def _accept(spec: PatternSpec, match, refs: Dict[Tuple[int, int], str], expressions: _Expressions) -> Optional[str]:
    """The message when every metavariable constraint holds (and the match has at least one), else None."""
    resolved = {}
    for name, allowed in spec.resolve:
        node = match.get_match(name)
        if node is None:
            continue  # another alternative of the rule; its own metavariables are checked
        start, end = node.range().start, node.range().end
        qualname = refs.get((start.line + 1, start.column), (end.line + 1, end.column))
        if qualname not in allowed:
            return None
        resolved[name] = qualname
    typed = expressions.holds(spec, match) if spec.tensor or spec.mask or spec.not_host else None
    if typed is False or ((spec.resolve or spec.tensor or spec.mask) and not resolved and typed is None):
        return None
    for name, pattern in spec.literal:
        node = match.get_match(name)
        if node is not None and not re.fullmatch(pattern, node.text()):
            return None
    message = spec.message.replace("{api}", next(iter(resolved.values()), None) or _method_name(match))
    for name in re.findall(r"\$([A-Z_][A-Z0-9_]*)", message):
        node = match.get_match(name)
        value = resolved.get(name) or (node.text() if node is not None else name)
        message = message.replace(f"${name}", value)
    return message


def _method_name(match) -> str:
    """``torch.Tensor.nonzero`` for a match ``x.nonzero()``: {api} of a method call on a tensor."""
    function = match.field("function")
    attribute = function.field("attribute") if function is not None and function.kind() == "attribute" else None
    return f"torch.Tensor.{attribute.text()}" if attribute is not None else match.text()


@functools.lru_cache(maxsize=None)
def _pattern_rule_instances() -> Tuple["PatternRule", ...]:
    """One instance of every YAML rule in flake8_xla.rules, for the run that serves them all."""
    return tuple(cls() for cls in pattern_rules())


@functools.lru_cache(maxsize=None)
def pattern_rules() -> Tuple[type, ...]:
    return tuple(load_pattern_rule(ruledata.data_path(f"{stem}.yml")) for stem in rule_units.pattern_units())
