"""gato.planner: the planner interface (typed capabilities, plans, stats), the registry, and
the bsqp planner = MPCController behind the interface, torques bit for bit."""
import numpy as np
import pytest

import gato
from gato import planner as P
from gato import references as R
from gato import tasks
from gato.bsqp_planner import BSQPPlanner
from gato.worlds import PinocchioWorld

URDF = gato.robot_urdf("iiwa14")
Q0 = tasks.Q_READY["iiwa14"]
X0 = np.r_[Q0, np.zeros(7)]
N, DT = 16, 0.03125


def test_registry_names_builds_and_one_line_registration():
    assert "bsqp" in P.planners() and P.planner_class("bsqp") is BSQPPlanner
    p = P.make("bsqp", "iiwa14", {"N": 8, "dt": 0.05})
    assert isinstance(p, P.Planner) and (p.N, p.dt, p.nx, p.nu_act) == (8, 0.05, 14, 7)
    assert p.controller.solver is p.solver and p.solver.N == 8
    with pytest.raises(ValueError, match="planner"):
        P.make("no_such_planner", "iiwa14")
    with pytest.raises(ValueError, match="config"):
        P.make("bsqp", "iiwa14", {"horizon": 8})
    with pytest.raises(ValueError, match="robot"):
        P.make("bsqp", "no_such_robot")

    class Zero(P.Planner):
        """Commands zero torque: the smallest planner there is."""
        capabilities = P.Capabilities()

        def __init__(self, robot, config=None):
            self.nx, self.nu_act, self.N, self.dt = 14, 7, 4, 0.01

        def reset(self, x0):
            pass

        def step(self, x_measured, reference, dt_elapsed=None, budget_s=None):
            return P.StepResult(u=np.zeros(7), plan=None, stats=P.PlannerStats())

    P.register_planner("test_zero", Zero)    # registration is one line
    try:
        z = P.make("test_zero", "iiwa14")
        assert z.warmup(X0, None) is None and not z.capabilities.plan_output
        assert np.array_equal(z.step(X0, None).u, np.zeros(7))
    finally:
        P._REGISTRY.pop("test_zero")
    with pytest.raises(ValueError, match="target"):
        P.register_planner("bad", object)
    with pytest.raises(ValueError, match="target"):
        P.register_planner("bad", "no_colon")


def test_capabilities_are_typed_frozen_flags():
    c = BSQPPlanner.capabilities
    assert c == P.Capabilities(batch=True, hypotheses=True, plan_output=True, warmup=True, budget=True,
                               warm_start_io=True)
    with pytest.raises(AttributeError):
        c.batch = False
    assert P.Capabilities() == P.Capabilities(False, False, False, False, False, False)


def test_plan_knot_access_is_clamped():
    nx, nu = 2, 1
    xu = np.arange(3 * nx + 2 * nu, dtype=float)        # x0 u0 x1 u1 x2
    plan = P.Plan(xu, nx, nu, 1, 3, 0.1)
    assert plan.control(0)[0] == 2.0 and plan.control(1)[0] == 5.0 and plan.control(7)[0] == 5.0
    assert np.array_equal(plan.state(2), [6.0, 7.0]) and np.array_equal(plan.state(-3), [0.0, 1.0])


def test_bsqp_planner_torques_equal_mpc_controller_bit_for_bit_on_a_seeded_closed_loop():
    """Two identical solvers; one driven through MPCController with flat (6N,) references,
    the other through BSQPPlanner with ReferenceWindows of the same figure-8; the plant is
    PinocchioWorld RK4 with seeded state noise. Every torque and plan is identical."""
    ctrl = gato.MPCController(gato.BSQP(URDF, 1, N, DT))
    plan = BSQPPlanner("iiwa14", {"N": N, "dt": DT})
    fig8 = R.Figure8(gato.BSQP(URDF, 1, 2, DT).ee_pos(Q0), 0.1, 0.05, np.pi / 2, 3.0)
    world = PinocchioWorld(URDF)
    rng = np.random.default_rng(7)
    ctrl.reset(X0)
    plan.reset(X0)
    w0 = fig8.window(0.0, N, DT)
    xa = np.asarray(ctrl.warmup(X0, w0.solver_layout()).xu)[0]
    assert np.array_equal(xa, plan.warmup(X0, w0).xu)
    x = X0.copy()
    for k in range(40):
        w = fig8.window(k * DT, N, DT)
        a = ctrl.step(x, w.solver_layout(), dt_elapsed=DT)
        b = plan.step(x, w, dt_elapsed=DT)
        assert np.array_equal(a.u, b.u) and np.array_equal(a.xu_best, b.plan.xu)
        assert b.stats.iterations == a.iterations and b.stats.best_id == a.best_id and b.detail is not None
        assert b.stats.extra["pred_err"] == a.pred_err and b.stats.extra["linsys"] == str(a.solve.stats.linsys)
        assert np.array_equal(b.plan.control(0), b.u)
        q, dq = x[:7], x[7:]
        for _ in range(31):
            q, dq = world.step(q, dq, a.u, 0.001)
        x = np.r_[q, dq] + rng.normal(0.0, 1e-4, 14)
    assert np.all(np.isfinite(x))


def test_bsqp_planner_resamples_a_window_on_another_grid():
    """A longer window with another knot spacing (the ROS reference node publishes n_knots >= N)
    is resampled onto the solver's grid at the window's stamp."""
    fig8 = R.Figure8(np.array([0.6, 0.0, 0.5]), 0.1, 0.05, np.pi / 2, 3.0)
    p1, p2 = BSQPPlanner("iiwa14", {"N": N, "dt": DT}), BSQPPlanner("iiwa14", {"N": N, "dt": DT})
    coarse = fig8.window(0.5, 40, 0.015625)
    fine = R.ReferenceWindow(coarse.stamp_ns, DT, coarse.sample(coarse.stamp_ns, N, DT))
    for p in (p1, p2):
        p.reset(X0)
    assert np.array_equal(p1.step(X0, coarse).u, p2.step(X0, fine).u)
