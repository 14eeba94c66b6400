"""The two pre-commit hooks of ``.pre-commit-hooks.yaml``, run by the real pre-commit.

pre-commit installs a hook repository by cloning it at a commit and ``pip install .``-ing it into
a fresh virtualenv. The hook repository here is a snapshot of this checkout's working tree (tracked
files as they are on disk plus untracked, not ignored ones) committed into a temporary repository,
so in development the tests see uncommitted edits, and in CI (a clean clone) they see the commit.
Pointing pre-commit at the checkout itself would not do: ``rev: HEAD`` misses uncommitted changes,
and ``pre-commit try-repo`` commits only modified *tracked* files (a new manifest is missed) and
builds the hook environment in a throwaway store on every call, ignoring ``PRE_COMMIT_HOME``.

One ``PRE_COMMIT_HOME`` serves the module, so the environment is built once (about ten seconds;
pip needs the package index for the build backend); every test then gets a fresh project repository.
"""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

MARK_STEP = "import torch_xla.core.xla_model as xm\nxm.mark_step()\n"
MARK_STEP_LINE = ("a.py:2:1: XLA102 [*] xm.mark_step() is deprecated since torch_xla 2.8; use torch_xla.sync() "
                  "(2.4+)")
FIXED = "import torch_xla\ntorch_xla.sync()\n"
GIT = ("git", "-c", "user.email=tests@flake8-xla.invalid", "-c", "user.name=flake8-xla tests",
       "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main")


def _env(**extra: str) -> dict:
    # GIT_* from an enclosing git hook (GIT_DIR, GIT_INDEX_FILE, ...) would redirect the temporary repositories
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.update(extra)
    return env


def git(cwd: pathlib.Path, *args: str) -> str:
    result = subprocess.run([*GIT, *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=_env())
    assert result.returncode == 0, f"git {' '.join(args)} failed:\n{result.stdout}{result.stderr}"
    return result.stdout


def commit_all(repo: pathlib.Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def snapshot_checkout(dest: pathlib.Path) -> str:
    """Copy the working tree's tracked and untracked-but-not-ignored files into a new repository."""
    listed = git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0")
    for name in sorted(set(filter(None, listed))):
        source = ROOT / name
        target = dest / name
        if source.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(source), target)
        elif source.is_file():  # not deleted in the working tree, not a submodule
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    git(dest, "init", "-q")
    return commit_all(dest, "snapshot of the flake8-xla checkout")


class PreCommit:
    def __init__(self, hook_repo: pathlib.Path, rev: str, home: pathlib.Path) -> None:
        self.hook_repo, self.rev, self.home = hook_repo, rev, home

    def config(self) -> str:
        return (f"repos:\n"
                f"-   repo: {self.hook_repo}\n"
                f"    rev: {self.rev}\n"
                f"    hooks:\n"
                f"    -   id: flake8-xla\n"
                f"    -   id: flake8-xla-fix\n")

    def __call__(self, project: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pre_commit", *args], cwd=project, capture_output=True,
                              text=True, timeout=600, env=_env(PRE_COMMIT_HOME=str(self.home)))

    def run(self, project: pathlib.Path, hook: str, *files: str) -> subprocess.CompletedProcess:
        return self(project, "run", "--color=never", hook, "--files", *files)


@pytest.fixture(scope="module")
def pre_commit(tmp_path_factory) -> PreCommit:
    """The hook repository snapshot and a pre-commit cache with its environment already installed."""
    base = tmp_path_factory.mktemp("pre-commit")
    hook_repo = base / "flake8-xla"
    hook_repo.mkdir()
    runner = PreCommit(hook_repo, snapshot_checkout(hook_repo), base / "cache")
    warmup = base / "warmup"
    warmup.mkdir()
    git(warmup, "init", "-q")
    (warmup / ".pre-commit-config.yaml").write_text(runner.config())
    commit_all(warmup, "config")
    result = runner(warmup, "install-hooks")
    assert result.returncode == 0, f"building the hook environment failed:\n{result.stdout}{result.stderr}"
    return runner


@pytest.fixture
def project(tmp_path, pre_commit) -> pathlib.Path:
    """A git repository that pins torch_xla 2.9 and configures both hooks."""
    git(tmp_path, "init", "-q")
    (tmp_path / ".pre-commit-config.yaml").write_text(pre_commit.config())
    (tmp_path / "requirements.txt").write_text("torch_xla==2.9.0\n")
    return tmp_path


def status_line(output: str, hook_name: str) -> str:
    """pre-commit's ``name.....Passed`` line for one hook."""
    lines = [line for line in output.splitlines() if line.startswith(hook_name + ".")]
    assert len(lines) == 1, output
    return lines[0]


def test_manifest_declares_both_hooks() -> None:
    from pre_commit.clientlib import load_manifest

    hooks = {hook["id"]: hook for hook in load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))}
    assert sorted(hooks) == ["flake8-xla", "flake8-xla-fix"]
    assert hooks["flake8-xla"]["entry"] == "flake8-xla check --force-exclude"
    assert hooks["flake8-xla-fix"]["entry"] == "flake8-xla fix --show-fixes --force-exclude"
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["types_or"] == ["python", "pyi", "jupyter", "markdown", "rst"]
        assert hook["require_serial"] is True  # the CLI runs its own workers


def test_check_hook_fails_on_a_deprecated_call(project, pre_commit) -> None:
    (project / "a.py").write_text(MARK_STEP)
    commit_all(project, "deprecated call")
    result = pre_commit.run(project, "flake8-xla", "a.py")
    assert result.returncode == 1, result.stdout + result.stderr
    assert status_line(result.stdout, "flake8-xla").endswith("Failed")
    assert "- exit code: 1" in result.stdout.splitlines()
    assert MARK_STEP_LINE in result.stdout.splitlines()
    assert (project / "a.py").read_text() == MARK_STEP  # check never writes


def test_check_hook_passes_a_clean_file(project, pre_commit) -> None:
    (project / "b.py").write_text(FIXED)
    commit_all(project, "clean")
    result = pre_commit.run(project, "flake8-xla", "b.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert status_line(result.stdout, "flake8-xla").endswith("Passed")
    assert "XLA" not in result.stdout


def test_fix_hook_rewrites_then_passes(project, pre_commit) -> None:
    (project / "a.py").write_text(MARK_STEP)
    commit_all(project, "deprecated call")

    first = pre_commit.run(project, "flake8-xla-fix", "a.py")
    assert first.returncode == 1, first.stdout + first.stderr
    assert status_line(first.stdout, "flake8-xla fix").endswith("Failed")
    assert "- files were modified by this hook" in first.stdout.splitlines()
    # what was fixed is shown with its message, not only that the file changed
    assert MARK_STEP_LINE.replace(" [*]", "") in first.stdout.splitlines()
    assert (project / "a.py").read_text() == FIXED
    assert git(project, "diff", "--name-only").split() == ["a.py"]

    second = pre_commit.run(project, "flake8-xla-fix", "a.py")
    assert second.returncode == 0, second.stdout + second.stderr
    assert status_line(second.stdout, "flake8-xla fix").endswith("Passed")
    assert (project / "a.py").read_text() == FIXED

    check = pre_commit.run(project, "flake8-xla", "a.py")
    assert check.returncode == 0, check.stdout + check.stderr


def test_hooks_cover_notebooks_and_documents(project, pre_commit) -> None:
    fence = "# Guide\n\n```python\n" + MARK_STEP + "```\n"
    (project / "guide.md").write_text(fence)
    (project / "notes.txt").write_text(fence)  # not a type the hooks select
    commit_all(project, "docs")
    result = pre_commit.run(project, "flake8-xla", "guide.md", "notes.txt")
    assert result.returncode == 1, result.stdout + result.stderr
    reported = [line for line in result.stdout.splitlines() if ": XLA" in line]
    assert reported == [MARK_STEP_LINE.replace("a.py:2:1", "guide.md:5:1")]
    fixed = pre_commit.run(project, "flake8-xla-fix", "guide.md")
    assert fixed.returncode == 1 and (project / "guide.md").read_text() == "# Guide\n\n```python\n" + FIXED + "```\n"


def test_the_documented_config_pins_a_commit_with_autoupdate(tmp_path, pre_commit) -> None:
    """docs/pre-commit.md's first configuration, pointed at the hook repository, then `pre-commit
    autoupdate` as the page says: with no release tagged, rev becomes the newest commit, and the
    hooks run from there."""
    import re

    page = (ROOT / "docs" / "pre-commit.md").read_text(encoding="utf-8")
    config = re.search(r"```yaml\n(repos:\n.*?)```", page, re.S).group(1)
    assert "https://github.com/flake8-xla/flake8-xla" in config
    git(tmp_path, "init", "-q")
    (tmp_path / ".pre-commit-config.yaml").write_text(
        config.replace("https://github.com/flake8-xla/flake8-xla", str(pre_commit.hook_repo)))
    (tmp_path / "requirements.txt").write_text("torch_xla==2.9.0\n")
    updated = pre_commit(tmp_path, "autoupdate")
    assert updated.returncode == 0, updated.stdout + updated.stderr
    written = (tmp_path / ".pre-commit-config.yaml").read_text()
    assert re.findall(r"rev: (.*)", written) == [pre_commit.rev]
    (tmp_path / "a.py").write_text(MARK_STEP)
    commit_all(tmp_path, "deprecated call")
    result = pre_commit(tmp_path, "run", "--color=never", "--files", "a.py")
    assert result.returncode == 1, result.stdout + result.stderr
    assert status_line(result.stdout, "flake8-xla fix").endswith("Failed")
    assert MARK_STEP_LINE.replace(" [*]", "") in result.stdout.splitlines()  # what it fixed, with its message
    assert (tmp_path / "a.py").read_text() == FIXED
    commit_all(tmp_path, "fixed")
    again = pre_commit(tmp_path, "run", "--color=never", "--files", "a.py")
    assert again.returncode == 0 and status_line(again.stdout, "flake8-xla fix").endswith("Passed"), again.stdout
