"""Every rule's VALID/INVALID examples are tests; the docs are generated from the same examples."""
import os

import pytest

from flake8_xla import ruledata
from flake8_xla.engine import all_rules, fix_source, lint_source
from flake8_xla.rules import family_of
from flake8_xla.rule import Rule
from flake8_xla.versions import Target, parse_version

RULES = all_rules()
CASES = [
    pytest.param(rule, example, valid, id=f"{rule.code}-{'valid' if valid else 'invalid'}-{i}")
    for rule in RULES
    for valid, examples in ((True, rule.valid), (False, rule.invalid))
    for i, example in enumerate(examples)
]


@pytest.mark.parametrize("rule, example, valid", CASES)
def test_example(rule: Rule, example, valid: bool) -> None:
    """A run-only rule's examples are checked by tracing them (tests/runtime/test_trace_examples.py);
    the linter never reports its code."""
    found = [(d.line, d.col + 1, d.message, d.help)
             for d in lint_source(example.source, target=example.target, migrate_to=rule.migration)
             if d.code == rule.code]
    expected = [] if valid or rule.run_only else list(example.expect)
    # an expectation of three items leaves the help unpinned
    assert [f[:len(e)] for f, e in zip(found, expected)] == expected and len(found) == len(expected)


@pytest.mark.parametrize("rule, example, valid", [c for c in CASES if not c.values[2]])
def test_example_fix(rule: Rule, example, valid: bool) -> None:
    """`fix --unsafe-fixes` of this rule turns the INVALID example into ``fixed`` exactly (or leaves
    it alone when ``fixed`` is None), and a second run changes nothing."""
    target = Target(parse_version(example.target), "example", migrate_to=rule.migration)
    once = fix_source(example.source, "example.py", target, lambda code: code == rule.code, unsafe=True)
    assert once.error is None
    assert once.source == (example.fixed if example.fixed is not None else example.source)
    assert fix_source(once.source, "example.py", target, lambda code: code == rule.code, unsafe=True).source \
        == once.source


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_is_complete(rule: Rule) -> None:
    assert rule.valid and rule.invalid, "every rule needs VALID and INVALID examples"
    assert all(example.expect for example in rule.invalid)
    assert all(example.fixed is None for example in rule.valid), "only INVALID examples have a fix"
    for text in (rule.summary, rule.what_it_does, rule.why_bad, rule.fix_safety):
        assert text.strip()


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_doc_examples_are_exact(rule: Rule) -> None:
    """The page's "Example" (first INVALID) shows only this rule's code; "Use instead" (first
    VALID) is clean under every rule."""
    example, use_instead = rule.invalid[0], rule.valid[0]
    codes = {d.code for d in lint_source(example.source, target=example.target, migrate_to=rule.migration)}
    assert codes == (set() if rule.run_only else {rule.code})
    assert lint_source(use_instead.source, target=use_instead.target, migrate_to=rule.migration) == []


def test_codes_and_names_are_unique_and_mechanical() -> None:
    codes = [r.code for r in RULES]
    names = [r.name for r in RULES]
    assert len(set(codes)) == len(codes) and len(set(names)) == len(names)
    for rule in RULES:
        package, family, module = type(rule).__module__.rsplit(".", 2)
        assert module == rule.module_name(), "file name must follow code + kebab name"
        assert (package, family) == ("flake8_xla.rules", family_of(rule.code)), "a rule lives in its family's folder"
        assert rule.code[:3] == "XLA" and rule.code[3:].isdigit() and len(rule.code) == 6


def test_the_rule_data_folder_holds_data_only() -> None:
    """Rule code lives in flake8_xla/rules/<family>/; the top-level rules/ is the data one loader reads."""
    names = [n for n in os.listdir(ruledata.DATA_DIR) if n != "__pycache__"]
    assert [n for n in names if not n.endswith((".yaml", ".yml", ".json"))] == []
    assert {"api_lifecycle.yaml", "torchtpu_migration.yaml", "xla301_dynamic_shape_op.yml"} <= set(names)
