"""gato.sampling's optional ``mujoco_warp`` rollout backend (``SimMPCConfig(backend="warp")``).

On Warp's CPU device it is compared with the default ``mujoco.rollout`` backend: float32 states
of the iiwa14 within a stated tolerance of the float64 ones, and the same plan on a seeded
problem. The CUDA test runs where Warp sees a GPU and skips elsewhere. The config checks and the
missing-dependency error run without the optional packages.
"""
import sys

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from gato.sampling import MjSim, SensorTask, SimMPC, SimMPCConfig, scenes  # noqa: E402
from gato.sampling.sim import RolloutEngine, full_state  # noqa: E402

SLIDE_XML = ('<mujoco><option timestep="0.01"/><worldbody><body><joint name="x" type="slide" damping="5"/>'
             '<geom size="0.05" mass="1"/></body></worldbody><actuator><position joint="x" kp="50"/></actuator>'
             '<sensor><jointpos name="x" joint="x"/></sensor></mujoco>')


def _have_warp() -> bool:
    from gato.sampling.warp_backend import import_warp

    try:
        import_warp()
    except ImportError:
        return False
    return True


needs_warp = pytest.mark.skipif(not _have_warp(), reason="the optional packages mujoco-warp / warp-lang "
                                "are not installed")


def _slide_config(**kw):
    config = SimMPCConfig(num_samples=32, horizon_steps=20, node_steps=10, ctrl_steps=10, max_iterations=2,
                          seed=3, **kw)
    return config.add(SensorTask(np.full((60, 1), 0.3), {"x": 100.0}))


# ------------------------------------------------------------------ without the optional packages
def test_backend_and_device_fields_are_checked():
    with pytest.raises(ValueError, match="backend"):
        SimMPCConfig(backend="gpu")
    with pytest.raises(ValueError, match="device"):
        SimMPCConfig(device="cuda")  # a device belongs to backend "warp" only
    with pytest.raises(ValueError, match="device"):
        SimMPCConfig(backend="warp", device=0)
    assert SimMPCConfig().backend == "cpu" and SimMPCConfig().device is None


def test_missing_optional_packages_name_them(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco_warp", None)  # makes `import mujoco_warp` fail
    model = mujoco.MjModel.from_xml_string(SLIDE_XML)
    with pytest.raises(ImportError, match="mujoco-warp"):
        SimMPC(_slide_config(backend="warp"), MjSim(model, 1), np.zeros((60, 1)))
    # the default backend does not need them
    SimMPC(_slide_config(), MjSim(model, 1), np.zeros((60, 1))).plan(mujoco.MjData(model), 0)


# ------------------------------------------------------------------ Warp's CPU device
def _iiwa_rollouts(device, scene="robot", T=200):
    """(mujoco.rollout, mujoco_warp) rollouts of the iiwa14 (position servos, 5 ms step): 4 worlds,
    T steps of piecewise-constant joint targets (held 25 steps, +-0.3 rad about the start pose).
    scene "robot": the arm alone from the ready pose; "box": the box-pushing scene, the box on the
    table (in contact from the first step)."""
    from gato.sampling.warp_backend import WarpRolloutEngine
    from gato.tasks import Q_READY

    spec = scenes.robot_spec("iiwa14") if scene == "robot" else scenes.box_push_spec()
    scenes.add_frame_sensors(spec, scenes.ee_body("iiwa14"))
    m = spec.compile()
    d = mujoco.MjData(m)
    if scene == "robot":
        d.qpos[:] = Q_READY["iiwa14"]
    else:
        d.qpos[:7] = [0.0, 0.6, 0.0, -1.3, 0.0, 1.2, 0.0]
        d.qpos[7:11] = [0.6, 0.0, 0.19, 1.0]
    mujoco.mj_forward(m, d)
    n = 4
    rng = np.random.default_rng(0)
    # float32-exact controls so both engines see the same commands
    ctrl = d.qpos[None, None, :m.nu] + np.repeat(rng.uniform(-0.3, 0.3, (n, T // 25, m.nu)), 25, axis=1)
    ctrl = ctrl.astype(np.float32).astype(np.float64)
    x0 = np.tile(full_state(m, d), (n, 1))
    warm = np.zeros((n, m.nv))
    ref = RolloutEngine(m, 1)
    s_ref, sd_ref = (a.copy() for a in ref.run(m, x0, warm, ctrl))
    ref.close()
    eng = WarpRolloutEngine(m, device)
    s_w, sd_w = eng.run(m, x0, warm, ctrl)
    assert eng.steps == n * T
    return m, d, s_ref, sd_ref, s_w, sd_w


@needs_warp
def test_warp_cpu_rollouts_match_mujoco_rollout():
    m, _, s_ref, sd_ref, s_w, sd_w = _iiwa_rollouts("cpu")
    assert s_w.shape == s_ref.shape and sd_w.shape == sd_ref.shape
    assert np.allclose(s_w[..., 0], s_ref[..., 0], atol=1e-4)  # time, stepped in float32
    q = slice(1, 1 + m.nq)
    v = slice(1 + m.nq, 1 + m.nq + m.nv)
    # float32 vs float64 over 200 stiff-servo steps: joint angles within 1e-3 rad (measured ~1e-4),
    # velocities within 5e-2 rad/s, the EE sensors (position, orientation) within 1e-3.
    assert np.max(np.abs(s_w[..., q] - s_ref[..., q])) < 1e-3
    assert np.max(np.abs(s_w[..., v] - s_ref[..., v])) < 5e-2
    assert np.max(np.abs(sd_w - sd_ref)) < 1e-3
    # the rollouts did move (the comparison is not of two resting arms)
    assert np.max(np.abs(s_ref[:, -1, q] - s_ref[:, 0, q])) > 0.05


@needs_warp
def test_warp_cpu_contact_rollouts_match_mujoco_rollout():
    """The box-pushing scene (mujoco_warp's collision pipeline): the box rests on the table while
    the arm moves above it (0.5 s)."""
    m, d, s_ref, _, s_w, _ = _iiwa_rollouts("cpu", scene="box", T=100)
    assert d.ncon > 0  # in contact from the start
    q = slice(1, 1 + m.nq)
    # joint angles and the box pose within 1e-3 (rad, m, quaternion units; measured ~3e-5)
    assert np.max(np.abs(s_w[..., q] - s_ref[..., q])) < 1e-3
    # the table holds the box up in both (0.5 s of free fall would drop it 1.2 m): its centre stays
    # at table height + half size = 0.19 m, to the contact's penetration
    z = 1 + 9
    assert np.all(np.abs(s_ref[:, :, z] - 0.19) < 1e-3) and np.all(np.abs(s_w[:, :, z] - 0.19) < 1e-3)


@needs_warp
def test_warp_cpu_plan_matches_cpu_plan():
    model = mujoco.MjModel.from_xml_string(SLIDE_XML)
    out = {}
    for backend, kw in (("cpu", {}), ("warp", {"device": "cpu"})):
        mpc = SimMPC(_slide_config(backend=backend, **kw), MjSim(model, 1, nthread=1), np.zeros((60, 1)))
        d = mujoco.MjData(model)
        seq = []
        for t0 in (0, 10):
            cmd, infos = mpc.plan(d, t0)
            seq.append((cmd.copy(), infos[0]["plan_cost"], infos[0]["iterations"]))
        out[backend] = seq
        mpc.close()
    for (ca, pa, ia), (cw, pw, iw) in zip(out["cpu"], out["warp"]):
        assert ia == iw  # the same iterations ran
        assert np.allclose(cw, ca, atol=1e-4)  # the same plan, to float32 rounding
        assert pw == pytest.approx(pa, rel=1e-3)


@needs_warp
def test_sampling_planner_takes_the_backend():
    from gato.sampling.planner import SamplingPlanner
    from gato.sampling.warp_backend import WarpRolloutEngine

    p = SamplingPlanner("iiwa14", {"backend": "warp", "device": "cpu", "nthread": 1})
    assert isinstance(p.mpc.engine, WarpRolloutEngine) and p.mpc.engine.device == "cpu"
    with pytest.raises(ValueError, match="backend"):
        SamplingPlanner("iiwa14", {"backend": "cuda"})


# ------------------------------------------------------------------ a CUDA device
def _cuda() -> bool:
    from gato.sampling.warp_backend import cuda_available

    return cuda_available()  # False also where the optional packages are missing


@pytest.mark.skipif(not _cuda(), reason="no CUDA device: Warp sees no GPU here (or mujoco-warp is not installed)")
def test_warp_cuda_rollouts_match_mujoco_rollout():
    m, _, s_ref, sd_ref, s_w, sd_w = _iiwa_rollouts("cuda:0")
    q = slice(1, 1 + m.nq)
    assert np.max(np.abs(s_w[..., q] - s_ref[..., q])) < 1e-3
    assert np.max(np.abs(sd_w - sd_ref)) < 1e-3
