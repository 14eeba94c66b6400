"""The CLI and the files it meets: FIFOs and devices, the size cap, links, owners, line endings,
names that are not UTF-8, excludes and .gitignore."""
import json
import os
import resource
import subprocess
import sys

import pytest

from cli_helpers import run
from flake8_xla.engine import lint_source
from flake8_xla.cli.gitignore import parse_rule

MARK_STEP = "import torch_xla.core.xla_model as xm\n\nxm.mark_step()\n"
FIXED = "import torch_xla\n\ntorch_xla.sync()\n"
# the engine's wording (its own tests pin it); these tests pin how the CLI reports it
MESSAGE = f"XLA102 [*] {lint_source(MARK_STEP, target='2.9')[0].message}"


def run_cli(cwd, *argv, env=None, memory_cap=None):
    """The CLI in its own process, with a time limit (a regression must fail, not hang the suite)
    and optionally a memory limit (one that reads /dev/zero must fail, not exhaust the machine)."""
    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (memory_cap, memory_cap))

    return subprocess.run([sys.executable, "-m", "flake8_xla", *argv], cwd=cwd, capture_output=True, timeout=120,
                          env=env, preexec_fn=limit_memory if memory_cap else None)


# --- 10: files that are not regular files, and the size cap ------------------------------------------

@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_in_a_tree_is_skipped_and_one_named_is_e902(project) -> None:
    (project / "a.py").write_text(MARK_STEP)
    os.mkfifo(project / "x.py")  # nobody ever writes to it: opening it for reading would block forever
    for command in ("check", "fix"):
        result = run_cli(project, command, "--no-cache", "--diff" if command == "fix" else "-v", ".")
        assert result.returncode == 1
        if command == "check":
            assert result.stdout.decode() == f"a.py:3:1: {MESSAGE}\n"
            note = "flake8-xla: note: x.py: skipped: not a regular file (a named pipe (FIFO))\n"
            assert note in result.stderr.decode()
    result = run_cli(project, "check", "--no-cache", "x.py")
    assert (result.returncode, result.stdout.decode()) == (
        1, "x.py:1:1: E902 not a regular file (a named pipe (FIFO)); not read\n")
    result = run_cli(project, "fix", "x.py")
    assert result.returncode == 1 and "x.py:1:1: E902 not a regular file" in result.stdout.decode()


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_link_to_dev_zero_is_never_read(project) -> None:
    (project / "a.py").write_text(MARK_STEP)
    os.symlink("/dev/zero", project / "zero.py")
    result = run_cli(project, "check", "--no-cache", ".", memory_cap=2 << 30)
    assert (result.returncode, result.stdout.decode()) == (1, f"a.py:3:1: {MESSAGE}\n")
    result = run_cli(project, "check", "--no-cache", "zero.py", memory_cap=2 << 30)
    assert (result.returncode, result.stdout.decode()) == (1, "zero.py:1:1: E902 not a regular file (a character "
                                                              "device); not read\n")


def test_a_file_over_the_size_cap_is_e902_naming_the_cap(project, capsys) -> None:
    (project / "big.py").write_text(MARK_STEP + "#" * 2000 + "\n")
    (project / "a.py").write_text(MARK_STEP)
    code, out, _ = run(capsys, "check", "--no-cache", "--max-file-size", "1K", ".")
    assert (code, out) == (1, f"a.py:3:1: {MESSAGE}\nbig.py:1:1: E902 larger than the 1 KiB size cap; not read "
                              "(raise the cap with --max-file-size, e.g. --max-file-size 1M)\n")
    assert run(capsys, "check", "--no-cache", "--max-file-size", "4K", "big.py")[:2] == (1, f"big.py:3:1: {MESSAGE}\n")


def test_the_default_size_cap_is_10_mib(project, capsys) -> None:
    (project / "big.py").write_text(MARK_STEP + "#" * (10 << 20) + "\n")
    code, out, _ = run(capsys, "check", "--no-cache", "big.py")
    assert (code, out) == (1, "big.py:1:1: E902 larger than the 10 MiB size cap; not read "
                              "(raise the cap with --max-file-size, e.g. --max-file-size 11M)\n")
    assert run(capsys, "check", "--no-cache", "--max-file-size", "11M", "big.py")[:2] == (1, f"big.py:3:1: {MESSAGE}\n")


def test_the_size_cap_applies_to_stdin(project, capsys, monkeypatch) -> None:
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((MARK_STEP + "#" * 2000).encode())))
    code, out, _ = run(capsys, "check", "--max-file-size", "1K", "-")
    assert (code, out) == (1, "stdin:1:1: E902 larger than the 1 KiB size cap; not read "
                              "(raise the cap with --max-file-size, e.g. --max-file-size 1M)\n")


# --- 11: links, hard links, owner and mode --------------------------------------------------------------

def test_fix_writes_through_a_symlink(project, capsys) -> None:
    (project / "real").mkdir()
    (project / "real" / "a.py").write_text(MARK_STEP)
    os.symlink(os.path.join("real", "a.py"), project / "link.py")
    assert run(capsys, "fix", "link.py")[0] == 0
    assert os.readlink(project / "link.py") == os.path.join("real", "a.py")  # still a link, to the same file
    assert (project / "real" / "a.py").read_text() == FIXED
    assert sorted(os.listdir(project / "real")) == ["a.py"]  # no temporary file left beside the target


def test_fix_keeps_hard_links(project, capsys) -> None:
    (project / "a.py").write_text(MARK_STEP)
    os.link(project / "a.py", project / "b.py")
    inode = os.stat(project / "a.py").st_ino
    assert run(capsys, "fix", "a.py")[0] == 0
    assert (project / "a.py").read_text() == (project / "b.py").read_text() == FIXED
    assert os.stat(project / "a.py").st_ino == os.stat(project / "b.py").st_ino == inode
    assert os.stat(project / "a.py").st_nlink == 2


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file away needs root")
def test_fix_keeps_owner_group_and_mode(project, capsys) -> None:
    path = project / "a.py"
    path.write_text(MARK_STEP)
    os.chown(path, 4321, 4322)
    path.chmod(0o640)
    assert run(capsys, "fix", "a.py")[0] == 0
    info = os.stat(path)
    assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (4321, 4322, 0o640)
    assert path.read_text() == FIXED


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a file away needs root")
def test_fix_refuses_what_would_take_the_file_from_its_owner(project, capsys, monkeypatch) -> None:
    path = project / "a.py"
    path.write_text(MARK_STEP)
    os.chown(path, 4321, 4322)
    path.chmod(0o640)

    def not_allowed(fd, uid, gid):  # what a user who is not root gets
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "fchown", not_allowed)
    code, out, err = run(capsys, "fix", "a.py")
    assert code == 1
    assert err.splitlines()[-1] == (
        f"flake8-xla: a.py: not written: it belongs to uid 4321 gid 4322, and a rewritten copy would belong to "
        f"uid {os.geteuid()} gid {os.getegid()} (run as its owner, or as root)")
    assert path.read_text() == MARK_STEP
    info = os.stat(path)
    assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (4321, 4322, 0o640)
    assert sorted(os.listdir(project)) == [".git", "a.py", "requirements.txt"]


# --- 8: line endings --------------------------------------------------------------------------------

@pytest.mark.parametrize("before, after", [
    (b"import torch_xla.core.xla_model as xm\r\nx = 1\nxm.mark_step()\r\ny = 2\n",
     b"import torch_xla\r\nx = 1\ntorch_xla.sync()\r\ny = 2\n"),
    (b"import torch_xla.core.xla_model as xm\rxm.mark_step()\r", b"import torch_xla\rtorch_xla.sync()\r"),
    (b"import torch_xla.core.xla_model as xm\r\n\r\nxm.mark_step()", b"import torch_xla\r\n\r\ntorch_xla.sync()"),
])
def test_fix_keeps_each_line_ending(project, capsys, before, after) -> None:
    (project / "a.py").write_bytes(before)
    assert run(capsys, "fix", "a.py")[0] == 0
    assert (project / "a.py").read_bytes() == after


# --- 15: names that are not UTF-8, or hold a newline ------------------------------------------------------

BAD_NAME = os.fsdecode(b"bad\xff.py")  # 'bad\udcff.py': how Python spells such a name


@pytest.fixture
def bad_name(project):
    with open(os.path.join(os.fsencode(project), b"bad\xff.py"), "w") as f:
        f.write(MARK_STEP)
    return project


def test_a_name_that_is_not_utf8_in_every_format(bad_name, capsys) -> None:
    code, out, _ = run(capsys, "check", "--no-cache", ".")
    assert (code, out) == (1, f"bad\\xff.py:3:1: {MESSAGE}\n")
    assert json.loads(run(capsys, "check", "--no-cache", "--format", "json", ".")[1])[0]["filename"] == "bad\\xff.py"
    sarif = json.loads(run(capsys, "check", "--no-cache", "--format", "sarif", ".")[1])
    assert sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "bad%5Cxff.py"
    assert run(capsys, "check", "--no-cache", "--format", "github", ".")[1].startswith("::warning file=bad\\xff.py,")
    assert run(capsys, "check", "--no-cache", "--output-file", "report.txt", ".")[:2] == (1, "")
    assert (bad_name / "report.txt").read_text(encoding="utf-8") == f"bad\\xff.py:3:1: {MESSAGE}\n"


def test_a_name_that_is_not_utf8_on_an_ascii_stdout(bad_name) -> None:
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    result = run_cli(bad_name, "check", "--no-cache", ".", env=env)
    assert (result.returncode, result.stdout.decode("ascii")) == (1, f"bad\\xff.py:3:1: {MESSAGE}\n")
    result = run_cli(bad_name, "check", "--no-cache", "--format", "sarif", ".", env=env)
    assert result.returncode == 1 and json.loads(result.stdout)["runs"][0]["results"]
    result = run_cli(bad_name, "fix", ".", env=env)
    assert result.returncode == 0 and b"Traceback" not in result.stderr
    with open(os.path.join(os.fsencode(bad_name), b"bad\xff.py")) as f:
        assert f.read() == FIXED


def test_a_message_that_ascii_cannot_carry_is_escaped(project) -> None:
    (project / "caf\u00e9.py").write_text(MARK_STEP)
    result = run_cli(project, "check", "--no-cache", ".", env=dict(os.environ, PYTHONIOENCODING="ascii"))
    assert (result.returncode, result.stdout.decode("ascii")) == (1, f"caf\\xe9.py:3:1: {MESSAGE}\n")


def test_a_newline_in_a_name_stays_on_one_line(project, capsys) -> None:
    (project / "a\nb.py").write_text(MARK_STEP)
    (project / "tab\t.py").write_text(MARK_STEP)
    code, out, _ = run(capsys, "check", "--no-cache", ".")
    assert (code, out) == (1, f"a\\nb.py:3:1: {MESSAGE}\ntab\\t.py:3:1: {MESSAGE}\n")


# --- 18: default excludes at the project root, .gitignore ---------------------------------------------------

def test_default_excludes_that_can_be_package_names_apply_at_the_root_only(project, capsys) -> None:
    for folder in ("build", "dist", "pkg/dist", "pkg/build", "pkg/__pycache__", "pkg/node_modules/x"):
        (project / folder).mkdir(parents=True)
        (project / folder / "a.py").write_text(MARK_STEP)
    code, out, _ = run(capsys, "check", "--no-cache", ".")
    assert (code, [line.split(":")[0] for line in out.splitlines()]) == (1, ["pkg/build/a.py", "pkg/dist/a.py"])
    # a user's exclude keeps flake8's meaning: a name anywhere
    assert run(capsys, "check", "--no-cache", "--extend-exclude", "dist", ".")[1].splitlines()[0].startswith(
        "pkg/build/a.py:")
    assert run(capsys, "check", "--no-cache", "--exclude", "pkg", ".")[1].split(":")[0] == "build/a.py"


GITIGNORE = """\
# generated code
generated/
*.gen.py
!keep.gen.py
/only_root.py
**/deep/*.py
"""


def test_gitignore_is_respected_unless_told_not_to(project, capsys) -> None:
    names = ["a.py", "generated/g.py", "x.gen.py", "keep.gen.py", "only_root.py", "sub/only_root.py",
             "sub/local.py", "sub/ok.py", "sub/x/deep/d.py", "sub/inner/local.py"]
    for name in names:
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(MARK_STEP)
    (project / ".gitignore").write_text(GITIGNORE)
    (project / "sub" / ".gitignore").write_text("local.py\n")
    code, out, _ = run(capsys, "check", "--no-cache", ".")
    assert [line.split(":")[0] for line in out.splitlines()] == ["a.py", "keep.gen.py", "sub/ok.py",
                                                                 "sub/only_root.py"]
    out = run(capsys, "check", "--no-cache", "--no-respect-gitignore", ".")[1]
    assert len(out.splitlines()) == len(names)
    # the root's .gitignore applies when a subdirectory is checked, too
    assert [line.split(":")[0] for line in run(capsys, "check", "--no-cache", "sub")[1].splitlines()] == [
        "sub/ok.py", "sub/only_root.py"]


def test_outside_a_git_repository_gitignore_means_nothing(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".gitignore").write_text("*.py\n")
    (tmp_path / "a.py").write_text(MARK_STEP)
    assert run(capsys, "check", "--no-cache", "--target-version", "2.9", ".")[0] == 1


def test_verbose_names_the_pattern_that_dropped_a_named_file(project, capsys) -> None:
    (project / "build").mkdir()
    (project / "build" / "a.py").write_text(MARK_STEP)
    (project / "x.gen.py").write_text(MARK_STEP)
    (project / ".gitignore").write_text(GITIGNORE)
    code, out, err = run(capsys, "check", "--no-cache", "--force-exclude", "-v", "build/a.py", "x.gen.py")
    assert (code, out) == (0, "")
    assert "flake8-xla: note: build/a.py: excluded by 'build' (default exclude, at the project root only)\n" in err
    assert "flake8-xla: note: x.gen.py: excluded by '*.gen.py' (.gitignore:3)\n" in err
    # named without --force-exclude, both are checked
    assert run(capsys, "check", "--no-cache", "build/a.py", "x.gen.py")[0] == 1


@pytest.mark.parametrize("pattern, matches, misses", [
    ("*.py", ["a.py", "d/a.py"], ["a.pyc"]),
    ("/top.py", ["top.py"], ["d/top.py"]),
    ("d/*.py", ["d/a.py"], ["x/d/a.py", "d/e/a.py"]),
    ("**/cache", ["cache", "a/b/cache"], ["cachex"]),
    ("a/**", ["a/x", "a/x/y"], ["a", "b/a/x"]),
    ("a/**/z", ["a/z", "a/b/z", "a/b/c/z"], ["b/a/z"]),
    ("fil?.[ch]", ["file.c", "d/filx.h"], ["file.py"]),
    ("[!a]*.py", ["b.py"], ["a.py"]),
    ("\\#lit", ["#lit"], []),
    ("sp\\ ", ["sp "], ["sp"]),
])
def test_gitignore_patterns(pattern, matches, misses) -> None:
    rule = parse_rule(pattern + "\n", ".gitignore:1")
    assert [m for m in matches if rule.matches(m, False)] == matches
    assert [m for m in misses if rule.matches(m, False)] == []


def test_gitignore_comments_blank_lines_negation_and_directories() -> None:
    assert parse_rule("# comment\n", "x") is None and parse_rule("   \n", "x") is None
    negated = parse_rule("!keep.py", "x")
    assert negated.negated and negated.matches("keep.py", False)
    directory = parse_rule("out/", "x")
    assert directory.matches("out", True) and not directory.matches("out", False)
