"""Everything is in setup.cfg; this only ships the top-level rules/ data inside the package."""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

DATA = "rules"
SHIPPED_AS = os.path.join("flake8_xla", "rule_data")  # where flake8_xla/ruledata.py looks first


class BuildWithRuleData(build_py):
    """The wheel carries rules/*.yaml|yml|json as flake8_xla/rule_data/; an editable install reads
    them from the checkout instead."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = os.path.join(self.build_lib, SHIPPED_AS)
        self.mkpath(target)
        for name in sorted(os.listdir(DATA)):
            if name.endswith((".yaml", ".yml", ".json")):
                self.copy_file(os.path.join(DATA, name), os.path.join(target, name))


setup(cmdclass={"build_py": BuildWithRuleData})
