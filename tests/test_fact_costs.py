"""benchmarks/fact_costs.py charges each fact and rule its own time, once per build or run."""
import json
import pathlib
import subprocess
import sys

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "fact_costs.py"
STEP = ("import torch_xla\n\nfor data, target in loader:\n    loss = model(data)\n    loss.backward()\n"
        "    optimizer.step()\n    print(loss.item())\n    torch_xla.sync()\n")


def test_each_fact_is_charged_once_per_file_and_each_rule_once(tmp_path: pathlib.Path) -> None:
    (tmp_path / "a.py").write_text(STEP, encoding="utf-8")
    (tmp_path / "b.py").write_text(STEP.replace("print(loss.item())", "losses.append(loss.detach())"), encoding="utf-8")
    out = tmp_path / "costs.json"
    run = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--json", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    labels = json.loads(out.read_text(encoding="utf-8"))["labels"]
    assert labels["fact analysis.semantic.SemanticModel"]["calls"] == 2
    assert labels["fact analysis.syntax.NodeIndex"]["calls"] == 2
    assert labels["rule XLA303"]["calls"] == 2
    assert all(entry["seconds"] >= 0 for label, entry in labels.items() if label != "other")
    assert "a.py:7:11: XLA303" in run.stdout and "b.py" not in run.stdout
