"""The result cache (issue 12, defect 17): what it fingerprints, what it trusts on load, what keys an
entry, and where it lives."""
import hashlib
import json
import os
import pathlib

import pytest

import flake8_xla
import flake8_xla.rules.graph
from flake8_xla import ruledata
from flake8_xla.session import cache
from flake8_xla.session.cache import CACHE_DIR_NAME, ResultCache, content_key, resolve_cache_dir
from flake8_xla.rule import Diagnostic

DIAG = Diagnostic(3, 0, "XLA102", "xm.mark_step() is deprecated")
TEXT = "import torch_xla.core.xla_model as xm\n\nxm.mark_step()\n"


# --- (a) the fingerprint covers every shipped code and rule data file ---------------------------

def test_fingerprint_covers_yml_rules_the_table_and_subpackages() -> None:
    files = set(cache.fingerprint_files())
    data = os.path.realpath(ruledata.DATA_DIR)
    assert os.path.join(data, "xla301_dynamic_shape_op.yml") in files  # ast-grep rules end in .yml
    assert os.path.join(data, "api_lifecycle.yaml") in files
    assert os.path.realpath(flake8_xla.__file__) in files
    assert os.path.realpath(flake8_xla.rules.graph.__file__) in files  # a rule family's folder
    assert not any("__pycache__" in pathlib.Path(p).parts for p in files)


def test_fingerprint_changes_with_a_yml_rule_and_nested_code(tmp_path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "sub" / "b.py").write_text("y = 1\n")
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "r.yml").write_text("id: r\n")
    roots = [tmp_path / "pkg", tmp_path / "rules"]
    first = cache.fingerprint_of(roots, "1.0")
    assert cache.fingerprint_of(roots, "1.0") == first
    (tmp_path / "rules" / "r.yml").write_text("id: r2\n")
    second = cache.fingerprint_of(roots, "1.0")
    assert second != first
    (tmp_path / "pkg" / "sub" / "b.py").write_text("y = 2\n")  # a subpackage (cli/, analysis/, ...) counts
    assert cache.fingerprint_of(roots, "1.0") != second
    assert cache.fingerprint_of(roots, "1.1") != cache.fingerprint_of(roots, "1.0")
    third = cache.fingerprint_of(roots, "1.0")
    (tmp_path / "pkg" / ".flake8_xla_cache").mkdir()  # a cache written inside must not change it
    (tmp_path / "pkg" / ".flake8_xla_cache" / "results-0.json").write_text("{}")
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "a.py").write_text("")
    assert cache.fingerprint_of(roots, "1.0") == third


def test_rule_data_inside_flake8_xla_is_walked_once(tmp_path, monkeypatch) -> None:
    # the wheel layout: site-packages/flake8_xla/rule_data/
    (tmp_path / "flake8_xla" / "rule_data").mkdir(parents=True)
    (tmp_path / "flake8_xla" / "rule_data" / "r.yml").write_text("id: r\n")
    monkeypatch.setattr(flake8_xla, "__path__", [str(tmp_path / "flake8_xla")])
    monkeypatch.setattr(ruledata, "DATA_DIR", str(tmp_path / "flake8_xla" / "rule_data"))
    assert cache.fingerprint_files() == [str(tmp_path / "flake8_xla" / "rule_data" / "r.yml")]


# --- (b) a cache file of the wrong shape is treated as empty and rewritten ----------------------

def _results_file(directory) -> pathlib.Path:
    return pathlib.Path(ResultCache(str(directory)).path)


@pytest.mark.parametrize("content", [
    "[]", "{}", '"text"', '{"format": 2, "fingerprint": "other", "entries": {}}',
    '{"a.py": {"key": "k", "diagnostics": [[1, 0, "XLA101"]]}}',  # the old shape
])
def test_a_cache_of_the_wrong_shape_is_empty_and_rewritten(tmp_path, content) -> None:
    directory = tmp_path / "c"
    directory.mkdir()
    path = _results_file(directory)
    path.write_text(content)
    results = ResultCache(str(directory))
    key = content_key(TEXT, "2.9")
    assert results.get("a.py", key) is None
    results.save()  # nothing was put, yet the damaged file is replaced
    data = json.loads(path.read_text())
    assert data == {"format": cache.FORMAT, "fingerprint": cache.fingerprint(), "run": 1, "entries": {}}


def test_a_cache_nested_past_the_parser_limit_is_empty(tmp_path) -> None:
    directory = tmp_path / "c"
    directory.mkdir()
    _results_file(directory).write_text("[" * 200000 + "]" * 200000)
    results = ResultCache(str(directory))
    assert (results.entries, results.dirty) == ({}, True)


def test_entries_of_the_wrong_shape_are_dropped_and_good_ones_kept(tmp_path) -> None:
    directory = tmp_path / "c"
    directory.mkdir()
    good, bad = content_key(TEXT, "2.9"), content_key(TEXT, "2.8")
    _results_file(directory).write_text(json.dumps({
        "format": cache.FORMAT, "fingerprint": cache.fingerprint(), "run": 1, "entries": {
            good: {"used": 1, "path": "/p/a.py",
                   "diagnostics": [[3, 0, "XLA102", "m", 3, 14, None, None, "safe"],
                                   [4, 0, "XLA101", "n", None, None, "error", "h", None]]},
            bad: {"used": 1, "path": "/p/b.py", "diagnostics": [[3, "0", "XLA102", "m", 3, 14, None, None, "safe"]]},
            "x": {"used": 1, "path": "/p/c.py", "diagnostics": [[0, 0, "XLA102", "m", 3, 14, None, None, "yes"]]},
            "v": {"used": 1, "path": "/p/d.py", "diagnostics": [[3, 0, "XLA102", "m", 3, 14, "fatal", None, "safe"]]},
            "w": {"used": 1, "path": "/p/e.py", "diagnostics": [[3, 0, "XLA102", "m", 3, None, None, None, "safe"]]},
            "t": {"used": 1, "path": "/p/g.py", "diagnostics": [[3, 0, "XLA102", "m", 3, 14, None, 7, "safe"]]},
            "r": {"used": 1, "path": "/p/i.py",
                  "diagnostics": [[3, 0, "XLA102", "m", 3, 14, None, None, True]]},  # format 4
            "s": {"used": 1, "path": "/p/h.py", "diagnostics": [[3, 0, "XLA102", "m", 3, 14, None, True]]},  # format 3
            "u": {"used": 1, "path": "/p/f.py", "diagnostics": [[3, 0, "XLA102", "m", True]]},  # format 2
            "y": [],
            "z": {"used": 1, "path": 5, "diagnostics": []},
        }}))
    results = ResultCache(str(directory))
    served = results.get("a.py", good)
    assert [(tuple(d), fix) for d, fix in served] == [
        ((3, 0, "XLA102", "m", 3, 14, None, None, None, "safe"), None),
        ((4, 0, "XLA101", "n", None, None, "error", "h", None, None), None)]
    assert results.get("a.py", bad) is None
    assert sorted(results.entries) == [good]


# --- (c) entries are keyed by content, target, options and the tool fingerprint ----------------

def test_content_key_covers_content_target_options_and_fingerprint(monkeypatch) -> None:
    base = content_key(TEXT, "2.9")
    assert content_key(TEXT, "2.9") == base
    assert content_key(TEXT + "#\n", "2.9") != base
    assert content_key(TEXT, "2.8") != base
    assert content_key(TEXT, "2.9", True) != base
    assert content_key(TEXT, "2.9", options={"rules": "XLA1"}) != base
    assert content_key(TEXT, "2.9", options={"b": 1, "a": 2}) == content_key(TEXT, "2.9", options={"a": 2, "b": 1})
    monkeypatch.setattr(cache, "fingerprint", lambda: "another build of flake8-xla")
    assert content_key(TEXT, "2.9") != base


def test_a_committed_cache_serves_the_same_content_anywhere_and_never_changed_content(tmp_path) -> None:
    checkout = tmp_path / "one"
    checkout.mkdir()
    results = ResultCache(str(checkout / CACHE_DIR_NAME))
    results.put(str(checkout / "a.py"), content_key(TEXT, "2.9"), [(DIAG, None)])
    results.save()
    # a second checkout of the same repository (the cache directory committed with it)
    clone = tmp_path / "two"
    os.rename(checkout, clone)
    again = ResultCache(str(clone / CACHE_DIR_NAME))
    assert again.get(str(clone / "a.py"), content_key(TEXT, "2.9")) == [(DIAG, None)]
    assert again.get(str(clone / "a.py"), content_key(TEXT.replace("mark_step", "sync"), "2.9")) is None
    # new content for a path replaces that path's entry: stale entries do not pile up
    again.put(str(clone / "b.py"), content_key("x = 1\n", "2.9"), [])
    again.put(str(clone / "b.py"), content_key("x = 2\n", "2.9"), [])
    assert again.get(str(clone / "b.py"), content_key("x = 1\n", "2.9")) is None
    assert again.get(str(clone / "b.py"), content_key("x = 2\n", "2.9")) == []
    assert again.get(str(clone / "a.py"), content_key(TEXT, "2.9")) == [(DIAG, None)]  # another path's entry


def test_least_recently_used_entries_go_beyond_the_cap(tmp_path, monkeypatch) -> None:
    directory = str(tmp_path / "c")
    first = ResultCache(directory)
    for n in range(3):
        first.put(f"{n}.py", content_key(f"x = {n}\n", "2.9"), [])
    first.save()
    assert len(ResultCache(directory).entries) == 3
    monkeypatch.setattr(cache, "MAX_ENTRIES", 2)
    second = ResultCache(directory)
    assert second.get("a.py", content_key("x = 0\n", "2.9")) == []  # used again in this run
    second.put("3.py", content_key("x = 3\n", "2.9"), [])
    second.save()
    kept = set(ResultCache(directory).entries)
    assert kept == {content_key("x = 0\n", "2.9"), content_key("x = 3\n", "2.9")}


# --- (d) where the cache lives ------------------------------------------------------------------

def _user_dir(base, root) -> str:
    digest = hashlib.blake2b(os.path.realpath(root).encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()
    return os.path.join(str(base), "flake8-xla", digest)


@pytest.fixture
def xdg(tmp_path, monkeypatch):
    home = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


@pytest.mark.parametrize("marker", ["pyproject.toml", "setup.cfg", "tox.ini", ".flake8", ".git"])
def test_project_root_holds_the_cache(tmp_path, xdg, marker) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / marker).mkdir() if marker == ".git" else (root / marker).write_text("")
    assert resolve_cache_dir(str(root)) == os.path.join(str(root), CACHE_DIR_NAME)


def test_explicit_directory_wins(tmp_path, xdg) -> None:
    assert resolve_cache_dir("/", str(tmp_path / "mine")) == str(tmp_path / "mine")


@pytest.mark.parametrize("where", ["plain", "lib/python3.11/site-packages/pkg", "dist-packages/pkg"])
def test_other_directories_use_the_user_cache(tmp_path, xdg, where) -> None:
    directory = tmp_path / where
    directory.mkdir(parents=True)
    if where != "plain":
        (directory / "setup.cfg").write_text("")  # an installed package may ship one: not a project
    assert resolve_cache_dir(str(directory)) == _user_dir(xdg, directory)


def test_filesystem_root_uses_the_user_cache(xdg) -> None:
    assert resolve_cache_dir("/") == _user_dir(xdg, "/")


def test_unwritable_project_uses_the_user_cache(tmp_path, xdg, monkeypatch) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    monkeypatch.setattr(cache.os, "access", lambda path, mode: False)
    assert resolve_cache_dir(str(root)) == _user_dir(xdg, root)


def test_without_xdg_the_home_cache(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_cache_dir("/") == _user_dir(tmp_path / "home" / ".cache", "/")


def test_a_created_directory_is_tagged_and_ignored(tmp_path) -> None:
    directory = tmp_path / "deep" / CACHE_DIR_NAME
    results = ResultCache(str(directory))
    results.put("a.py", content_key(TEXT, "2.9"), [(DIAG, None)])
    results.save()
    assert (directory / ".gitignore").read_text() == "# created by flake8-xla\n*\n"
    assert (directory / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55\n")
    assert sorted(os.listdir(directory)) == [".gitignore", "CACHEDIR.TAG", os.path.basename(results.path)]


def test_an_existing_directory_of_the_user_is_not_tagged(tmp_path) -> None:
    # `--cache-dir .` must not write a .gitignore of `*` into the user's own directory
    results = ResultCache(str(tmp_path))
    results.put("a.py", content_key(TEXT, "2.9"), [])
    results.save()
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(results.path)]


def test_a_checkout_s_fingerprint_covers_the_packages_not_the_checkout() -> None:
    # in a source checkout the rule data is the checkout's rules/: walking the checkout would hash
    # .venv and every project file
    roots = [pathlib.Path(folder).resolve() for folder in (flake8_xla.__path__[0], ruledata.DATA_DIR)]
    outside = [path for path in cache.fingerprint_files()
               if not any(root in pathlib.Path(path).parents for root in roots)]
    assert outside == []


def test_a_diagnostic_keeps_its_end_level_help_and_fix_applicability_through_the_cache(tmp_path) -> None:
    """SARIF regions, levels, help and fix applicability of a file served from the cache are the ones its
    lint gave; a suggested fix is not stored (a run that wants fixes does not use the cache)."""
    directory = tmp_path / "c"
    results = ResultCache(str(directory))
    linted = Diagnostic(3, 4, "XLA101", "gone", 3, 23, "error", "why", applicability="unsafe")
    results.put("a.py", content_key(TEXT, "2.9"), [(linted, ("title", ()))])
    results.save()
    (served, fix), = ResultCache(str(directory)).get("a.py", content_key(TEXT, "2.9"))
    assert (tuple(served), fix) == ((3, 4, "XLA101", "gone", 3, 23, "error", "why", None, "unsafe"), None)


# --- (e) the fingerprint is remembered between runs, never trusted stale -------------------------

def _package(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "sub" / "b.yml").write_text("id: r\n")
    return [str(tmp_path / "pkg")]


def _memos(xdg) -> list:
    folder = xdg / "flake8-xla" / "startup"
    return sorted(p for p in os.listdir(folder) if p.startswith("fingerprint-")) if folder.is_dir() else []


def test_the_remembered_fingerprint_is_the_hash_and_is_read_back(tmp_path, xdg, monkeypatch) -> None:
    roots = _package(tmp_path)
    first = cache.remembered_fingerprint(roots, "1.0")
    assert first == cache.fingerprint_of(roots, "1.0")
    assert len(_memos(xdg)) == 1
    monkeypatch.setattr(cache, "fingerprint_of", lambda *args: pytest.fail("the files were hashed again"))
    assert cache.remembered_fingerprint(roots, "1.0") == first


@pytest.mark.parametrize("change", ["edit", "same size and time", "new file", "removed file", "version"])
def test_a_changed_install_is_hashed_again(tmp_path, xdg, change) -> None:
    roots = _package(tmp_path)
    before = cache.remembered_fingerprint(roots, "1.0")
    target = tmp_path / "pkg" / "a.py"
    version = "1.0"
    if change == "edit":
        target.write_text("x = 22\n")
    elif change == "same size and time":  # a rewrite that keeps size and mtime: its change time moves
        st = target.stat()
        target.write_text("x = 2\n")
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif change == "new file":
        (tmp_path / "pkg" / "sub" / "c.py").write_text("")
    elif change == "removed file":
        (tmp_path / "pkg" / "sub" / "b.yml").unlink()
    else:
        version = "1.1"
    after = cache.remembered_fingerprint(roots, version)
    assert after == cache.fingerprint_of(roots, version) != before
    assert len(_memos(xdg)) == (2 if change == "version" else 1)  # the install's stale memo is replaced


def test_a_damaged_memo_is_ignored_and_rewritten(tmp_path, xdg) -> None:
    roots = _package(tmp_path)
    right = cache.remembered_fingerprint(roots, "1.0")
    memo = xdg / "flake8-xla" / "startup" / _memos(xdg)[0]
    data = bytearray(memo.read_bytes())
    data[-1] ^= 1  # one flipped bit of the stored hash: still 24 hex digits, but the checksum fails
    memo.write_bytes(bytes(data))
    assert cache.remembered_fingerprint(roots, "1.0") == right
    assert cache.remembered_fingerprint(roots, "1.0") == right and memo.read_bytes() != bytes(data)


def test_an_unwritable_user_cache_still_gives_the_fingerprint(tmp_path, monkeypatch) -> None:
    (tmp_path / "ro").write_text("a file where the cache directory would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "ro"))
    roots = _package(tmp_path)
    assert cache.remembered_fingerprint(roots, "1.0") == cache.fingerprint_of(roots, "1.0")
