"""The README's `flake8-xla fix` commands, run as written on the bundled example (examples/ copied
to `src/`), do what their comments say: `--unsafe-fixes` makes the rewrite its comment names, the
safe `fix` leaves it alone."""
import pathlib
import re
import shlex
import shutil

from cli_helpers import run

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = "train_old_api.py"


def readme_command(option: str) -> tuple:
    """The README's shell line that runs `flake8-xla fix` with ``option`` (None: with no option), as
    (argv after `flake8-xla`, its comment)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = []
    for line in readme.splitlines():
        if line.startswith("flake8-xla fix "):
            command, _, comment = line.partition("#")
            argv = shlex.split(command)[1:]
            if (option in argv) if option else len(argv) == 2:
                found.append((argv, comment.strip()))
    assert len(found) == 1, found
    return found[0]


def fixed_example(tmp_path, monkeypatch, capsys, argv) -> str:
    shutil.copytree(ROOT / "examples", tmp_path / "src")
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *argv)
    assert code == 1, err  # diagnostics remain that need a human
    return (tmp_path / "src" / EXAMPLE).read_text(encoding="utf-8")


def test_the_unsafe_fixes_example_makes_the_rewrite_it_names(tmp_path, monkeypatch, capsys) -> None:
    argv, comment = readme_command("--unsafe-fixes")
    assert argv == ["fix", "--unsafe-fixes", "src/"]
    old, new = re.fullmatch(r"also the ones that may change behaviour \((\S+) -> (\S+)\)", comment).groups()
    original = (ROOT / "examples" / EXAMPLE).read_text(encoding="utf-8")
    calls = lambda name, text: len(re.findall(rf"(?<![\w.]){re.escape(name)}\(", text))  # noqa: E731
    assert (calls(old, original), calls(new, original)) == (1, 0)
    fixed = fixed_example(tmp_path, monkeypatch, capsys, argv)
    assert (calls(old, fixed), calls(new, fixed)) == (0, 1)


def test_the_safe_fix_example_leaves_the_unsafe_rewrite_alone(tmp_path, monkeypatch, capsys) -> None:
    argv, comment = readme_command(None)
    assert (argv, comment) == (["fix", "src/"], "apply the safe fixes in place")
    old = re.search(r"\((\S+) -> ", readme_command("--unsafe-fixes")[1]).group(1)
    assert f"{old}(" in fixed_example(tmp_path, monkeypatch, capsys, argv)
