"""Box pushing where StateTask's contact terms matter (scenes.box_push_task(guide="hold")): the task
as built, and a CI-sized closed loop of bench/bench_sampling_box_contacts.py (docs/benchmarks_sampling.md,
"Sampling planner: box pushing with StateTask contact terms")."""
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
pytest.importorskip("pinocchio")

from gato.sampling import MjSim, SimMPC, StateTask, scenes  # noqa: E402


def test_hold_task_scripts_no_push_and_wants_the_contact():
    sc = scenes.box_push_scenarios(10, seed=0)[1]
    spec, cfg, qs, q0, n = scenes.box_push_task(sc, timestep=0.01, guide="hold", standoff=0.1, contact_weight=100.0)
    _, cfg_path, qs_path, _, n_path = scenes.box_push_task(sc, timestep=0.01)
    assert n == n_path and qs.shape == qs_path.shape
    steps = {k: int(round(v / 0.01)) for k, v in scenes.PUSH_PHASES.items()}
    push_from = steps["approach"] + steps["descend"]
    # from the push on the joint reference holds (the scripted path moves on)
    assert np.abs(qs[push_from:] - qs[push_from]).max() < 1e-9
    assert np.abs(qs_path[push_from + steps["push"] - 2] - qs_path[push_from]).max() > 0.05
    contacts = cfg.task("contacts")
    assert isinstance(contacts, StateTask) and not np.any(contacts.dof_weight)
    (a, b, wanted, w), = contacts.contacts
    assert (a, b, w) == (scenes.TOOL_GEOM, "box", 100.0)
    assert wanted[:push_from].max() == 0.0 and wanted[push_from:].min() == 1.0
    mpc = SimMPC(cfg, MjSim(spec, 1, nthread=1), qs)
    assert mpc.model.sensor(f"sampling/dist/{scenes.TOOL_GEOM}|box").id >= 0
    mpc.close()
    with pytest.raises(ValueError, match="^guide:"):
        scenes.box_push_task(sc, guide="push")


def _final_box_error(sc, contact_weight):
    spec, cfg, qs, q0, n = scenes.box_push_task(sc, timestep=0.01, num_samples=32, guide="hold", standoff=0.1,
                                                ctrl_std=0.01, contact_weight=contact_weight)
    mpc = SimMPC(cfg, MjSim(spec, 1, nthread=2), qs)
    ex = MjSim(mpc.model, 1)
    d = ex.data[0]
    d.qpos[:7] = q0
    d.ctrl[:] = q0
    mujoco.mj_forward(mpc.model, d)
    (rows,), _ = mpc.execute(ex, n)
    mpc.close()
    return float(np.linalg.norm(rows["qpos"][-1, 7:9] - sc["goal"]))


@pytest.mark.slow
def test_contact_terms_push_the_box_where_the_box_cost_alone_does_not():
    """box_push_scenarios(10, seed=0)[1] (a tuning scene of the bench), 32 samples at a 10 ms step,
    the tool held 10 cm behind the box: without contact terms the box ends far from its goal
    (136 mm here), with the wanted tool-box contact (weight 100) near it (25 mm); the bench's
    held-out 10-scene study: docs/benchmarks_sampling.md."""
    sc = scenes.box_push_scenarios(10, seed=0)[1]
    without, with_terms = _final_box_error(sc, 0.0), _final_box_error(sc, 100.0)
    assert without > 0.08 and with_terms < 0.04, (without, with_terms)
