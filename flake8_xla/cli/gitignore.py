"""``.gitignore`` matching for file discovery, as ruff does it: the ignore files of the git
repository that holds a path (``.git/info/exclude``, then every ``.gitignore`` from the
repository root down to the path's directory; the last matching pattern wins).

A practical subset of gitignore(5): blank lines and ``#`` comments, ``!`` negation, a trailing
``/`` for directories only, a leading or inner ``/`` anchoring the pattern to its file's directory,
``*``, ``?``, ``[...]`` and ``**``. Not read: global excludes (``core.excludesFile``). Outside a
git repository nothing is ignored.
"""
from __future__ import annotations

import os
import re
from typing import Dict, List, NamedTuple, Optional, Tuple


class IgnoreRule(NamedTuple):
    pattern: str  # as written in the file (without the trailing newline)
    where: str  # "path/.gitignore:3"
    regex: "re.Pattern[str]"  # matches a path relative to the rule's directory (POSIX separators)
    negated: bool
    directories_only: bool

    def matches(self, relative: str, is_dir: bool) -> bool:
        return (is_dir or not self.directories_only) and self.regex.fullmatch(relative) is not None


def _glob_to_regex(glob: str) -> str:
    out: List[str] = []
    i = 0
    while i < len(glob):
        at_segment_start = i == 0 or glob[i - 1] == "/"
        if glob.startswith("**/", i) and at_segment_start:
            out.append("(?:.*/)?")  # zero or more directories
            i += 3
        elif glob.startswith("**", i) and at_segment_start and i + 2 == len(glob):
            out.append(".*")  # everything inside
            i += 2
        elif glob[i] == "*":
            while i < len(glob) and glob[i] == "*":
                i += 1
            out.append("[^/]*")
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif glob[i] == "[":
            end = glob.find("]", i + 2 if glob.startswith(("[!", "[^"), i) else i + 1)
            if end < 0:
                out.append(re.escape("["))
                i += 1
                continue
            body = glob[i + 1:end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            out.append("[" + ("^/" if negate else "") + body.replace("\\", "\\\\") + "]")
            i = end + 1
        elif glob[i] == "\\" and i + 1 < len(glob):
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


def parse_rule(line: str, where: str) -> Optional[IgnoreRule]:
    """One line of an ignore file; None for blank lines, comments and lines that cannot match."""
    text = line.rstrip("\r\n")
    stripped = text.rstrip(" ")
    if stripped.endswith("\\") and len(stripped) < len(text):  # "\ " keeps one trailing space
        stripped += " "
    if not stripped or stripped.startswith("#"):
        return None
    negated = stripped.startswith("!")
    body = stripped[1:] if negated else stripped
    if body.startswith(("\\#", "\\!")):
        body = body[1:]
    directories_only = body.endswith("/")
    body = body.rstrip("/")
    anchored = "/" in body
    body = body.lstrip("/")
    if not body:
        return None
    prefix = "" if anchored else "(?:.*/)?"
    try:
        regex = re.compile(prefix + _glob_to_regex(body), re.DOTALL)
    except re.error:
        return None  # a malformed character class: git would not match it either
    return IgnoreRule(text, where, regex, negated, directories_only)


def _read_rules(path: str, shown: str) -> Tuple[IgnoreRule, ...]:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            lines = f.readlines()
    except OSError:
        return ()
    rules = (parse_rule(line, f"{shown}:{number}") for number, line in enumerate(lines, 1))
    return tuple(rule for rule in rules if rule is not None)


Chain = Tuple[Tuple[str, Tuple[IgnoreRule, ...]], ...]  # (directory, its rules), outermost first


class GitIgnore:
    """The ignore rules that apply under each directory, read once per directory."""

    def __init__(self) -> None:
        self._chains: Dict[str, Optional[Chain]] = {}

    def _chain(self, directory: str) -> Optional[Chain]:
        """Rules for entries of ``directory`` (absolute), or None outside a git repository."""
        if directory in self._chains:
            return self._chains[directory]
        own = _read_rules(os.path.join(directory, ".gitignore"), _shown(os.path.join(directory, ".gitignore")))
        if os.path.exists(os.path.join(directory, ".git")):  # the repository root (a submodule's .git is a file)
            exclude = os.path.join(directory, ".git", "info", "exclude")
            chain: Optional[Chain] = ((directory, _read_rules(exclude, _shown(exclude)) + own),)
        else:
            parent = os.path.dirname(directory)
            above = None if parent == directory else self._chain(parent)
            chain = None if above is None else above + ((directory, own),)
        self._chains[directory] = chain
        return chain

    def rule_for(self, path: str, is_dir: bool) -> Optional[IgnoreRule]:
        """The last rule matching ``path`` itself (negated or not), ignoring its parents."""
        absolute = os.path.abspath(path)
        chain = self._chain(os.path.dirname(absolute))
        if not chain:
            return None
        found = None
        for directory, rules in chain:  # every directory of the chain is above the path
            relative = absolute[len(directory.rstrip(os.sep)) + 1:].replace(os.sep, "/")
            for rule in rules:
                if rule.matches(relative, is_dir):
                    found = rule
        return found

    def ignoring(self, path: str, is_dir: bool) -> Optional[IgnoreRule]:
        """The rule that ignores ``path`` or a directory above it (as git would), or None."""
        absolute = os.path.abspath(path)
        ancestors = []  # the directories above the path, up to its repository's root
        current = os.path.dirname(absolute)
        while self._chain(current) is not None:
            ancestors.append(current)
            parent = os.path.dirname(current)
            if os.path.exists(os.path.join(current, ".git")) or parent == current:
                break
            current = parent
        # a directory nearer the root hides everything below it, whatever the deeper files say;
        # the root itself is never ignored
        for ancestor in reversed(ancestors[:-1]):
            rule = self.rule_for(ancestor, True)
            if rule is not None and not rule.negated:
                return rule
        rule = self.rule_for(absolute, is_dir)
        return rule if rule is not None and not rule.negated else None


def _shown(path: str) -> str:
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative
