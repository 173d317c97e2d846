"""gato.envs.ArmTrackEnv: spaces, action validation, zero-order hold, reset/step semantics
(truncation, termination on a non-finite state, info keys), the unmodelled wrench, and
MPCPolicy tracking a figure-8 in the env."""
import subprocess
import sys
import warnings

import numpy as np
import pytest

import gato
from gato import tasks
from gato.policy import GoalReference, MPCPolicy, TrajectoryReference
from gato.worlds import PinocchioWorld

gym = pytest.importorskip("gymnasium")
import gato.envs  # noqa: E402
from gato.envs import ArmTrackEnv  # noqa: E402

PLANT = "iiwa14"
URDF = gato.robot_urdf(PLANT)
INFO_KEYS = {"t", "ee_pos", "ref0", "tracking_err"}


@pytest.fixture(scope="module")
def model():
    import pinocchio as pin

    return pin.buildModelFromUrdf(str(URDF))


def test_import_gato_stays_light():
    """``import gato`` pulls in neither gymnasium, mujoco nor matplotlib (gato.envs /
    gato.plotting are submodules imported on demand)."""
    code = ("import sys, gato; heavy = [m for m in ('gymnasium', 'mujoco', 'matplotlib') if m in sys.modules]; "
            "assert not heavy, heavy; assert gato.MPC_GATO.__module__ == 'gato.frontends.mpc_gato'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_spaces_reset_and_info_without_reference(model):
    env = ArmTrackEnv(PLANT)
    assert env.observation_space.shape == (14,) and env.action_space.shape == (7,)
    assert np.array_equal(env.action_space.high, tasks.urdf_limits(model)["u"])
    assert np.array_equal(env.action_space.low, -tasks.urdf_limits(model)["u"])
    assert env.ee_frame == "EE" and env.n_substeps == 10
    obs, info = env.reset(seed=0)
    assert obs.shape == (14,) and obs.dtype == np.float64
    assert np.array_equal(obs[:7], tasks.Q_READY[PLANT]) and not np.any(obs[7:])
    assert set(info) == INFO_KEYS and info["t"] == 0.0
    assert info["ref0"] is None and info["tracking_err"] is None
    s = gato.BSQP(URDF, 1, 4, 0.03125)
    assert np.allclose(info["ee_pos"], s.ee_pos(obs[:7]), atol=1e-12)
    assert np.allclose(env.ee_pos(obs[:7]), s.ee_pos(obs[:7]), atol=1e-12)
    obs2, reward, terminated, truncated, info = env.step(np.zeros(7))
    assert reward == 0.0 and not terminated and not truncated
    assert set(info) == INFO_KEYS and info["t"] == pytest.approx(0.01)
    assert obs2[10] != 0.0  # gravity acts under zero torque: the arm moves


def test_gymnasium_env_checker_passes():
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the checker's advice on unbounded/unnormalized boxes
        check_env(ArmTrackEnv(PLANT), skip_render_check=True)
        check_env(ArmTrackEnv(PLANT, reference=GoalReference([0.6, 0.0, 0.5], 8)), skip_render_check=True)


@pytest.mark.parametrize("bad", [np.zeros(6), np.zeros(8), np.zeros((1, 7)), np.zeros((7, 1)), 0.0, [],
                                 "abc", [0, 0, 0, np.nan, 0, 0, 0], np.r_[np.inf, np.zeros(6)]])
def test_rejects_misshaped_or_nonfinite_actions(bad):
    env = ArmTrackEnv(PLANT)
    env.reset()
    with pytest.raises(ValueError, match=r"action.*\(7,\)"):
        env.step(bad)
    assert env.t == 0.0  # a rejected action does not advance the episode


def test_out_of_box_action_is_clipped_to_the_effort_limits():
    env = ArmTrackEnv(PLANT)
    lim = env.action_space.high
    env.reset()
    a, *_ = env.step(10 * lim)
    env.reset()
    b, *_ = env.step(lim)
    assert np.array_equal(a, b)


def test_step_before_reset_raises():
    with pytest.raises(RuntimeError, match="reset"):
        ArmTrackEnv(PLANT).step(np.zeros(7))


def test_zero_order_hold_is_floor_ctrl_dt_over_sim_dt_rk4_substeps():
    """One env step = floor(ctrl_dt / sim_dt) PinocchioWorld RK4 steps under the same torque
    (float rounding absorbed: 0.03 / 0.001 = 29.999999999999996 is 30 substeps)."""
    env = ArmTrackEnv(PLANT, ctrl_dt=0.03, sim_dt=0.001)
    assert env.n_substeps == 30
    assert ArmTrackEnv(PLANT, ctrl_dt=0.0105, sim_dt=0.001).n_substeps == 10
    u = np.linspace(-5.0, 5.0, 7)
    obs, _ = env.reset()
    w = PinocchioWorld(URDF)
    q, dq = obs[:7], obs[7:]
    for _ in range(30):
        q, dq = w.step(q, dq, u, 0.001)
    obs, *_ = env.step(u)
    assert np.array_equal(obs, np.concatenate([q, dq]))


def test_truncation_at_horizon_with_a_counted_clock():
    env = ArmTrackEnv(PLANT, horizon_s=0.05, ctrl_dt=0.01)
    env.reset()
    flags = [env.step(np.zeros(7))[3] for _ in range(5)]
    assert flags == [False, False, False, False, True]
    assert env.t == 0.05  # 5 * 0.01 counted, not accumulated
    _, _, term, trunc, info = env.step(np.zeros(7))  # stepping on after truncation is allowed
    assert trunc and not term and info["t"] == pytest.approx(0.06)
    env.reset()
    assert env.t == 0.0 and not env.step(np.zeros(7))[3]


def test_truncation_when_the_reference_is_done_and_reward_is_minus_tracking_error():
    s = gato.BSQP(URDF, 1, 4, 0.1)
    p0 = s.ee_pos(tasks.Q_READY[PLANT])
    traj = np.tile(np.concatenate([p0 + [0.0, 0.02, 0.0], np.zeros(3)]), 6)  # T = 6 knots, N = 4
    ref = TrajectoryReference(traj, 0.1, 4)  # done from knot 3 = t 0.3 s
    env = ArmTrackEnv(PLANT, reference=ref, ctrl_dt=0.05, horizon_s=10.0)
    obs, info = env.reset()
    assert np.allclose(info["ref0"], p0 + [0.0, 0.02, 0.0])
    assert info["tracking_err"] == pytest.approx(0.02, abs=1e-9)
    import pinocchio as pin

    m = pin.buildModelFromUrdf(str(URDF))
    truncs = []
    for _ in range(6):
        tau = pin.rnea(m, m.createData(), obs[:7], obs[7:], np.zeros(7))
        obs, reward, term, trunc, info = env.step(tau)
        assert not term
        assert reward == pytest.approx(-np.linalg.norm(env.ee_pos(obs[:7]) - info["ref0"]), abs=1e-12)
        assert reward == pytest.approx(-info["tracking_err"], abs=1e-12)
        truncs.append(trunc)
    assert truncs == [False, False, False, False, False, True]  # t = 0.3 s is knot 3 > last_start 2


def test_termination_on_a_nonfinite_state():
    """A wrench of 1e300 N drives the integrator to Inf/NaN: the step terminates with a NaN
    observation and the finite penalty; stepping on raises until reset."""
    env = ArmTrackEnv(PLANT, f_ext_world=[1e300, 0, 0, 0, 0, 0], reference=GoalReference([0.6, 0, 0.5], 4),
                      nonfinite_penalty=50.0)
    obs, info = env.reset()
    assert np.all(np.isfinite(obs))
    obs, reward, terminated, truncated, info = env.step(np.zeros(7))
    assert terminated and not truncated and reward == -50.0
    assert obs.shape == (14,) and np.all(np.isnan(obs))
    assert set(info) == INFO_KEYS and np.all(np.isnan(info["ee_pos"])) and np.isnan(info["tracking_err"])
    assert np.allclose(info["ref0"], [0.6, 0, 0.5])
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(7))
    obs, _ = env.reset()
    assert np.all(np.isfinite(obs))


def test_seeded_start_jitter_and_reset_options():
    env = ArmTrackEnv(PLANT, q0_jitter=0.05)
    a, _ = env.reset(seed=3)
    b, _ = env.reset(seed=3)
    c, _ = env.reset(seed=4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert 0 < np.max(np.abs(a[:7] - tasks.Q_READY[PLANT])) <= 0.05
    exact = ArmTrackEnv(PLANT)
    q0 = np.full(7, 0.1)
    obs, _ = exact.reset(options={"q0": q0, "dq0": np.ones(7)})
    assert np.array_equal(obs, np.r_[q0, np.ones(7)])
    with pytest.raises(ValueError, match="options"):
        exact.reset(options={"x0": q0})
    with pytest.raises(ValueError, match="q0"):
        exact.reset(options={"q0": np.zeros(6)})


def test_unmodelled_wrench_pushes_the_ee_in_world_axes(model):
    """Under gravity compensation the arm holds still; a world -z force of 30 N at the EE
    (not in the torques) pushes the EE down, and a +y force pushes it along +y."""
    import pinocchio as pin

    data = model.createData()
    moves = {}
    for name, f in (("none", None), ("down", [0, 0, -30.0, 0, 0, 0]), ("side", [0, 30.0, 0, 0, 0, 0])):
        env = ArmTrackEnv(PLANT, f_ext_world=f)
        obs, info = env.reset()
        p0 = info["ee_pos"]
        for _ in range(10):
            obs, _, _, _, info = env.step(pin.rnea(model, data, obs[:7], np.zeros(7), np.zeros(7)))
        moves[name] = info["ee_pos"] - p0
    assert np.linalg.norm(moves["none"]) < 2e-3
    assert moves["down"][2] < -0.01 and abs(moves["down"][2]) > 3 * np.abs(moves["down"][:2]).max()
    assert moves["side"][1] > 0.01


def test_constructor_validation(tmp_path):
    with pytest.raises(ValueError, match="robot"):
        ArmTrackEnv("no_such_robot")
    with pytest.raises(ValueError, match="ctrl_dt"):
        ArmTrackEnv(PLANT, ctrl_dt=0.0)
    with pytest.raises(ValueError, match="sim_dt"):
        ArmTrackEnv(PLANT, ctrl_dt=0.001, sim_dt=0.01)
    with pytest.raises(ValueError, match="reference"):
        ArmTrackEnv(PLANT, reference=object())
    with pytest.raises(ValueError, match="f_ext_world"):
        ArmTrackEnv(PLANT, f_ext_world=[1.0, 2.0])
    with pytest.raises(ValueError, match="q0"):
        ArmTrackEnv(PLANT, q0=np.zeros(6))
    with pytest.raises(ValueError, match="ee_frame"):
        ArmTrackEnv(PLANT, ee_frame="nope")
    env = ArmTrackEnv(str(URDF))  # a URDF path works like the plant name
    assert env.plant == PLANT and env.ee_frame == "EE"


@pytest.mark.slow
def test_mpc_policy_tracks_a_figure8_in_the_env(model):
    """MPCPolicy (iiwa14, N = 32 knots of 0.03125 s, B = 1, CPU defaults) drives the env at
    100 Hz (10 RK4 substeps of 1 ms) over two periods of the first seeded figure-8 of
    fig8_scenarios(seed=0, ratio_range=(0.3, 0.5)) (ratio 0.45, period 4.75 s, 9.5 s).
    Measured (2 cores, float64): mean ||ee - ref0|| 15.6 mm, max 27.5 mm, 951 steps."""
    N, dt = 32, 0.03125
    sc = tasks.fig8_scenarios(model, PLANT, 1, seed=0, dt=dt, ratio_range=(0.3, 0.5))[0]
    traj, sim_time = tasks.fig8_reference(sc, N)
    ref = TrajectoryReference(traj, dt, N)
    env = ArmTrackEnv(PLANT, q0=sc["q0"], reference=ref, ctrl_dt=0.01, horizon_s=sim_time)
    pol = MPCPolicy(gato.MPCController(gato.BSQP(URDF, 1, N, dt)), ref, 0.01)
    obs, info = env.reset(seed=0)
    pol.reset(obs)
    errs, ee = [], []
    while True:
        action = pol(obs)
        assert env.action_space.contains(np.asarray(action))
        obs, reward, terminated, truncated, info = env.step(action)
        assert not terminated
        errs.append(info["tracking_err"])
        ee.append(info["ee_pos"])
        if truncated:
            break
    errs, ee = np.array(errs), np.array(ee)
    assert len(errs) == 951 and info["t"] == pytest.approx(sim_time, abs=0.01)
    assert errs.mean() < 0.02
    assert errs.max() < 0.035
    # the arm really travelled the figure-8 (>= 80 % of the reference's extent on each axis)
    span_ref = np.ptp(traj.reshape(-1, 6)[:len(ee), :3], axis=0)
    assert np.all(np.ptp(ee, axis=0) >= 0.8 * span_ref)
