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


def test_push_only_schedule_face_target_and_hand_geoms_are_options_of_the_task():
    """box_push_task's contact options (issue 39; the bench's before): contact_until="push" wants
    the contact in the push phase only, contact_target="face" on a non-colliding marker at the
    centre of the face behind the push, contact_geoms="hand" of any hand geom (HAND_GEOMS: the
    sphere tool and the L7 / L6 hulls, all named in box_push_spec); the box's inertia is explicit
    (a solid 8 cm cube of 0.4 kg, whatever the loader's inertiafromgeom)."""
    sc = scenes.box_push_scenarios(10, seed=0)[1]
    spec, cfg, qs, q0, n = scenes.box_push_task(sc, timestep=0.01, guide="hold", standoff=0.1, contact_weight=100.0,
                                                contact_until="push", contact_target="face", contact_geoms="hand")
    steps = {k: int(round(v / 0.01)) for k, v in scenes.PUSH_PHASES.items()}
    push_from = steps["approach"] + steps["descend"]
    (a, b, wanted, w), = cfg.task("contacts").contacts
    assert (list(a), b, w) == (list(scenes.HAND_GEOMS), "push_face", 100.0)
    assert wanted[:push_from].max() == 0.0 and wanted[push_from:push_from + steps["push"]].min() == 1.0
    assert wanted[push_from + steps["push"]:].max() == 0.0 and len(wanted) == len(qs)
    m = spec.compile()
    box = m.body("box").id
    assert m.body_mass[box] == pytest.approx(0.4) and np.allclose(m.body_inertia[box], 0.4 * 0.08 ** 2 / 6)
    assert np.allclose(m.body_ipos[box], 0.0)
    face = m.geom("push_face")
    assert face.contype[0] == 0 and m.geom_bodyid[face.id] == box
    u = (sc["goal"] - sc["start"]) / np.linalg.norm(sc["goal"] - sc["start"])
    assert np.allclose(face.pos[:2], -u * scenes.BOX["half"])
    for g in scenes.HAND_GEOMS:
        assert m.geom(g).id >= 0
    mpc = SimMPC(cfg, MjSim(spec, 1, nthread=1), qs)
    for g in scenes.HAND_GEOMS:
        assert mpc.model.sensor(f"sampling/dist/{g}|push_face").id >= 0
    mpc.close()
    # the default: the sphere tool, wanted to the end, on the whole box
    (a, b, wanted, _), = scenes.box_push_task(sc, timestep=0.01, guide="hold", standoff=0.1,
                                               contact_weight=100.0)[1].task("contacts").contacts
    assert (a, b) == (scenes.TOOL_GEOM, "box") and wanted[push_from:].min() == 1.0
    for kw, name in ((dict(contact_until="hold"), "contact_until"), (dict(contact_target="top"), "contact_target"),
                     (dict(contact_geoms="arm"), "contact_geoms"), (dict(face_radius=0.0), "face_radius")):
        with pytest.raises(ValueError, match=f"^{name}:"):
            scenes.box_push_task(sc, guide="hold", contact_weight=100.0, **kw)


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
