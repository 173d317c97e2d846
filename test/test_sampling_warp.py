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
    for field, bad in (("nconmax", 0), ("njmax", 1.5), ("cuda_graph_mode", "always")):
        with pytest.raises(ValueError, match=field):
            SimMPCConfig(backend="warp", **{field: bad})
    c = SimMPCConfig()
    assert (c.nconmax, c.njmax, c.cuda_graph_mode) == (64, 256, "step")


def test_missing_optional_packages_name_them(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco_warp", None)  # makes `import mujoco_warp` fail
    model = mujoco.MjModel.from_xml_string(SLIDE_XML)
    with pytest.raises(ImportError, match="mujoco-warp"):
        SimMPC(_slide_config(backend="warp"), MjSim(model, 1), np.zeros((60, 1)))
    # the default backend does not need them
    SimMPC(_slide_config(), MjSim(model, 1), np.zeros((60, 1))).plan(mujoco.MjData(model), 0)


# ------------------------------------------------------------------ Warp's CPU device
def _iiwa_rollouts(device, scene="robot", T=200, **engine_kw):
    """(mujoco.rollout, mujoco_warp) rollouts of the iiwa14 (position servos, 5 ms step): 4 worlds,
    T steps of piecewise-constant joint targets (held 25 steps, +-0.3 rad about the start pose).
    scene "robot": the arm alone from the ready pose; "box": the box-pushing scene, the box on the
    table (in contact from the first step). engine_kw: WarpRolloutEngine's keywords."""
    from gato.sampling.warp_backend import WarpRolloutEngine

    m, d = scenes.rollout_start(scene)
    n = 4
    ctrl = scenes.hold_targets(m, d, n, T, 0.3)
    x0 = np.tile(full_state(m, d), (n, 1))
    warm = np.zeros((n, m.nv))
    ref = RolloutEngine(m, 1)
    s_ref, sd_ref = (a.copy() for a in ref.run(m, x0, warm, ctrl))
    ref.close()
    eng = WarpRolloutEngine(m, device, **engine_kw)
    s_w, sd_w = eng.run(m, x0, warm, ctrl)
    assert eng.steps == n * T and eng.regrows == 0
    graph = engine_kw.get("graph")
    # None: graphs on a CUDA device only; a capture that failed would have turned them off
    assert eng.graph == (device.startswith("cuda") if graph is None else graph)
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


# six free boxes (half size 4 cm) on a plane (1 mm in it at the start), 4 contacts each when resting: 24 contacts and 96
# constraint rows (pyramidal friction cones) per world
BOXES_XML = ('<mujoco><option timestep="0.005"/><worldbody><geom type="plane" size="1 1 .1"/>'
             + "".join(f'<body pos="{0.2 * (i % 3)} {0.2 * (i // 3)} .039"><freejoint/>'
                       '<geom type="box" size=".04 .04 .04"/></body>' for i in range(6))
             + '</worldbody></mujoco>')


def _boxes_rollout(engine, m, qvel_z=0.0, n=2, T=10):
    """engine.run of n worlds x T steps of BOXES_XML from rest on the plane (each box moving up at
    qvel_z m/s); the box heights (n, T, 6) [m]."""
    d = mujoco.MjData(m)
    d.qvel[2::6] = qvel_z
    mujoco.mj_forward(m, d)
    state, _ = engine.run(m, np.tile(full_state(m, d), (n, 1)), np.zeros((n, m.nv)), np.zeros((n, T, 0)))
    return state[..., 1 + 2:1 + m.nq:7]


@needs_warp
@pytest.mark.parametrize("graph", [False, True])
def test_warp_buffer_overflow_is_rerun_with_grown_capacity(graph, caplog):
    """Capacities below the scene's demand (nconmax 16 x 2 worlds < 48 contacts, njmax 32 < 96
    rows): the call is re-run once with both grown, logged, and returns what ample buffers give
    (mujoco_warp drops the contacts that do not fit: a world's boxes would fall through). graph:
    the captured-step path (Warp's CPU device replays the graph in C++), rebuilt after the growth."""
    from gato.sampling.warp_backend import WarpRolloutEngine

    m = mujoco.MjModel.from_xml_string(BOXES_XML)
    ample = _boxes_rollout(WarpRolloutEngine(m, "cpu"), m)
    assert np.all(np.abs(ample - 0.04) < 2e-3)  # the plane holds every box
    eng = WarpRolloutEngine(m, "cpu", nconmax=16, njmax=32, graph=graph)
    with caplog.at_level("WARNING", logger="gato.sampling.warp_backend"):
        z = _boxes_rollout(eng, m)
    assert eng.regrows == 1 and eng.capacity == {"nconmax": 32, "njmax": 96}
    assert "nconmax" in caplog.text and "njmax" in caplog.text
    assert np.allclose(z, ample, atol=1e-6)
    assert eng.steps == 2 * 2 * 10  # the re-run's steps are counted
    _boxes_rollout(eng, m)  # the grown buffers are kept: no second re-run
    assert eng.regrows == 1


@needs_warp
def test_warp_buffer_overflow_that_persists_names_the_field():
    """Boxes launched off the plane: contacts in the first step only, so the re-run's capacity
    (double, 4 -> 8 per world) still overflows; the error names SimMPCConfig's field."""
    from gato.sampling.warp_backend import WarpRolloutEngine

    m = mujoco.MjModel.from_xml_string(BOXES_XML)
    eng = WarpRolloutEngine(m, "cpu", nconmax=4)
    with pytest.raises(RuntimeError, match=r"^nconmax: .*increase SimMPCConfig\.nconmax"):
        _boxes_rollout(eng, m, qvel_z=2.0)
    assert eng.regrows == 1


@needs_warp
def test_warp_cpu_graph_replay_matches_eager_steps():
    """The captured-step path (graph=True; on a CUDA device the default) gives the eager path's
    rollouts on Warp's CPU device, where the default stays eager."""
    from gato.sampling.warp_backend import WarpRolloutEngine

    m, d = scenes.rollout_start("robot")
    n, T = 3, 30
    ctrl = scenes.hold_targets(m, d, n, T, 0.3)
    x0, warm = np.tile(full_state(m, d), (n, 1)), np.zeros((n, m.nv))
    eager = WarpRolloutEngine(m, "cpu")
    assert eager.graph is False
    s_e, sd_e = eager.run(m, x0, warm, ctrl)
    replay = WarpRolloutEngine(m, "cpu", graph=True)
    for _ in range(2):  # captured on the first call, replayed on both
        s_g, sd_g = replay.run(m, x0, warm, ctrl)
        assert np.allclose(s_g, s_e, atol=1e-6) and np.allclose(sd_g, sd_e, atol=1e-6)
    assert np.max(np.abs(s_e[:, -1, 1:8] - s_e[:, 0, 1:8])) > 0.01  # the arm moved


@needs_warp
def test_warp_failed_graph_capture_falls_back_to_eager_steps(monkeypatch, caplog):
    import warp as wp

    from gato.sampling.warp_backend import WarpRolloutEngine

    m = mujoco.MjModel.from_xml_string(BOXES_XML)
    ref = _boxes_rollout(WarpRolloutEngine(m, "cpu"), m)

    class NoCapture:
        def __init__(self, **kw):
            pass

        def __enter__(self):
            raise RuntimeError("graph capture is not supported here")

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(wp, "ScopedCapture", NoCapture)
    eng = WarpRolloutEngine(m, "cpu", graph=True)
    with caplog.at_level("WARNING", logger="gato.sampling.warp_backend"):
        z = _boxes_rollout(eng, m)
    assert eng.graph is False and "not supported here" in caplog.text
    assert np.array_equal(z, ref)


@needs_warp
def test_sampling_planner_takes_the_backend():
    from gato.sampling.planner import SamplingPlanner
    from gato.sampling.warp_backend import WarpRolloutEngine

    p = SamplingPlanner("iiwa14", {"backend": "warp", "device": "cpu", "nthread": 1, "nconmax": 32})
    assert isinstance(p.mpc.engine, WarpRolloutEngine) and p.mpc.engine.device == "cpu"
    assert p.mpc.engine.capacity == {"nconmax": 32, "njmax": 256} and p.mpc.engine.graph is False
    with pytest.raises(ValueError, match="backend"):
        SamplingPlanner("iiwa14", {"backend": "cuda"})


# ------------------------------------------------------------------ a CUDA device
def _cuda() -> bool:
    from gato.sampling.warp_backend import cuda_available

    return cuda_available()  # False also where the optional packages are missing


@pytest.mark.skipif(not _cuda(), reason="no CUDA device: Warp sees no GPU here (or mujoco-warp is not installed)")
@pytest.mark.parametrize("graph", [None, False])
def test_warp_cuda_rollouts_match_mujoco_rollout(graph):
    """graph None: each step replays a captured CUDA graph (the default on a GPU); False: eager."""
    for scene, T in (("robot", 200), ("box", 100)):
        m, _, s_ref, sd_ref, s_w, sd_w = _iiwa_rollouts("cuda:0", scene=scene, T=T, graph=graph)
        q = slice(1, 1 + m.nq)
        assert np.max(np.abs(s_w[..., q] - s_ref[..., q])) < 1e-3
        if scene == "robot":
            assert np.max(np.abs(sd_w - sd_ref)) < 1e-3
