"""README.md stays true for a new user: the two commands come first and exist, every repository
path it names exists, the simulation options it lists are the bringup's, and its solver example
runs."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from conftest import import_or_skip

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_two_commands_are_the_first_section_and_exist():
    sections = re.findall(r"^## (.+)$", README, re.M)
    assert sections[0] == "Two commands", sections
    first = README.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"\n((?:    \S.*\n)+)", first).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    assert commands == ["scripts/sim.sh", "scripts/test.sh"]
    for c in commands:
        assert os.access(ROOT / c, os.X_OK), f"{c} is not an executable file"
    # CI runs the same script (.ci/run -> scripts/test.sh).
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_every_repository_path_named_exists():
    named = set(re.findall(r"`((?:src|docs|scripts|bench|docker|test|requirements)/[\w./-]*)`", README))
    named |= {f"docs/{d}" for d in re.findall(r"`(\w+\.md)`", README.split("| `docs/` |", 1)[1].splitlines()[0])}
    assert len(named) >= 15
    for path in sorted(named):
        assert (ROOT / path).exists(), f"README.md names {path}, which does not exist"


def test_the_simulation_options_listed_are_the_bringups():
    import_or_skip("gato_ros.bringup_sim", "build the workspace (scripts/setup.sh; source scripts/activate.sh)")
    out = subprocess.run([sys.executable, "-m", "gato_ros.bringup_sim", "--help"], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    help_text = " ".join(out.split())
    options = re.findall(r"`(--[a-z-]+)(?: ([\w|]+))?`", README.split("Options:", 1)[1].split("\n\n", 1)[0])
    assert {o for o, _ in options} >= {"--robot", "--duration", "--world", "--reference", "--realtime", "--planner"}
    for opt, choices in options:
        assert opt in help_text, opt
        if "|" in choices:
            shown = re.search(re.escape(opt) + r" \{([\w,]+)\}", help_text).group(1).split(",")
            assert sorted(choices.split("|")) == sorted(shown), (opt, choices, shown)


def test_the_solver_example_runs():
    code = re.search(r"## Use the solver\n\n```python\n(.*?)```", README, re.S).group(1)
    scope = {}
    exec(compile(code, "README.md", "exec"), scope)   # noqa: S102 (the README's own example)
    tau = scope["tau"]
    assert tau.shape == (7,) and np.all(np.isfinite(tau))
