"""The shipped parameter files (src/gato_bringup/config/<robot>.yaml, generated from the schema) carry
each arm's shipped BSQP weights (gato.planners.shipped_weights: u_ref gravity and the weights tuned
with it, issue 30), and the controller's logic resolves them into its solver: what scripts/sim.sh
runs. Their closed-loop tracking: test/test_shipped_weights.py (Python loop) and
test/test_ros_system.py (the bringup)."""
from pathlib import Path

import pytest
import yaml

from conftest import import_or_skip

import_or_skip("gato", "build the workspace (scripts/setup.sh)")
cl = import_or_skip("gato_ros.controller_logic", "build the workspace and source install/setup.bash "
                    "(scripts/setup.sh; source scripts/activate.sh)")
from gato.core.config import SolverParams  # noqa: E402
from gato.planners.shipped_weights import SHIPPED_WEIGHTS, shipped_weights  # noqa: E402
from gato_ros import params as schema  # noqa: E402

CONFIG = Path(__file__).resolve().parents[1] / "src" / "gato_bringup" / "config"


@pytest.mark.parametrize("robot", schema.ROBOTS)
def test_each_shipped_parameter_file_runs_the_arms_shipped_weights(robot):
    node = yaml.safe_load((CONFIG / f"{robot}.yaml").read_text())["gato_controller"]["ros__parameters"]
    weights = shipped_weights(robot)
    assert weights["u_ref"] == "gravity"
    assert {k: node[k] for k in weights} == weights
    logic = cl.ControllerLogic(node)
    for k, v in weights.items():
        assert logic.cfg[k] == v, k
        assert getattr(logic.solver.params, k) == v, k
    # the fields the table leaves out keep the struct's defaults (e.g. the limit barrier, mu)
    for k in ("q_lim_cost", "mu", "rho", "max_pcg_iters"):
        assert k not in weights and getattr(logic.solver.params, k) == getattr(SolverParams(), k), k


def test_every_arm_with_a_parameter_file_has_shipped_weights():
    assert set(schema.ROBOTS) == set(SHIPPED_WEIGHTS)


@pytest.mark.parametrize("robot", schema.ROBOTS)
def test_each_parameter_file_names_the_command_and_figures_of_its_weights(robot):
    """Issue 30: the shipped file says where its cost weights come from: the held-out command and
    its figures, the same as docs/benchmarks_arms.md's "Shipped BSQP weights per arm" tables."""
    from gato_ros.param_files import SHIPPED_WEIGHT_FIGURES

    head = (CONFIG / f"{robot}.yaml").read_text().split("gato_controller:")[0]
    held, ref, sim = SHIPPED_WEIGHT_FIGURES[robot]
    assert f"python bench/fig8_heldout.py --robot {robot} --seeds 200 201 --n 3 --bringup" in head
    assert f"gives {held:g} mm" in head and f"reference's weights: {ref:.1f} mm" in head and f"{sim:g} mm" in head
    doc = (CONFIG.parents[2] / "docs" / "benchmarks_arms.md").read_text()
    assert f"| {robot} | {ref:.1f} (" in doc and f"| **{held:.2f} (" in doc.split(f"| {robot} | {ref:.1f} (")[1][:40]
    assert f"| **{sim:.2f} / " in doc.split("| arm | reference weights (shipped today)")[1].split(f"| {robot} |")[1][:30]
