"""gato.controller.MPCController / StepResult and gato.hypotheses, through the public API.

The plant is the solver's own integrator (BSQP.sim_forward); every number is
seeded or deterministic (solves are bit-deterministic run to run)."""
import numpy as np
import pytest

import gato
from gato.controller import MPCController, StepResult
from gato.hypotheses import HypothesisBatch, world_wrench_to_gato_slot
from gato.interface import shift_plan

N = 16
DT = 0.03125
Q0 = np.array([0.0, 0.5, 0.0, -1.2, 0.0, 0.6, 0.0])
X0 = np.concatenate([Q0, np.zeros(7)])
URDF = gato.robot_urdf("iiwa14")


class Spy(gato.BSQP):
    """A BSQP that records what the controller hands it."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.warms, self.dual_resets = [], 0

    def solve(self, xcur_B, eepos_goals_B, xu_warm=None, *, budget_s=None):
        self.warms.append(None if xu_warm is None else np.array(xu_warm, dtype=np.float64))
        return super().solve(xcur_B, eepos_goals_B, xu_warm, budget_s=budget_s)

    def reset_dual(self):
        self.dual_resets += 1
        super().reset_dual()


#: torch runs on the CPU in CI (requirements/lock.txt pins PyPI's wheel with its CUDA runtime wheels,
#: which it needs to import even without a GPU). JAX: test/test_jax_inputs.py.
TORCH_SKIP = "torch is not installed (requirements/lock.txt pins it: run scripts/setup.sh)"


def solver(B=1, cls=gato.BSQP, **kw):
    return cls(URDF, B, N, DT, **kw)


def ref_for(s, offset=(0.0, 0.1, 0.05)):
    return np.tile(np.concatenate([s.ee_pos(Q0) + np.asarray(offset), np.zeros(3)]), s.N)


def plant_step(s, x, u, dt=DT):
    return np.asarray(s.sim_forward(x, np.asarray(u), dt))[0]   # (nx,) broadcasts over the batch


def knot(row, k, s):
    o = k * (s.nx + s.nu)
    return row[o:o + s.nx]


# ------------------------------------------------------------------ plain MPC and warm starts
def test_b1_controller_is_plain_mpc_bit_for_bit():
    a, b = solver(), solver(linsys="pcg")
    ctrl = MPCController(a, linsys="pcg", limits="off")
    ref = ref_for(a)
    x = X0.copy()
    warm = b.hold_trajectory(X0[None])
    for _ in range(5):
        r = ctrl.step(x, ref)
        b.reset_rho()
        m = b.solve(x, ref, warm)
        warm = shift_plan(np.asarray(m.xu)[0], b.nx, b.nu, b.N)[None]
        assert np.array_equal(r.u, m.u0()) and r.u.shape == (7,)
        assert r.best_id == 0 and r.hypo_stats is None and r.fc is None and not r.diverged
        x = plant_step(a, x, r.u)


def test_shift_repeats_final_stage_and_pred_err_is_knot1():
    s = solver(B=2, cls=Spy)
    ctrl = MPCController(s, linsys="pcg")
    ref = ref_for(s)
    r1 = ctrl.step(X0, ref)
    assert r1.pred_err == 0.0                      # reset(X0) seeds a hold at X0
    assert np.array_equal(s.warms[0], s.hold_trajectory(np.stack([X0, X0])))
    x1 = plant_step(s, X0, r1.u) + 0.01            # off the prediction on purpose
    r2 = ctrl.step(x1, ref)
    w, p = s.warms[1], r1.xu_best
    nx, nu, st = s.nx, s.nu, s.nx + s.nu
    assert np.array_equal(w[0], w[1])              # the winner goes to every entry
    assert np.array_equal(w[0], shift_plan(p, nx, nu, N))
    assert np.array_equal(w[0, :(N - 1) * st - nu], p[st:])                       # advanced one knot
    assert np.array_equal(knot(w[0], N - 1, s), knot(p, N - 1, s))                # last knot repeated
    assert np.array_equal(w[0, (N - 2) * st + nx:(N - 1) * st], p[(N - 2) * st + nx:(N - 1) * st])
    assert r2.pred_err == pytest.approx(np.linalg.norm(x1 - knot(p, 1, s)), rel=1e-12)
    assert r2.pred_err > 0.01


def test_hold_keeps_plan_and_pred_err_is_knot0():
    s = solver(B=2, cls=Spy)
    ctrl = MPCController(s, linsys="pcg", warm_start="hold")
    ref = ref_for(s)
    r1 = ctrl.step(X0, ref)
    x1 = plant_step(s, X0, r1.u)
    r2 = ctrl.step(x1, ref)
    assert np.array_equal(s.warms[1][0], r1.xu_best) and np.array_equal(s.warms[1][1], r1.xu_best)
    assert r2.pred_err == pytest.approx(np.linalg.norm(x1 - X0), rel=1e-12)


def test_reset_with_explicit_warm_start():
    s = solver(B=2, cls=Spy)
    ctrl = MPCController(s, linsys="pcg")
    rng = np.random.default_rng(3)
    guess = rng.normal(0.0, 0.1, s.xu_size)
    x0 = X0 + 0.02
    ctrl.reset(x0, xu_warm=guess)
    ctrl.step(x0, ref_for(s))
    expect = guess.copy()
    expect[:s.nx] = x0
    assert np.array_equal(s.warms[0], np.stack([expect, expect]))
    assert guess[0] != x0[0]                        # the caller's array is not modified
    two = rng.normal(0.0, 0.1, (2, s.xu_size))
    ctrl.reset(x0, xu_warm=two)
    r = ctrl.step(x0, ref_for(s))
    assert r.pred_err == 0.0 and np.array_equal(s.warms[1][:, s.nx:], two[:, s.nx:])
    with pytest.raises(ValueError, match="xu_warm"):
        ctrl.reset(x0, xu_warm=np.zeros(5))


def test_set_warm_start_recreates_a_tick_exactly_and_keeps_solver_state():
    """xu_warm read back after a tick, installed on a twin controller that ran the same ticks
    (same duals): the next step is bit-identical. The warm start is taken as given (knot 0
    too), the caller's array is copied, and bad input raises naming xu_warm."""
    ref = ref_for(solver())
    a, b = MPCController(solver()), MPCController(solver())
    x = X0.copy()
    for ctrl in (a, b):
        ctrl.reset(x)
        ctrl.warmup(x, ref)
        ctrl.step(x, ref)
    warm = a.xu_warm
    assert warm.shape == (1, a.solver.xu_size) and a.xu_warm is not a.xu_warm   # a copy each time
    mine = warm[0].copy()
    b.set_warm_start(mine)
    mine[:] = 0.0                                   # the controller kept its own copy
    x1 = X0 + 0.01
    ra, rb = a.step(x1, ref), b.step(x1, ref)
    assert np.array_equal(ra.u, rb.u) and np.array_equal(ra.xu_best, rb.xu_best)
    assert rb.pred_err == pytest.approx(np.linalg.norm(x1 - warm[0, :14]))   # knot 0 as given
    with pytest.raises(ValueError, match=r"xu_warm: expected shape"):
        b.set_warm_start(np.zeros(5))
    with pytest.raises(ValueError, match="xu_warm: contains NaN"):
        b.set_warm_start(np.full(b.solver.xu_size, np.nan))
    assert MPCController(solver()).xu_warm is None


def test_warmup_keeps_each_entrys_own_solution():
    s = solver(B=2, cls=Spy, rho_batch=[0.01, 1.0])
    ctrl = MPCController(s, linsys="auto")
    ref = ref_for(s)
    ctrl.reset(X0)
    w = ctrl.warmup(X0, ref)
    assert s.linsys == "bdsv_first"                 # the warm-up counts as cold
    xu = np.asarray(w.xu)
    assert not np.array_equal(xu[0], xu[1])
    ctrl.step(X0, ref)
    assert np.array_equal(s.warms[1], xu)            # not shifted, not selected


def test_best_of_batch_picks_lowest_final_merit():
    s = solver(B=3, rho_batch=[10.0, 0.01, 1.0])
    ctrl = MPCController(s, linsys="pcg")
    r = ctrl.step(X0, ref_for(s))
    m = r.solve.stats.final_merit
    assert len(set(m.tolist())) == 3
    assert r.best_id == int(np.argmin(m))
    assert np.array_equal(r.xu_best, np.asarray(r.solve.xu)[r.best_id])
    assert np.array_equal(r.u, r.solve.u0(r.best_id))


# ------------------------------------------------------------------ linsys policy
def test_linsys_default_and_pinned():
    s = solver(linsys="bdsv")
    c = MPCController(s)
    assert (c.linsys, c.bdsv_threshold) == ("bdsv", None)  # the CPU backend's wired default
    s.backend = "cuda"  # the reference's GPU default: auto at tau 0.1
    c = MPCController(s)
    assert (c.linsys, c.bdsv_threshold) == ("auto", 0.1)
    s.backend = "cpu"
    c = MPCController(s, linsys="bdsv")
    assert (c.linsys, c.bdsv_threshold, s.linsys) == ("bdsv", None, "bdsv")
    c.step(X0, ref_for(s))
    assert s.linsys == "bdsv"


def test_auto_switches_on_pred_err_threshold():
    s = solver()
    ctrl = MPCController(s, linsys="auto", bdsv_threshold=0.05)
    ref = ref_for(s)
    used = []
    r = ctrl.step(X0, ref)                          # pred_err 0: warm
    used.append((s.linsys, r.solve.stats.linsys))
    kick = np.zeros(14)
    kick[8] = 0.2                                   # 0.2 rad/s on joint 2: pred_err 0.2 > 0.05
    x = knot(r.xu_best, 1, s) + kick
    r = ctrl.step(x, ref)
    assert r.pred_err == pytest.approx(0.2, rel=1e-9)
    used.append((s.linsys, r.solve.stats.linsys))
    x = knot(r.xu_best, 1, s) + 0.004               # pred_err 0.015 < 0.05
    r = ctrl.step(x, ref)
    assert r.pred_err == pytest.approx(0.004 * np.sqrt(14), rel=1e-9)
    used.append((s.linsys, r.solve.stats.linsys))
    assert used == [("pcg", "pcg"), ("bdsv_first", "bdsv"), ("pcg", "pcg")]
    assert np.max(r.solve.stats.pcg_iters) < s.params.max_pcg_iters   # no cap-out involved


def test_auto_goes_cold_after_pcg_capout():
    s = solver(max_pcg_iters=1)
    ctrl = MPCController(s, linsys="auto", bdsv_threshold=10.0, limits="off")   # pred_err never decides here
    ref = ref_for(s)
    x, seq, iters = X0, [], []
    for _ in range(3):
        r = ctrl.step(x, ref)
        seq.append(s.linsys)
        iters.append(int(r.solve.stats.pcg_iters[0, 0]))
        x = plant_step(s, x, r.u)
    assert seq == ["pcg", "bdsv_first", "pcg"]
    assert iters == [1, 0, 1]                       # cap-out -> bdsv (0 PCG iterations) -> pcg again


# ------------------------------------------------------------------ re-seed
def test_reseed_resets_duals_and_seeds_hold():
    s = solver(cls=Spy)
    ctrl = MPCController(s, linsys="pcg", reseed_threshold=0.1, limits="off")
    ref = ref_for(s)
    r = ctrl.step(X0, ref)
    assert not r.reseeded
    resets = s.dual_resets
    x = knot(r.xu_best, 1, s).copy()
    x[7:] += 0.1                                    # pred_err = 0.1 * sqrt(7) = 0.26 > 0.1
    r = ctrl.step(x, ref)
    assert r.reseeded and r.pred_err == pytest.approx(0.1 * np.sqrt(7), rel=1e-9)
    assert s.dual_resets == resets + 1
    assert np.array_equal(s.warms[-1], s.hold_trajectory(x[None]))
    fresh = gato.BSQP(URDF, 1, N, DT, linsys="pcg").solve(x, ref)    # zero duals, hold seed
    assert np.array_equal(np.asarray(r.solve.xu), np.asarray(fresh.xu))
    x = knot(r.xu_best, 1, s)
    r = ctrl.step(x, ref)
    assert not r.reseeded and r.pred_err == 0.0 and s.dual_resets == resets + 1


def test_reseed_counts_as_cold_under_auto():
    s = solver()
    ctrl = MPCController(s, linsys="auto", bdsv_threshold=5.0, reseed_threshold=0.1)
    r = ctrl.step(X0, ref_for(s))
    r = ctrl.step(knot(r.xu_best, 1, s) + 0.05, ref_for(s))    # pred_err 0.19: re-seed, below bdsv_threshold
    assert r.reseeded and s.linsys == "bdsv_first"


# ------------------------------------------------------------------ budget
def test_budget_stops_at_iteration_boundary():
    s = solver(max_sqp_iters=50)
    ref = ref_for(s, (0.0, 0.2, 0.1))
    free = MPCController(s, linsys="pcg").step(X0, ref)
    assert free.iterations > 1 and not free.budget_hit
    assert free.iterations == int(free.solve.stats.sqp_iters[0])
    s2 = solver(max_sqp_iters=50)
    r = MPCController(s2, linsys="pcg").step(X0, ref, budget_s=1e-6)
    assert r.iterations == 1 and r.budget_hit and r.solve.stats.budget_hit
    assert r.wall_s > 0 and r.wall_s >= r.solve.solve_time_us * 1e-6
    # the returned plan is a complete iterate: its merit is the one the solver reported
    merit = s2.merit(r.xu_best[None], X0[None], ref[None])
    assert merit[0] == pytest.approx(r.solve.stats.final_merit[0], rel=1e-12)


# ------------------------------------------------------------------ array kinds
def test_torch_cpu_and_numpy_give_identical_u():
    torch = pytest.importorskip("torch", reason=TORCH_SKIP)
    ra = MPCController(solver(), linsys="pcg").step(X0, ref_for(solver()))
    s = solver()
    rb = MPCController(s, linsys="pcg").step(torch.from_numpy(X0), torch.from_numpy(ref_for(s)))
    assert isinstance(rb.u, torch.Tensor)
    assert np.array_equal(ra.u, rb.u.numpy())


# ------------------------------------------------------------------ bad input
def test_bad_input_raises_naming_the_argument():
    s = solver()
    ctrl = MPCController(s)
    ref = ref_for(s)
    with pytest.raises(ValueError, match=r"reference: expected shape \(96,\) or \(16, 6\)"):
        ctrl.step(X0, ref[:-6])
    bad = X0.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match=r"x_measured: contains NaN or Inf \(first at index 3\)"):
        ctrl.step(bad, ref)
    with pytest.raises(ValueError, match=r"x_measured: expected shape \(14,\)"):
        ctrl.step(X0[:7], ref)
    for dt in (0.0, -0.01, float("nan")):
        with pytest.raises(ValueError, match="dt_elapsed"):
            ctrl.step(X0, ref, dt)
    with pytest.raises(ValueError, match="budget_s"):
        ctrl.step(X0, ref, budget_s=0.0)
    with pytest.raises(ValueError, match="x0"):
        ctrl.reset(bad)
    with pytest.raises(ValueError, match="warm_start"):
        MPCController(s, warm_start="cold")
    with pytest.raises(ValueError, match="reseed_threshold"):
        MPCController(s, reseed_threshold=-1.0)
    with pytest.raises(ValueError, match="linsys"):
        MPCController(s, linsys="lu")
    with pytest.raises(ValueError, match=r"hypotheses: batch_size 3 differs from the solver's batch_size 1"):
        MPCController(s, hypotheses=WrenchGuesses([np.zeros(6)] * 3))
    assert ctrl.step(X0, ref.reshape(N, 6)).u.shape == (7,)   # (N, 6) is accepted


# ------------------------------------------------------------------ limits
def test_limits_off_installs_nothing_and_none_installs_the_admm_default():
    assert MPCController.LIMIT_DEFAULTS == {
        "admm": {"eps_rel": 0.01, "iters": 30, "rho": 0.01, "rho_q": 0.1, "rho_qd": 0.1, "rho_u": 1e-05},
        "al": {}, "barrier": {}, "telemetry": {}}
    s = solver()
    c = MPCController(s, limits="off")
    r = c.step(X0, ref_for(s))
    assert c.limits is None and r.limits == "" and r.row_viol is None and r.admm_linsys == ""
    assert s.get_row_groups() == [] and r.solve.stats.row_max_violation is None
    s = solver()
    c = MPCController(s)                                   # None: the ADMM default of a fixed-base arm
    g = s.get_row_groups()
    assert [x["rho"] for x in g] == [0.1, 0.1, 1e-5] and [x["mech_name"] for x in g] == ["admm"] * 3
    assert (s.admm_iters, s.admm_eps_abs, s.admm_eps_rel) == (30, 0.0, 0.01)
    r = c.step(X0, ref_for(s))
    assert c.limits == "admm" and r.limits == "admm" and r.admm_linsys == "bdsv_factor"
    np.testing.assert_array_equal(r.row_viol, r.solve.stats.row_max_violation[0])
    assert r.row_viol.shape == (3,)
    s = solver()
    s.enable_limit_al(rho=2.0)                             # configured by the caller: left as is
    c = MPCController(s)
    assert c.limits == "al" and [x["rho"] for x in s.get_row_groups()] == [2.0] * 3
    with pytest.raises(ValueError, match="limits_kw"):
        MPCController(s, limits_kw={"rho": 1.0})
    s = solver()
    MPCController(s, limits_kw={"iters": 4})               # overrides reach the default install
    assert s.admm_iters == 4 and s.get_row_groups()[1]["rho"] == 0.1
    for mech in ("admm", "barrier", "al", "telemetry"):
        s = solver()
        s.enable_limit_al()
        s.add_lin_u_rows(np.eye(7)[:1])
        c = MPCController(s, limits=mech)                  # re-installs the canonical groups only
        assert c.limits == mech and len(s.get_row_groups()) == 3
        assert c.step(X0, ref_for(s)).limits == mech
    for mech in ("admm", "barrier", "al", "telemetry"):
        with pytest.raises(ValueError, match=f"limits: '{mech}' needs the constraint row-group layer"):
            MPCController(solver(cls=NoRowGroups), limits=mech)
    assert MPCController(solver(cls=NoRowGroups)).limits is None
    with pytest.raises(ValueError, match="limits_kw"):
        MPCController(solver(), limits="off", limits_kw={"rho": 1.0})
    with pytest.raises(ValueError, match="limits"):
        MPCController(solver(), limits="hard")


class NoRowGroups(gato.BSQP):
    """A solver without the row-group layer (as a floating or foreign solver may be)."""

    enable_limit_admm = enable_limit_barrier = enable_limit_al = enable_limit_telemetry = None
    get_row_groups = disable_row_groups = None
    row_mech = None


def test_limits_keyword_overrides_reach_the_row_group_layer():
    s = solver()
    c = MPCController(s, limits="barrier", limits_kw={"mu": 0.01, "delta": 0.02})
    g = s.get_row_groups()
    assert [x["mech_name"] for x in g] == ["barrier"] * 3 and s.row_mech == "barrier"
    assert [(x["rho"], x["delta"]) for x in g] == [(0.01, 0.02)] * 3
    r = c.step(X0, ref_for(s))
    assert c.limits == "barrier" and r.limits == "barrier" and r.row_viol.shape == (3,)


# ------------------------------------------------------------------ divergence
def test_real_divergence_returns_gravity_compensation_then_reseeds():
    import pinocchio as pin

    s = solver(cls=Spy)
    ctrl = MPCController(s, linsys="pcg")
    far = ref_for(s, (1e200, 0.0, 0.0))            # finite, but the EE cost overflows the merit
    x = X0.copy()
    x[7:] = 0.3
    r = ctrl.step(x, far)
    assert bool(r.solve.diverged[0]) and not np.isfinite(r.solve.stats.final_merit[0])
    assert r.diverged and r.fallback == "gravity"
    model = s.model
    g = pin.rnea(model, model.createData(), Q0, np.zeros(7), np.zeros(7))
    lim = s.limits["u"]
    assert np.all(np.isfinite(r.u))
    assert np.array_equal(r.u, np.clip(g, -lim, lim))
    assert np.abs(r.u[1]) > 1.0                     # a real gravity torque on the shoulder
    assert np.all(np.isfinite(r.xu_best))
    resets = s.dual_resets
    x2 = plant_step(s, x, r.u)
    r2 = ctrl.step(x2, ref_for(s))
    assert r2.reseeded and not r2.diverged and r2.fallback == ""
    assert s.dual_resets == resets + 1
    assert np.array_equal(s.warms[-1], s.hold_trajectory(x2[None]))
    assert np.all(np.isfinite(r2.u))


class WeakMotors(gato.BSQP):
    """iiwa14 whose URDF effort limits read 5 N·m: gravity at the horizontal pose exceeds them."""

    @property
    def limits(self):
        lim = dict(super().limits)
        lim["u"] = np.full(7, 5.0)
        return lim


def test_gravity_fallback_is_clamped_to_effort_limits():
    import pinocchio as pin

    s = solver(cls=WeakMotors)
    ctrl = MPCController(s, linsys="pcg")
    q = np.array([0.0, 1.57, 0.0, 0.0, 0.0, 0.0, 0.0])   # arm horizontal: large shoulder torque
    x = np.concatenate([q, np.zeros(7)])
    r = ctrl.step(x, ref_for(s, (1e200, 0.0, 0.0)))
    g = pin.rnea(s.model, s.model.createData(), q, np.zeros(7), np.zeros(7))
    assert abs(g[1]) > 50.0                               # unclamped shoulder torque
    assert r.diverged and np.array_equal(r.u, np.clip(g, -5.0, 5.0)) and abs(r.u[1]) == 5.0


class AlwaysPick(HypothesisBatch):
    """A dynamics-neutral batch whose select() always names one entry."""

    def __init__(self, B, pick):
        self.batch_size, self.pick = B, pick

    def apply(self, solver, x):
        pass

    def select(self, solver, result, x_prev, u_prev, x_meas, dt):
        self.last_errors = np.zeros(self.batch_size)
        return self.pick

    def update(self, best_id, errors):
        pass


def test_selected_entry_diverged_falls_back_to_best_finite():
    s = solver(B=2, mu_batch=[10.0, 1e308])       # entry 1's merit overflows: a real divergence
    ctrl = MPCController(s, linsys="pcg", hypotheses=AlwaysPick(2, 1))
    ref = ref_for(s)
    r = ctrl.step(X0, ref)                         # first tick: no previous control, best finite merit
    assert list(r.solve.diverged) == [False, True] and r.best_id == 0 and r.fallback == ""
    r = ctrl.step(plant_step(s, X0, r.u), ref)
    assert r.best_id == 0 and r.fallback == "best_finite" and not r.diverged
    assert np.all(np.isfinite(r.u))


class FirstPick(AlwaysPick):
    """AlwaysPick with a first_row(): the row to run before any evidence (None: merit)."""

    def __init__(self, B, pick, first):
        super().__init__(B, pick)
        self.first = first

    def first_row(self):
        return self.first


def test_first_step_runs_the_row_the_batch_names_before_any_evidence():
    """The first step (no previous control to score) runs the batch's first_row() where it names
    one, not the lowest final merit (issue 32: rows that saw no evidence compared by merit handed
    the off-centre object's first plan to a swing row); None keeps the merit; later steps select()."""
    s = solver(B=3, rho_batch=[10.0, 0.01, 1.0])
    ref = ref_for(s)
    lowest = int(np.argmin(MPCController(s, linsys="pcg").step(X0, ref).solve.stats.final_merit))
    other = (lowest + 1) % 3
    ctrl = MPCController(s, linsys="pcg", hypotheses=FirstPick(3, lowest, other))
    r = ctrl.step(X0, ref)
    assert r.best_id == other and r.solve.stats.final_merit[other] > r.solve.stats.final_merit[lowest]
    assert np.array_equal(r.u, r.solve.u0(other))
    r = ctrl.step(plant_step(s, X0, r.u), ref)
    assert r.best_id == lowest                       # select() from the second step on
    r = MPCController(s, linsys="pcg", hypotheses=FirstPick(3, other, None)).step(X0, ref)
    assert r.best_id == lowest                       # None: the lowest final merit
    for bad in (3, -1, True, 1.0):
        with pytest.raises(ValueError, match=r"first_row\(\) returned"):
            MPCController(s, linsys="pcg", hypotheses=FirstPick(3, 0, bad)).step(X0, ref)


# ------------------------------------------------------------------ hypotheses
class WrenchGuesses(HypothesisBatch):
    """B constant EE wrench hypotheses: world-frame wrenches re-expressed at the current q
    (``local=False``) or joint-local slots programmed as given (``local=True``)."""

    def __init__(self, wrenches, local=False):
        self.wrenches = [np.asarray(w, dtype=np.float64) for w in wrenches]
        self.batch_size = len(self.wrenches)
        self.local = local
        self.updates = []

    def apply(self, solver, x):
        q = np.asarray(x)[:solver.nq]
        slots = self.wrenches if self.local else [
            world_wrench_to_gato_slot(solver.model, solver.data, solver.ee_frame_id, q, w) for w in self.wrenches]
        solver.set_f_ext_B(np.stack(slots))

    def update(self, best_id, errors):
        self.updates.append((best_id, np.array(errors)))


def test_world_wrench_slot_matches_pinocchio_aba():
    import pinocchio as pin

    s = solver()
    rng = np.random.default_rng(4)
    x = np.concatenate([Q0 + rng.normal(0, 0.1, 7), rng.normal(0, 0.3, 7)])
    u = rng.normal(0, 5.0, 7)
    f = np.array([3.0, -5.0, 12.0, 0.4, -0.7, 0.2])     # [force N; torque N·m], world axes
    q, v = x[:7], x[7:]
    slot = world_wrench_to_gato_slot(s.model, s.data, s.ee_frame_id, q, f)
    assert slot.shape == (6,)
    s.set_f_ext_B(slot[None])
    h = 1e-3
    qd_next = plant_step(s, x, u, h)[7:]
    model, data = s.model, s.model.createData()
    J = pin.computeFrameJacobian(model, data, q, s.ee_frame_id, pin.LOCAL_WORLD_ALIGNED)  # [lin; ang]
    qdd = pin.aba(model, data, q, v, u + J.T @ f)
    assert np.allclose((qd_next - v) / h, qdd, rtol=1e-7, atol=1e-7)
    with pytest.raises(ValueError, match="f_world"):
        world_wrench_to_gato_slot(s.model, s.data, s.ee_frame_id, q, np.zeros(3))


# joint-local slots [angular N·m; linear N] and world wrenches [force N; torque N·m]
LOCAL_CANDS = [np.zeros(6), [0.0, 0.0, 0.0, 0.0, 0.0, -40.0], [0.0, 0.5, 0.0, 25.0, 0.0, 0.0]]
WORLD_CANDS = [np.zeros(6), [0.0, 0.0, -40.0, 0.0, 0.0, 0.0], [25.0, 0.0, 0.0, 0.0, 0.5, 0.0]]


def run_hypothesis_loop(local, steps=6):
    CANDS = LOCAL_CANDS if local else WORLD_CANDS
    s = solver(B=3)
    hyp = WrenchGuesses(CANDS, local=local)
    ctrl = MPCController(s, hypotheses=hyp, linsys="pcg")
    plant = solver()
    ref = ref_for(s)
    x, picks = X0.copy(), []
    for _ in range(steps):
        r = ctrl.step(x, ref)
        picks.append(r.best_id)
        true = np.asarray(CANDS[2]) if local else world_wrench_to_gato_slot(
            plant.model, plant.data, plant.ee_frame_id, x[:7], CANDS[2])
        plant.set_f_ext_B(true[None])               # reality: hypothesis 2's wrench
        x = plant_step(plant, x, r.u)
    return r, hyp, picks


def test_default_scorer_picks_the_true_wrench_exactly():
    r, hyp, picks = run_hypothesis_loop(local=True)
    assert picks[1:] == [2] * 5
    assert [b for b, _ in hyp.updates] == [2] * 5   # select/update run once a previous control exists
    errs = hyp.updates[-1][1]
    assert errs.shape == (3,) and errs[2] == 0.0 and errs[0] > 0.1 and errs[1] > 0.1
    assert np.array_equal(r.hypo_stats["last_errors"], errs)
    assert np.array_equal(hyp.get_stats()["last_errors"], errs)   # what StepResult.hypo_stats carries
    assert not np.array_equal(r.solve.xu[0], r.solve.xu[2])    # each entry solved under its own wrench


def test_default_scorer_with_world_wrenches():
    # The slots are re-expressed at the CURRENT q while reality applied them at the previous
    # one (the one-tick lag of any observer), so the true hypothesis scores small, not zero.
    r, hyp, picks = run_hypothesis_loop(local=False)
    assert picks[1:] == [2] * 5
    for _, errs in hyp.updates:                     # measured: true/best-wrong ratio 0.10 .. 0.21
        assert errs[2] < 0.3 * min(errs[0], errs[1])


def test_single_hypothesis_select_is_a_noop():
    s = solver()
    hyp = WrenchGuesses([np.zeros(6)])
    assert hyp.select(s, None, X0, np.zeros(7), X0 + 1.0, DT) == 0
    ctrl = MPCController(s, hypotheses=hyp, linsys="pcg")
    plain = MPCController(solver(), linsys="pcg")
    x = X0.copy()
    for _ in range(3):
        a, b = ctrl.step(x, ref_for(s)), plain.step(x, ref_for(s))
        assert a.best_id == 0 and np.array_equal(a.u, b.u)
        x = plant_step(s, x, a.u)


def test_step_result_layout():
    s = solver()
    r = MPCController(s, limits="off").step(X0, ref_for(s), DT)
    assert isinstance(r, StepResult)
    assert r.xu_best.shape == (s.xu_size,) and r.iterations == 1 and not r.budget_hit
    assert (r.reseeded, r.diverged, r.fallback, r.admm_linsys, r.limits) == (False, False, "", "", "")
    names = list(StepResult.__dataclass_fields__)
    assert names[-2:] == ["diverged", "fallback"] and names[:5] == ["u", "best_id", "xu_best", "solve",
                                                                      "hypo_stats"]


class AdmmSpy(gato.BSQP):
    """The real solver (ADMM limits installed by the controller's default), recording the
    ADMM linear-solver switches the controller makes."""

    def set_admm_linsys(self, mode):
        self.admm_modes = getattr(self, "admm_modes", []) + [mode]
        super().set_admm_linsys(mode)


def test_admm_linsys_auto_follows_the_warm_startedness_signal():
    s = solver(cls=AdmmSpy)
    ctrl = MPCController(s, linsys="pcg", admm_linsys="auto", admm_threshold=0.05)
    assert (ctrl.admm_linsys, ctrl.admm_threshold) == ("auto", 0.05)
    ref = ref_for(s)
    r1 = ctrl.step(X0, ref)                                   # pred_err 0: warm
    r2 = ctrl.step(knot(r1.xu_best, 1, s) + 0.03, ref)        # pred_err 0.11 > 0.05: cold
    r3 = ctrl.step(knot(r2.xu_best, 1, s), ref)               # pred_err 0: warm
    assert [r.admm_linsys for r in (r1, r2, r3)] == ["pcg", "bdsv_factor", "pcg"]
    assert s.admm_active and s.admm_modes == ["pcg", "bdsv_factor", "pcg"] and s.admm_linsys == "pcg"
    # admm_threshold defaults to the SQP bdsv_threshold (one signal, two switches)
    c = MPCController(solver(cls=AdmmSpy), linsys="auto", bdsv_threshold=0.2, admm_linsys="auto")
    assert (c.admm_linsys, c.admm_threshold) == ("auto", 0.2)
    pinned = solver(cls=AdmmSpy)
    r = MPCController(pinned, admm_linsys="bdsv_factor").step(X0, ref)
    assert r.admm_linsys == "bdsv_factor" and pinned.admm_modes == ["bdsv_factor"]
