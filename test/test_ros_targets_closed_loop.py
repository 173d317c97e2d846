"""The controller's target interfaces in closed loop without ROS: ControllerLogic with the node's
TargetLogic as its target_source, on a pinocchio forward-dynamics plant of iiwa14 (1 kHz
semi-implicit Euler, the controller at 100 Hz, the same URDF: no model error), synthetic time.

- a pose goal 20 cm away is reached within 5 mm and held (q_cost 20; the default q_cost 2 leaves
  a 12 mm gravity sag at rest, measured here, README "Standard interfaces");
- a 0.1 m/s twist stream for 2 s moves the EE 0.2 m +/- 2 cm and it stops within 0.2 s;
- a 5-point joint trajectory is followed through the per-knot posture targets: every joint
  within 0.02 rad of the last point and on the path within the default path tolerance; a joint
  hold (cancel) keeps the EE within 5 mm.
"""
import numpy as np
import pytest

from conftest import import_or_skip

import_or_skip("gato", "build the workspace (scripts/setup.sh)")
pin = import_or_skip("pinocchio", "install the lock (scripts/setup.sh)")
cl = import_or_skip("gato_ros.controller_logic", "build the workspace and source install/setup.bash "
                    "(scripts/setup.sh; source scripts/activate.sh)")
import gato  # noqa: E402
from gato_ros.target_logic import TargetLogic  # noqa: E402
from gato_ros.types import JointStateSample  # noqa: E402

ROBOT = "iiwa14"
TICK_NS = 10_000_000
S = 10**9


class Loop:
    """ControllerLogic + TargetLogic on a pinocchio plant; ``run(n)`` advances n ticks."""

    def __init__(self, **cfg):
        self.logic = cl.ControllerLogic({"robot": ROBOT, **cfg})
        self.targets = TargetLogic(self.logic.cfg, "world", ee_pos=self.logic.ee_position)
        self.logic.target_source = self.targets
        self.model = pin.buildModelFromUrdf(str(gato.robot_urdf(ROBOT)))
        self.data = self.model.createData()
        self.names = self.logic.solver_joint_names
        assert self.names == list(self.model.names)[1:]
        self.q = np.array(self.logic.cfg["q0"] if "q0" in self.logic.cfg else _q_ready(), dtype=float)
        self.v = np.zeros(self.model.nv)
        self.t = 0
        self.ee_log = []                      # (t ns, EE (3,))

    def ee(self):
        return self.logic.ee_position(self.q)

    def run(self, n, each=None):
        for _ in range(n):
            if each is not None:
                each(self)
            out = self.logic.on_joint_state(JointStateSample(self.t, self.names, self.q.copy(), self.v.copy()), self.t)
            assert out.source == "mpc", (out.source, self.logic.status.reason)
            for _ in range(10):
                a = pin.aba(self.model, self.data, self.q, self.v, out.effort)
                self.v = self.v + 1e-3 * a
                self.q = pin.integrate(self.model, self.q, 1e-3 * self.v)
            self.t += TICK_NS
            self.ee_log.append((self.t, self.ee()))

    def ee_between(self, t0, t1):
        return np.array([p for t, p in self.ee_log if t0 <= t <= t1])


def _q_ready():
    from gato_ros import params as schema

    return schema.defaults(schema.SIM, ROBOT)["q0"]


@pytest.mark.parametrize("q_cost,bound", [(20.0, 0.005), (2.0, 0.02)])
def test_a_pose_goal_20_cm_away_is_reached_and_held(q_cost, bound):
    lp = Loop(q_cost=q_cost)
    lp.run(100)
    goal = lp.ee() + [0.0, 0.2, 0.0]
    assert lp.targets.on_pose("", goal, [0, 0, 0, 1], lp.t, lp.ee()) is None
    t_goal = lp.t
    lp.run(350)                                                # the 2 s path, then 1.5 s
    held = lp.ee_between(t_goal + int(2.5 * S), lp.t)
    err = np.linalg.norm(held - goal, axis=1)
    print(f"q_cost {q_cost}: held within {err.max() * 1e3:.2f} mm")
    assert err.max() <= bound


def test_a_twist_stream_moves_the_ee_at_its_speed_and_stops_within_0_2_s():
    lp = Loop(q_cost=20.0)
    lp.run(50)
    start, t0 = lp.ee(), lp.t
    lp.run(200, each=lambda s: s.targets.on_twist("", [0.0, -0.1, 0.0], [0, 0, 0], s.t, s.ee()))
    t_last = t0 + 199 * TICK_NS                                # the last twist's tick
    lp.run(150)
    rest = lp.ee_between(t_last + int(0.2 * S), lp.t)
    moved = rest[-1] - start
    assert abs(-moved[1] - 0.2) <= 0.02 and np.abs(moved[[0, 2]]).max() <= 0.005, moved
    assert np.linalg.norm(rest - rest[-1], axis=1).max() <= 0.002     # stopped within 0.2 s


def test_a_joint_trajectory_is_tracked_through_the_per_knot_posture_targets_and_a_hold_keeps_the_arm():
    from gato_ros.trajectory_logic import PATH_TOLERANCE_VIOLATED, SUCCESSFUL, TrajectoryTracker, parse_trajectory

    from gato_ros.trajectory_logic import knot_posture_supported

    lp = Loop()
    if not knot_posture_supported(lp.logic.solver):
        pytest.skip("the installed gato.BSQP takes no per-knot posture targets (set_q_nom (N, nq))")
    lp.run(50)
    names = lp.names
    q0 = lp.q.copy()
    dq = np.array([0.3, 0.2, 0.0, -0.2, 0.0, 0.2, 0.0])
    points = [(0.8 * (k + 1), q0 + dq * (k + 1) / 5, []) for k in range(5)]
    defaults = {"traj_path_tolerance_rad": 0.2, "traj_goal_tolerance_rad": 0.02, "traj_goal_time_s": 1.0}
    tr = parse_trajectory(names, points, names, np.full(7, -3.0), np.full(7, 3.0), defaults=defaults)
    tk = TrajectoryTracker(tr, lp.t, lp.q, lp.v)
    lp.targets.on_trajectory(tk)
    errs, outcome = [], None
    while outcome is None and lp.t < tk.t0_ns + int(6 * S):
        lp.run(1)
        errs.append(np.abs(lp.q - tk.sample([lp.t])[0][0]).max())
        outcome, why = tk.check(lp.t, lp.q, lp.v)
    print(f"trajectory: {why}; path error max {max(errs):.4f} rad")
    assert outcome == SUCCESSFUL and max(errs) <= 0.1, (outcome, why, max(errs))
    assert outcome != PATH_TOLERANCE_VIOLATED
    # the posture term is on while the trajectory runs and the arm ends at the last point
    assert np.abs(lp.q - points[-1][1]).max() <= 0.02
    # a joint hold (a cancelled goal) keeps the arm where it is
    lp.targets.hold_joints(lp.q)
    ee = lp.ee()
    lp.run(100)
    assert np.linalg.norm(lp.ee() - ee) <= 0.005
    # back to a Cartesian goal: the posture term goes off
    lp.targets.on_pose("", ee, [0, 0, 0, 1], lp.t, ee)
    lp.run(1)
    assert not lp.logic._posture_on
