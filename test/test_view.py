"""The live view (issue 36): gato_ros.view_logic (ROS-free), and the simulation bringup with the
view (``python -m gato_ros.bringup_sim --view``, what ``scripts/sim.sh --view`` runs) looked at
as a person would: the page in headless Chromium (Debian's package, installed on first use),
the Foxglove WebSocket server with a protocol client, and both servers gone with the bringup.
"""
import json
import os
import signal
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from conftest import import_or_skip, processes_with_env
from localhost_ports import free_port as _free_port, port_open as _port_open

_HINT = "build the workspace and source install/setup.bash (scripts/setup.sh; source scripts/activate.sh)"
pin = import_or_skip("pinocchio", "install the lock (scripts/setup.sh)")
import_or_skip("gato_ros.view_logic", _HINT)
from gato_ros.types import JointStateSample, Plan, ReferenceWindow  # noqa: E402
from gato_ros.view_logic import MAX_BATCH_PATHS, RobotGeometry, ViewLogic  # noqa: E402

ROBOT = "iiwa14"
NAMES = [f"A{i}" for i in range(1, 8)]


@pytest.fixture(scope="module")
def geometry():
    return RobotGeometry(ROBOT)


def _q(rng):
    return rng.uniform(-1.0, 1.0, 7)


# ------------------------------------------------------------------ the logic, without ROS
def test_robot_geometry_has_every_mesh_and_pinocchio_kinematics(geometry):
    import gato

    assert geometry.missing == []
    meshes = [v for v in geometry.visuals if v.mesh_path]
    assert len(meshes) == 8 and all(v.faces.shape[1] == 3 and v.vertices.shape[1] == 3 for v in meshes)
    model = pin.buildModelFromUrdf(str(gato.robot_urdf(ROBOT)))
    data = model.createData()
    fid = model.getFrameId(gato.robot_info(ROBOT)["ee_frame"])
    rng = np.random.default_rng(0)
    qs = np.stack([_q(rng) for _ in range(5)])
    want = []
    for q in qs:
        pin.framesForwardKinematics(model, data, q)
        want.append(data.oMf[fid].translation.copy())
    np.testing.assert_allclose(geometry.ee_positions(qs), np.asarray(want), atol=1e-12)
    poses = geometry.link_poses(qs[0])
    assert poses.shape == (len(geometry.visuals), 4, 4)
    np.testing.assert_allclose(poses[:, 3, :], np.tile([0, 0, 0, 1.0], (len(poses), 1)))
    np.testing.assert_allclose(geometry.skeleton()[-1], want[0], atol=1e-12)


def test_decimate_keeps_the_shape_within_the_budget():
    import trimesh

    from gato_ros.view_logic import decimate

    m = trimesh.creation.icosphere(subdivisions=5, radius=0.1)          # 20,480 faces
    v, f = decimate(m.vertices, m.faces, 3000)
    assert 500 < f.shape[0] <= 3000 and f.min() >= 0 and f.max() < v.shape[0]
    r = np.linalg.norm(v, axis=1)
    assert np.all(np.abs(r - 0.1) < 0.004), (r.min(), r.max())        # the vertices stay on the sphere
    assert trimesh.Trimesh(v, f).area == pytest.approx(m.area, rel=0.05)
    v2, f2 = decimate(m.vertices, m.faces, 10**6)                     # within budget: unchanged
    assert f2.shape == m.faces.shape


@pytest.mark.parametrize("robot", ["fr3", "indy7"])
def test_arms_without_visual_meshes_are_drawn_from_their_collision_meshes(robot):
    g = RobotGeometry(robot)
    assert g.geometry_type == "collision" and len(g.visuals) >= 6
    assert all(v.faces.shape[0] <= 6000 for v in g.visuals)


def test_unknown_robot_is_refused_by_name():
    with pytest.raises(ValueError, match="'no_such_arm' is neither a registered robot nor a URDF file"):
        RobotGeometry("no_such_arm")


def test_joint_state_by_name_in_any_order_and_bad_ones_counted(geometry):
    rng = np.random.default_rng(1)
    q = _q(rng)
    logic = ViewLogic(geometry)
    order = [3, 0, 6, 1, 5, 2, 4]
    logic.on_joint_state(JointStateSample(2_000_000_000, [NAMES[i] for i in order] + ["gripper"],
                                          np.r_[q[order], 0.3], np.zeros(8)))
    fr = logic.frame()
    np.testing.assert_allclose(fr.q, q)
    assert fr.t == 2.0 and fr.link_poses.shape[0] == len(geometry.visuals)
    np.testing.assert_allclose(fr.ee, geometry.ee_positions(q)[0], atol=1e-12)
    # a state the view cannot read is counted once and named; the robot stays at the last good state
    logic.on_joint_state(JointStateSample(3_000_000_000, NAMES[:6], q[:6], np.zeros(6)))
    fr = logic.frame()
    assert fr.info["rejected"] == 1 and fr.t == 2.0
    np.testing.assert_allclose(fr.q, q)
    assert "joint 'A7' missing from the joint state" in fr.info["last_rejected"]
    assert logic.frame().info["rejected"] == 1
    logic.on_joint_state(JointStateSample(4_000_000_000, NAMES, np.r_[q[:6], np.nan], np.zeros(7)))
    fr = logic.frame()
    assert fr.t == 2.0 and fr.info["rejected"] == 2 and "non-finite" in fr.info["last_rejected"]


def _xu(qs, nu=7):
    """A plan row [x_0, u_0, ..., x_{N-1}] with these positions, zero velocities and torques."""
    parts = []
    for k, q in enumerate(qs):
        parts.append(np.r_[q, np.zeros(7)])
        if k < len(qs) - 1:
            parts.append(np.zeros(nu))
    return np.concatenate(parts)


def test_plan_and_batch_paths_are_the_ee_along_each_row(geometry):
    rng = np.random.default_rng(2)
    N, B, best = 6, 20, 3
    rows = [np.stack([_q(rng) for _ in range(N)]) for _ in range(B)]
    logic = ViewLogic(geometry)
    logic.on_plan(Plan(stamp_ns=0, knot_dt=0.03, nx=14, nu=7, n_knots=N, joint_names=NAMES, xu=_xu(rows[best])))
    logic.on_step_result(np.stack([_xu(r) for r in rows]), 14, 7, N, best)
    fr = logic.frame()
    np.testing.assert_allclose(fr.plan_path, geometry.ee_positions(rows[best]), atol=1e-12)
    others = [b for b in range(B) if b != best][:MAX_BATCH_PATHS]
    assert len(fr.batch_paths) == len(others) == MAX_BATCH_PATHS
    for path, b in zip(fr.batch_paths, others):
        np.testing.assert_allclose(path, geometry.ee_positions(rows[b]), atol=1e-12)
    # a plan in another joint order draws the same path
    perm = [6, 5, 4, 3, 2, 1, 0]
    xu_perm = _xu(rows[best][:, perm])
    xu_perm_states = xu_perm.copy()
    logic.on_plan(Plan(stamp_ns=0, knot_dt=0.03, nx=14, nu=7, n_knots=N, joint_names=[NAMES[i] for i in perm],
                     xu=xu_perm_states))
    np.testing.assert_allclose(logic.frame().plan_path, geometry.ee_positions(rows[best]), atol=1e-12)


def test_plot_samples_tracking_error_and_solve_time_per_new_state(geometry):
    rng = np.random.default_rng(3)
    q = _q(rng)
    ee = geometry.ee_positions(q)[0]
    logic = ViewLogic(geometry, plot_window_s=1.0)
    # a window moving 1 cm per knot along x from ee - 2 cm: at t = 2 knots after its stamp the target is ee
    dt = 0.1
    pos = np.stack([ee + [0.01 * k - 0.02, 0.0, 0.003] for k in range(10)])
    logic.on_reference(ReferenceWindow(1_000_000_000, dt, pos))
    logic.on_status("running", 2500.0, 4, 100)
    logic.on_joint_state(JointStateSample(1_200_000_000, NAMES, q, np.zeros(7)))
    fr = logic.frame()
    np.testing.assert_allclose(fr.plot["t"], [1.2])
    np.testing.assert_allclose(fr.plot["error_mm"], [3.0], atol=1e-9)
    np.testing.assert_allclose(fr.plot["solve_ms"], [2.5])
    assert np.isnan(fr.plot["orientation_deg"]).all()   # a position-only window: no orientation error
    assert fr.info["deadline_misses"] == 4 and fr.info["state"] == "running"
    np.testing.assert_allclose(fr.reference, pos)
    assert logic.frame().plot["t"].size == 1            # no new joint state: no new sample
    for k in range(1, 16):                              # 1.5 s more: the plot keeps the last second
        logic.on_joint_state(JointStateSample(1_200_000_000 + k * 100_000_000, NAMES, q, np.zeros(7)))
        fr = logic.frame()
    assert fr.plot["t"][0] >= fr.plot["t"][-1] - 1.0 - 1e-9 and fr.plot["t"][-1] == pytest.approx(2.7)
    logic.on_joint_state(JointStateSample(500_000_000, NAMES, q, np.zeros(7)))   # a new run: clock back
    np.testing.assert_allclose(logic.frame().plot["t"], [0.5])


def test_plot_samples_the_orientation_error_beside_the_position_error(geometry):
    """A pose window (issue 30): the plot's orientation_deg is the angle of R_ref^T R_ee at the
    state's time, the window's slerp between knots."""
    import pinocchio as pin

    rng = np.random.default_rng(5)
    q = _q(rng)
    ee = geometry.ee_positions(q)[0]
    geometry.skeleton()
    R = geometry.ee_rotation()
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    # knot k is the EE orientation turned k * 2 deg about ``axis``; the state falls half-way between knots 2 and 3
    rots = np.stack([pin.log3(R @ pin.exp3(np.radians(2.0 * k) * axis)) for k in range(6)])
    logic = ViewLogic(geometry, plot_window_s=1.0)
    logic.on_reference(ReferenceWindow(1_000_000_000, 0.1, np.tile(ee, (6, 1)), orientations=rots))
    logic.on_joint_state(JointStateSample(1_250_000_000, NAMES, q, np.zeros(7)))
    fr = logic.frame()
    np.testing.assert_allclose(fr.plot["orientation_deg"], [5.0], atol=1e-9)
    np.testing.assert_allclose(fr.plot["error_mm"], [0.0], atol=1e-9)
    from gato_ros.view_server import BrowserView       # the browser's text panel prints both

    html = BrowserView._panel_html(fr)
    assert "EE error: 0.0 mm" in html and "EE orientation error: 5.00 deg" in html
    # ... and its plot draws both curves: a second sample turns the target 2 deg further about ``axis``
    logic.on_joint_state(JointStateSample(1_350_000_000, NAMES, q, np.zeros(7)))
    fr = logic.frame()
    np.testing.assert_allclose(fr.plot["orientation_deg"], [5.0, 7.0], atol=1e-9)
    view = BrowserView(geometry, port=0)
    try:
        view.draw(fr)
        labels = [s["label"] for s in view._plot.series]
        assert labels == ["t [s]", "EE error [mm]", "EE orientation error [deg]", "solve [ms]"]
        t, err, rot, solve = view._plot.data
        np.testing.assert_allclose(t, [1.25, 1.35])
        np.testing.assert_allclose(err, [0.0, 0.0], atol=1e-9)
        np.testing.assert_allclose(rot, [5.0, 7.0], atol=1e-9)
        np.testing.assert_allclose(solve, [0.0, 0.0])     # no controller status: NaN, drawn as 0
    finally:
        view.close()


def test_plot_window_must_be_positive(geometry):
    with pytest.raises(ValueError, match="plot_window_s: must be > 0, got 0"):
        ViewLogic(geometry, plot_window_s=0)


def test_scheduling_parameter_refuses_unknown_modes_by_name():
    from gato_ros import params
    from gato_ros.cpu_priority import child_preexec, lower_priority, lower_this_thread

    p = params.by_name(params.VIEW)["scheduling"]
    assert p.default_for(ROBOT) == "idle" and p.choices == ("idle", "nice", "normal")
    assert params.validate(params.VIEW, "scheduling", "nice", allow_read_only=True) is None
    assert params.validate(params.VIEW, "scheduling", "realtime", allow_read_only=True) == \
        "scheduling: 'realtime' is not one of idle, nice, normal"
    for f in (lower_priority, lower_this_thread, child_preexec):
        with pytest.raises(ValueError, match="scheduling: must be one of idle, nice, normal, got 'low'"):
            f("low")
    assert lower_priority("normal") == "unchanged" and child_preexec("normal") is None


_PRIORITY_PROBE = """
import json, os, sys, threading
from gato_ros.cpu_priority import lower_priority, thread_priority
ready, go = threading.Event(), threading.Event()
def before():                       # a thread already running when the process lowers itself
    ready.set(); go.wait()
    out["before"] = thread_priority()
out = {}
t = threading.Thread(target=before); t.start(); ready.wait()
out["applied"] = lower_priority(sys.argv[1])
after = threading.Thread(target=lambda: out.__setitem__("after", thread_priority())); after.start(); after.join()
go.set(); t.join()
out["main"] = thread_priority()
print(json.dumps(out))
"""


@pytest.mark.parametrize("mode,policy", [("idle", "SCHED_IDLE"), ("nice", "SCHED_OTHER")])
def test_lower_priority_reaches_every_thread_and_later_ones(mode, policy):
    """In a child process (never lower the test runner): the threads running when it lowers itself,
    the main thread and a thread started afterwards all end at nice 19 (and SCHED_IDLE for idle)."""
    if not hasattr(os, "sched_getscheduler"):
        pytest.skip("Linux scheduling policies only")
    r = subprocess.run([sys.executable, "-c", _PRIORITY_PROBE, mode], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    if out["applied"].startswith("not lowered"):
        pytest.skip(f"this system refuses to lower the priority: {out['applied']}")
    if mode == "idle" and out["applied"] != "SCHED_IDLE":      # permitted nice only (seccomp): what it says
        assert out["applied"] == "nice 19"
        policy = "SCHED_OTHER"
    for k in ("before", "main", "after"):
        assert out[k] == [policy, 19], (k, out)


# ------------------------------------------------------------------ the replay view (worst ticks)
def _case_file(path, geometry, rng, K=3, N=5):
    nv = 7
    rows = [np.stack([_q(rng) for _ in range(N)]) for _ in range(2 * K)]
    goals = np.zeros((K, 6 * N))
    for k in range(K):
        goals[k].reshape(N, 6)[:, :3] = geometry.ee_positions(rows[k])
    np.savez(path, x=np.stack([np.r_[rows[k][0], np.zeros(nv)] for k in range(K)]), goals=goals,
             xu_recorded=np.stack([_xu(rows[k]) for k in range(K)]),
             xu_standalone=np.stack([_xu(rows[K + k]) for k in range(K)]),
             u_recorded=np.zeros((K, nv)), u_standalone=np.ones((K, nv)), tick=np.arange(K) * 10,
             reason=np.array(["command difference"] * K), robot=np.array(ROBOT))
    return rows


def test_replay_cases_give_recorded_and_replayed_paths_per_tick(geometry, tmp_path):
    from gato_ros.replay_view import ReplayCases, ReplayView

    rows = _case_file(tmp_path / "worst_ticks.npz", geometry, np.random.default_rng(4))
    c = ReplayCases(tmp_path / "worst_ticks.npz", geometry)
    assert (c.K, c.N, c.nu, c.replayed_label) == (3, 5, 7, "standalone re-solve")
    fr = c.frame(1)
    np.testing.assert_allclose(fr.q, rows[1][0])
    np.testing.assert_allclose(fr.plan_path, geometry.ee_positions(rows[1]), atol=1e-12)
    np.testing.assert_allclose(c.path_of(c.xu_replayed[1]), geometry.ee_positions(rows[4]), atol=1e-12)
    np.testing.assert_allclose(fr.reference, geometry.ee_positions(rows[1]), atol=1e-12)
    view = ReplayView(c, port=0)                  # serves, and draws another tick on request
    try:
        assert _port_open(view.view.port)
        view.show(2)
    finally:
        view.close()
    with pytest.raises(ValueError, match="not a gato replay case file"):
        np.savez(tmp_path / "other.npz", x=np.zeros(3))
        ReplayCases(tmp_path / "other.npz", geometry)


def _heavier_iiwa(tmp_path) -> Path:
    """The iiwa14 URDF with link 4 10 % heavier: a replay model that differs from the recorded one."""
    import gato

    text = Path(gato.robot_urdf(ROBOT)).read_text()
    i = text.index('<link name="L4"')
    j = text.index('<mass value="', i) + len('<mass value="')
    k = text.index('"', j)
    other = tmp_path / "iiwa14_heavier.urdf"
    other.write_text(text[:j] + repr(float(text[j:k]) * 1.1) + text[k:])
    return other


def test_replay_view_draws_the_in_sequence_replays_plan_at_each_worst_tick(geometry, tmp_path):
    """``gato replay BAG`` keeps, for each worst tick, the plan its in-sequence replay computed there
    (the one its discrepancy report compares) and the replay view draws that plan beside the
    recorded one. Reference: the same bag re-solved tick by tick in memory (gato.replay.replay_ticks);
    the standalone re-solve of the case file (a fresh solver from the recorded warm start) is not it."""
    import_or_skip("rosbags", "pip install rosbags (scripts/setup.sh)")
    import_or_skip("gato_msgs.msg", _HINT)
    from replay_fixtures import record_lockstep_run

    from gato.replay import TOPICS, load_recording, replay_bag, replay_ticks
    from gato.replay.bagio import read_bag
    from gato_ros.replay_view import ReplayCases, ReplayView

    bag = record_lockstep_run(tmp_path / "bag", seconds=0.3, robot=ROBOT)
    other = _heavier_iiwa(tmp_path)      # every replayed tick differs from the recorded one
    s = replay_bag(bag, tmp_path / "out", urdf=other, worst=3, log=None)
    z = np.load(s["cases"])
    rec = load_recording(read_bag(bag, list(TOPICS.values())), robot=ROBOT)
    ref = replay_ticks(rec, urdf=other)
    at = {tk.tick: i for i, tk in enumerate(rec.ticks)}
    K = len(z["tick"])
    assert K == 3 and z["xu_replayed"].shape == z["xu_recorded"].shape
    for k, tick in enumerate(z["tick"]):
        i = at[int(tick)]
        np.testing.assert_allclose(z["xu_replayed"][k], ref.xu[i], rtol=0, atol=1e-12)
        np.testing.assert_allclose(z["u_replayed"][k], ref.u[i], rtol=0, atol=1e-12)
        assert np.max(np.abs(z["xu_replayed"][k] - z["xu_recorded"][k])) > 1e-6     # another model's plan
    c = ReplayCases(s["cases"], geometry)
    assert c.replayed_label == "replayed in sequence" and c.in_sequence.all()
    nq, S = 7, c.nx + c.nu
    for k in range(K):
        q_seq = np.stack([ref.xu[at[int(c.tick[k])]][n * S:n * S + nq] for n in range(c.N)])
        np.testing.assert_allclose(c.path_of(c.xu_replayed[k]), geometry.ee_positions(q_seq), atol=1e-12)
        np.testing.assert_allclose(c.frame(k).plan_path, c.path_of(z["xu_recorded"][k]), atol=1e-12)
    # the in-sequence replay carries solver state (duals, ADMM) a standalone re-solve starts without
    gap = max(np.max(np.abs(z["xu_replayed"][k] - z["xu_standalone"][k])) for k in range(K))
    assert gap > 1e-9, "the standalone re-solve reproduced the in-sequence plans: nothing to tell apart"
    view = ReplayView(c, port=0)
    try:
        view.show(K - 1)
        assert "replayed in sequence" in view._text.content
        assert "standalone re-solve vs in sequence" in view._text.content
    finally:
        view.close()
    # a file without the in-sequence plans (an older gato) falls back to the standalone re-solve, named so
    old = {k: z[k] for k in z.files if k != "xu_replayed"}
    np.savez(tmp_path / "old.npz", **old)
    c_old = ReplayCases(tmp_path / "old.npz", geometry)
    assert c_old.replayed_label == "standalone re-solve" and c_old.label_of(0) == "standalone re-solve"
    np.testing.assert_array_equal(c_old.xu_replayed, z["xu_standalone"])


# ------------------------------------------------------------------ the bringup with the view
class Bringup:
    """``python -m gato_ros.bringup_sim --view`` in its own session, tagged for the leftover check."""

    def __init__(self, tmp: Path, env: dict):
        self.view_port, self.fox_port = _free_port(), _free_port()
        self.marker = uuid.uuid4().hex
        self.out = tmp / "run"
        self.log = open(tmp / "bringup.log", "w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gato_ros.bringup_sim", "--view", "--view-port", str(self.view_port),
             "--foxglove-port", str(self.fox_port), "--duration", "600", "--out", str(self.out)],
            env={**env, "GATO_TEST_MARKER": self.marker}, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.url = f"http://127.0.0.1:{self.view_port}/"

    def text(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def wait_ports(self, timeout_s: float = 240.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not (_port_open(self.view_port) and _port_open(self.fox_port)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the view did not come up (exit {self.proc.poll()}):\n{self.text()[-4000:]}")
            time.sleep(0.5)

    def stop(self, timeout_s: float = 120.0) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)      # Ctrl-C: the runner and bringup_sim both see it
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
                pytest.fail(f"the bringup did not stop on SIGINT:\n{self.text()[-4000:]}")
        return self.proc.returncode


@pytest.fixture(scope="module")
def bringup(tmp_path_factory, ros_env):
    import_or_skip("gato_msgs.msg", _HINT)
    b = Bringup(tmp_path_factory.mktemp("view"), ros_env)
    b.wait_ports()
    yield b
    if b.proc.poll() is None:
        b.stop()


def _pixels(png: Path) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(png).convert("RGB")).astype(int)


@pytest.mark.ros
def test_page_shows_the_robot_and_the_plan(bringup, tmp_path):
    from chromium_cdp import Chromium

    assert f"view: {bringup.url}" in bringup.text()          # the URL is printed for the user
    br = Chromium(1280, 800)
    try:
        br.navigate(bringup.url)
        count = "(function(){var e=document.getElementById('gato-frames');return e?Number(e.textContent):-1;})()"
        deadline = time.monotonic() + 120
        while (br.evaluate(count) or 0) < 5:                 # the scene is there and frames arrive
            assert time.monotonic() < deadline, f"no frames in the page:\n{bringup.text()[-3000:]}"
            time.sleep(0.5)
        # frames keep arriving while the controller runs: the page's own counter advances
        n1 = br.evaluate(count)
        deadline = time.monotonic() + 30
        while br.evaluate(count) <= n1 + 5:
            assert time.monotonic() < deadline, "the page's frame counter stopped"
            time.sleep(0.2)
        # the plan is drawn once the controller publishes one; give the page a moment to render
        panel = "document.body.innerText"
        deadline = time.monotonic() + 60
        while "controller: running" not in (br.evaluate(panel) or ""):
            assert time.monotonic() < deadline, f"panel never showed a running controller: {br.evaluate(panel)}"
            time.sleep(0.5)
        time.sleep(2.0)
        png = br.screenshot(tmp_path / "view.png")
    finally:
        br.close()
    img = _pixels(png)
    assert img.shape[:2] == (800, 1280)
    scene = img[160:, :900]                                  # the 3D canvas, left of the panel, below the toasts
    r, g, b = scene[..., 0], scene[..., 1], scene[..., 2]
    robot = (r > 120) & (r - b > 70) & (g > 40) & (g < r - 30)            # the orange links, shaded
    plan = (b > 150) & (b - r > 90) & (b - g > 40)                       # the blue plan path
    assert robot.sum() > 3000, f"robot pixels: {robot.sum()} (screenshot {png})"
    assert plan.sum() > 30, f"plan-path pixels: {plan.sum()} (screenshot {png})"
    ys, xs = np.nonzero(robot)
    assert 200 < xs.mean() < 800 and 100 < ys.mean() < 560, (xs.mean(), ys.mean())   # in the middle
    keep = os.environ.get("GATO_VIEW_SCREENSHOT")
    if keep:
        Path(keep).write_bytes(png.read_bytes())


FOXGLOVE_SUBPROTOCOL = "foxglove.sdk.v1"     # foxglove-sdk 0.30's name of the Foxglove WebSocket protocol


@pytest.mark.ros
def test_foxglove_channels_each_carry_messages(bringup):
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState
    from websockets.sync.client import connect

    from gato_ros.view_node import graph_topics

    want = set(graph_topics()) | {"/gato_view/robot", "/gato_view/tf", "/gato_view/scene", "/gato_view/plot"}
    channels, subs, got, first = {}, {}, {}, {}
    with connect(f"ws://127.0.0.1:{bringup.fox_port}", subprotocols=[FOXGLOVE_SUBPROTOCOL], max_size=None,
                 open_timeout=30) as ws:
        assert ws.subprotocol == FOXGLOVE_SUBPROTOCOL
        info = json.loads(ws.recv(timeout=30))
        assert info["op"] == "serverInfo", info
        deadline = time.monotonic() + 120
        while not (want <= set(got)) and time.monotonic() < deadline:
            try:
                m = ws.recv(timeout=1.0)
            except TimeoutError:
                continue
            if isinstance(m, str):
                j = json.loads(m)
                if j["op"] == "advertise":
                    for c in j["channels"]:
                        channels[c["topic"]] = c
                        sid = len(subs) + 1
                        subs[sid] = c["topic"]
                        ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": sid, "channelId": c["id"]}]}))
            elif m[0] == 0x01:                                   # message data: sub id, log time, payload
                sid, _ = struct.unpack_from("<IQ", m, 1)
                topic = subs[sid]
                got[topic] = got.get(topic, 0) + 1
                first.setdefault(topic, m[13:])
    assert want <= set(channels), f"not advertised: {sorted(want - set(channels))}"
    assert want <= set(got), f"no message on: {sorted(want - set(got))} (got {got})"
    from gato_ros.bag import typestore

    ts = typestore()
    for topic, typ in graph_topics().items():                   # the graph's topics with their ROS schemas
        c = channels[topic]
        assert (c["encoding"], c["schemaName"], c["schemaEncoding"]) == ("cdr", typ, "ros2msg"), c
        assert c["schema"] == ts.generate_msgdef(typ, ros_version=2)[0], topic     # what MCAP bags carry
    assert channels["/gato_view/scene"]["schemaName"] == "foxglove.SceneUpdate"
    assert channels["/gato_view/tf"]["schemaName"] == "foxglove.FrameTransforms"
    js = deserialize_message(bytes(first["/joint_states"]), JointState)      # the bytes are the ROS message
    assert list(js.name) == NAMES and len(js.position) == 7
    sample = json.loads(bytes(first["/gato_view/plot"]))
    assert set(sample) == {"t", "error_mm", "solve_ms", "orientation_deg"}


def _task_priorities(pid: int) -> dict:
    """{thread id: (scheduling policy number, nice)} of a process, from /proc (stat fields 19 and 41)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            f = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(tid)] = (int(f[38]), int(f[16]))
    return out


@pytest.mark.ros
def test_lockstep_view_keeps_the_runners_priority_and_says_so(bringup):
    """The lockstep bringup (no deadline: bringup_sim's ``--view-scheduling auto`` leaves the view at
    ``normal``): every thread of the view node and of the controller node at the test runner's own
    policy and nice value, and the view logs the priority it applied. (``idle`` on every thread:
    test_lower_priority_reaches_every_thread_and_later_ones; the free-running bench runs it.)"""
    def node_pid(name):
        pids = [p for p in processes_with_env("GATO_TEST_MARKER", bringup.marker)
                if name in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")]
        assert len(pids) == 1, (name, pids)
        return pids[0]

    mine = (os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0))
    for name in ("view_node", "controller_node"):
        tasks = _task_priorities(node_pid(name))
        assert len(tasks) > 3 and set(tasks.values()) == {mine}, (name, tasks)
    assert "(CPU priority: unchanged)" in bringup.text()


@pytest.mark.ros
def test_servers_shut_down_with_the_bringup(bringup):
    code = bringup.stop()
    out = bringup.text()
    assert code == 0, out[-4000:]
    assert not _port_open(bringup.view_port) and not _port_open(bringup.fox_port)
    deadline = time.monotonic() + 10
    while processes_with_env("GATO_TEST_MARKER", bringup.marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with_env("GATO_TEST_MARKER", bringup.marker) == [], "processes left after the bringup"
    summary = json.loads((bringup.out / "summary.json").read_text())
    assert summary["launch_exit_code"] == 0


@pytest.mark.ros
def test_gato_replay_view_serves_the_worst_ticks_of_the_bringups_bag(bringup, tmp_path):
    """``gato replay BAG --view`` on the bag of the bringup above (its first 50 controller ticks: a
    window in ticks, not seconds, since on a loaded machine the world may start more than a second
    after the recorder): the page with the worst ticks is served (URL printed), and it stops after
    --view-seconds."""
    import urllib.request

    if bringup.proc.poll() is None:
        bringup.stop()
    port = _free_port()
    log = open(tmp_path / "replay.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "gato", "replay", str(bringup.out / "bag"), "--out",
                             str(tmp_path / "replay"), "--end", "50t", "--quiet", "--view", "--view-port", str(port),
                             "--view-seconds", "60"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not _port_open(port):
            log.flush()
            assert proc.poll() is None and time.monotonic() < deadline, Path(log.name).read_text()[-3000:]
            time.sleep(0.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
            assert r.status == 200 and b"<html" in r.read(2000).lower()
        # The server listens a moment before the URL line is printed: wait for the line, too.
        while f"view: http://127.0.0.1:{port}/" not in Path(log.name).read_text():
            assert proc.poll() is None and time.monotonic() < deadline, Path(log.name).read_text()[-3000:]
            time.sleep(0.2)
        assert (tmp_path / "replay" / "worst_ticks.npz").is_file()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)            # Ctrl-C ends the view
        code = proc.wait(timeout=60)
    assert code in (0, 1), Path(log.name).read_text()[-3000:]      # 1: the replay differs (reported)
    assert not _port_open(port)
