"""gato.sampling's iLQR planner (SimMPCConfig.planner="ilqr", gato.sampling.ilqr).

One iteration's step (Riccati backward pass over intervals of held commands, applied along the
linearised dynamics) against a dense NumPy solve of the same regularised Gauss-Newton problem,
un-condensed step by step (pendulum and 2-link arm, to 1e-8); the linearisation (mjd_transitionFD
along the rollout) against finite differences of whole rollouts; and SimMPC planning with it.
"""
import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from gato.sampling import (ControlTask, ILQROptimizer, ILQROptimizerConfig, MjSim, SensorTask,  # noqa: E402
                           SimMPC, SimMPCConfig, StateTask)
from gato.sampling.ilqr import ILQRProblem  # noqa: E402
from gato.sampling.sim import RolloutEngine, full_state, state_layout  # noqa: E402

PENDULUM = '''<mujoco><option timestep="0.01"/><worldbody><body><joint name="j" type="hinge" axis="0 1 0" damping="0.1"/>
<geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05" mass="1"/></body></worldbody>
<actuator><motor joint="j" ctrlrange="-3 3" ctrllimited="true"/></actuator>
<sensor><jointpos name="p" joint="j"/></sensor></mujoco>'''
ARM = '''<mujoco><option timestep="0.01"/><worldbody><body><joint name="a" type="hinge" axis="0 1 0" damping="0.1"/>
<geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/><body pos="0.3 0 0">
<joint name="b" type="hinge" axis="0 1 0" damping="0.1"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.5"/>
<site name="tip" pos="0.3 0 0"/></body></body></worldbody><actuator><motor joint="a"/><motor joint="b"/></actuator>
<sensor><framepos name="tip" objtype="site" objname="tip"/></sensor></mujoco>'''


def _problem(kind, H=30, node_steps=10, lo=-3.0):
    m = mujoco.MjModel.from_xml_string(PENDULUM if kind == "pendulum" else ARM)
    d = mujoco.MjData(m)
    d.qpos[:] = 0.3
    mujoco.mj_forward(m, d)
    if kind == "pendulum":
        terms = [(StateTask(np.full((50, 1), np.pi / 2), np.zeros((50, 1)), [1.0], 0.1, squared=True), 1.0, None),
                 (ControlTask(0.01), 1.0, None)]
    else:
        terms = [(SensorTask(np.tile([0.2, 0, 0.3], (50, 1)), {"tip": 100.0}), 1.0, None),
                 (ControlTask(0.01), 1.0, 5.0)]
    for t, _, _ in terms:
        t.resolve(m)
    eng = RolloutEngine(m, 1)
    p = ILQRProblem(model=m, x0=full_state(m, d), warm=np.zeros(m.nv), uref=np.full((H, m.nu), 0.1),
                    lo=np.full(m.nu, lo), hi=np.full(m.nu, 3.0), terms=terms, terminal_scale=10.0, t0=0,
                    node_steps=node_steps, rollout=lambda x, w, u: tuple(a.copy() for a in eng.run(m, x, w, u)),
                    layout=state_layout(m))
    return m, p


def _dense_step(opt, p, delta, mu):
    """The regularised GN step written out densely: every row's residual Jacobian with respect to all
    offsets, through the step-by-step linearised dynamics; solve (MᵀM + mu I) d = -Mᵀr."""
    U, mask = opt.commands(p, delta)
    state, sens = (a[0].copy() for a in p.rollout(p.x0[None], p.warm[None], U[None]))
    A, B, C, D = opt.linearize(p, state, U)
    m = p.model
    nv, na, nu = m.nv, m.na, m.nu
    nx, N = 2 * nv + na, p.N
    b = opt.batch(p, state[None], sens[None], U[None])
    parts = []
    for term, run, ts in p.terms:
        sw = np.sqrt(opt.row_weights(p, run, ts))
        parts.append((term.residuals(b)[0] * sw[:, None],
                      {k: v[0] * sw[:, None, None] for k, v in term.input_jacobian(b).items()}))
    X, rows, Ms = np.zeros((nx, N * nu)), [], []
    for k in range(p.H):
        S = np.zeros((nu, N * nu))
        j = k // p.node_steps
        S[:, j * nu:(j + 1) * nu] = np.diag(mask[k])
        Xn = A[k] @ X + B[k] @ S
        for r, jin in parts:
            M = np.zeros((r.shape[1], N * nu))
            if "sensordata" in jin:
                M += jin["sensordata"][k] @ (C[k] @ X + D[k] @ S)
            if "ctrl" in jin:
                M += jin["ctrl"][k] @ S
            Jy = np.zeros((r.shape[1], nx))
            if "qpos" in jin:
                Jy[:, :nv] = jin["qpos"][k]
            if "qvel" in jin:
                Jy[:, nv:2 * nv] = jin["qvel"][k]
            M += Jy @ Xn
            rows.append(r[k])
            Ms.append(M)
        X = Xn
    r, M = np.concatenate(rows), np.concatenate(Ms)
    return np.linalg.solve(M.T @ M + mu * np.eye(N * nu), -M.T @ r).reshape(N, nu), M, r


@pytest.mark.parametrize("kind", ["pendulum", "arm"])
@pytest.mark.parametrize("lo", [-3.0, 0.2])  # 0.2: some commands clipped (their offsets move nothing)
def test_one_iteration_matches_dense_numpy_reference(kind, lo):
    m, p = _problem(kind, lo=lo)
    mu = 1e-3
    opt = ILQROptimizer(ILQROptimizerConfig(mu_init=mu))
    delta = np.random.default_rng(1).normal(size=(p.N, m.nu)) * 0.2
    U, mask = opt.commands(p, delta)
    if lo > 0:
        assert 0 < mask.sum() < mask.size
    st, sd = (a[0].copy() for a in p.rollout(p.x0[None], p.warm[None], U[None]))
    quads = opt.quadratize(p, st, sd, U, mask, *opt.linearize(p, st, U))
    kff, K = opt.backward(quads, mu)
    step = opt.linear_step(quads, kff, K)
    ref, _, _ = _dense_step(opt, p, delta, mu)
    assert np.abs(ref).max() > 1e-2
    np.testing.assert_allclose(step, ref, atol=1e-8, rtol=0)


def test_linearisation_matches_rollout_finite_differences():
    """The condensed Jacobian of the stacked residuals with respect to the offsets (from
    mjd_transitionFD along the rollout) vs central differences of whole rollouts."""
    m, p = _problem("arm")
    opt = ILQROptimizer(ILQROptimizerConfig(fd_centered=True))
    delta = np.random.default_rng(2).normal(size=(p.N, m.nu)) * 0.2
    _, M, r0 = _dense_step(opt, p, delta, 1.0)

    def stacked(dl):
        U, _ = opt.commands(p, dl)
        st, sd = (a[0].copy() for a in p.rollout(p.x0[None], p.warm[None], U[None]))
        b = opt.batch(p, st[None], sd[None], U[None])
        rs = [t.residuals(b)[0] * np.sqrt(opt.row_weights(p, run, ts))[:, None] for t, run, ts in p.terms]
        return np.concatenate([np.concatenate([r[k] for r in rs]) for k in range(p.H)])
    np.testing.assert_allclose(stacked(delta), r0, atol=1e-12)
    Mf = np.zeros_like(M)
    h = 1e-6
    for i in range(delta.size):
        e = np.zeros(delta.size)
        e[i] = h
        Mf[:, i] = (stacked(delta + e.reshape(delta.shape)) - stacked(delta - e.reshape(delta.shape))) / (2 * h)
    np.testing.assert_allclose(M, Mf, atol=1e-5 * np.abs(Mf).max())


@pytest.mark.parametrize("kind", ["pendulum", "arm"])
def test_iterations_lower_the_cost(kind):
    m, p = _problem(kind)
    opt = ILQROptimizer(ILQROptimizerConfig(mu_init=1e-3, max_iter=4))
    delta, info = opt.optimize(p, np.zeros((p.N, m.nu)))
    assert info["iterations"] == 4 and info["accepted"][0]
    assert info["cost"] < 0.7 * info["cost0"]


def test_config_checks():
    with pytest.raises(ValueError, match="ilqr.mu_factor"):
        ILQROptimizerConfig(mu_factor=1.0)
    with pytest.raises(ValueError, match="ilqr.line_search"):
        ILQROptimizerConfig(line_search=(1.0, 0.0))
    with pytest.raises(ValueError, match="ilqr.max_iter"):
        ILQROptimizerConfig(max_iter=0)
    with pytest.raises(ValueError, match="ilqr"):
        SimMPCConfig(planner="ilqr", ilqr={"mu_init": 1.0})


SLIDE = ('<mujoco><option timestep="0.01"/><worldbody><body><joint name="x" type="slide" damping="5"/>'
         '<geom size="0.05" mass="1"/></body></worldbody><actuator><position joint="x" kp="50"/></actuator>'
         '<sensor><jointpos name="x" joint="x"/></sensor></mujoco>')


def test_sim_mpc_ilqr_closes_the_loop():
    """The documented slide example with planner="ilqr": the iLQR tracks the 0.3 m target from
    commands that reference 0 (mppi's 2 iterations of 31 draws beside it)."""
    model = mujoco.MjModel.from_xml_string(SLIDE)
    end = {}
    for planner in ("mppi", "ilqr"):
        config = SimMPCConfig(num_samples=32, horizon_steps=20, node_steps=10, ctrl_steps=10, max_iterations=2,
                              planner=planner).add(SensorTask(np.full((60, 1), 0.3), {"x": 100.0}))
        mpc = SimMPC(config, MjSim(model, 1), np.zeros((60, 1)))
        commands, infos = mpc.plan(mujoco.MjData(model), 0)
        assert commands.shape == (10, 1, 1) and infos[0]["iterations"] == 2
        (rollout,), (plans,) = mpc.execute(MjSim(model, 1), 60)
        end[planner] = abs(rollout["qpos"][-1, 0] - 0.3)
        if planner == "ilqr":
            assert plans[-1]["plan_cost"] < 0.01 * plans[0]["plan_cost"]
            assert all(np.isfinite(p["ilqr_cost"]) for p in plans)
    assert end["ilqr"] < 0.01 and end["ilqr"] < end["mppi"]


def test_sim_mpc_ilqr_refuses_what_it_does_not_support():
    from dataclasses import replace

    model = mujoco.MjModel.from_xml_string(SLIDE)
    cfg = SimMPCConfig(num_samples=8, horizon_steps=20, node_steps=10, ctrl_steps=10, planner="ilqr").add(
        SensorTask(np.zeros((60, 1)), {"x": 1.0}))

    class Double:
        num_commands = 1

        def __call__(self, sim, clock):
            sim.data.ctrl *= 2
    for bad in (replace(cfg, control_map=Double()), replace(cfg, backend="warp"), replace(cfg, num_replicas=2)):
        with pytest.raises(ValueError, match="planner: 'ilqr' needs backend 'cpu', no control_map and num_replicas 1"):
            SimMPC(bad, MjSim(model, 1), np.zeros((60, 1)))
