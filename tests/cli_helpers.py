"""What the CLI tests share: running `flake8-xla` in-process and reading what it printed."""
from flake8_xla.cli import main


def run(capsys, *argv):
    """``main(argv)``'s exit code, stdout and stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
