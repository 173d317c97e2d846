"""COLLISION clearance rows (docs/constraints.md, "Collision clearance rows") through the
public API: the sphere cover, the clearance and its Jacobian against a NumPy / pinocchio
oracle and finite differences for every obstacle kind, every mechanism on an open-loop
plan, a closed loop on PinocchioWorld whose EE reference passes through an obstacle,
the duals / ADMM state, per-knot masks and bad input.

Everything is seeded or deterministic.
"""
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

import gato
from gato import rowkinds as rk
from gato import spherize
from gato.interface import MAX_ROWS_PER_GROUP
from gato.worlds import PinocchioWorld

URDF = str(gato.robot_urdf("iiwa14"))
Q0 = np.array([0.0, 0.6, 0.0, -1.3, 0.0, 1.2, 0.0])
X0 = np.concatenate([Q0, np.zeros(7)])
N, DT = 16, 0.05


def solver(B=1, n=N, dt=DT, **kw):
    return gato.BSQP(URDF, B, n, dt, **kw)


# ------------------------------------------------------------------ NumPy oracle
def np_centres(s, q):
    """World sphere centres (n, 3) by pinocchio's Python bindings (frame placements)."""
    model = pin.buildModelFromUrdf(URDF)
    data = model.createData()
    pin.forwardKinematics(model, data, np.asarray(q, dtype=np.float64))
    pin.updateFramePlacements(model, data)
    sp = s.collision_spheres
    return np.array([data.oMf[model.getFrameId(link)].act(c) for link, c in zip(sp["links"], sp["centres"])])


def np_distance(kind, o, p):
    """Signed distance of point p to one obstacle (the documented tuple of its kind)."""
    o = np.asarray(o, dtype=np.float64)
    if kind == "spheres":
        return np.linalg.norm(p - o[:3]) - o[3]
    if kind == "capsules":
        a, b, r = o[:3], o[3:6], o[6]
        t = np.clip(np.dot(p - a, b - a) / np.dot(b - a, b - a), 0, 1)
        return np.linalg.norm(p - (a + t * (b - a))) - r
    if kind == "cuboids":
        c, h = o[:3], o[3:6]
        R = pin.Quaternion(*o[6:10]).normalized().matrix() if len(o) == 10 else np.eye(3)  # (w, x, y, z)
        q = np.abs(R.T @ (p - c)) - h
        return np.linalg.norm(np.maximum(q, 0)) + min(q.max(), 0.0)
    n = o[:3] / np.linalg.norm(o[:3])
    return n @ p - o[3] / np.linalg.norm(o[:3])


def np_clearance(s, q, env):
    """Clearances (n,) of the spheres at q to the obstacles of env ({kind: [tuples]})."""
    cs, r = np_centres(s, q), s.collision_spheres["radii"]
    out = np.full(len(r), np.inf)
    for kind, obs in env.items():
        for o in obs:
            out = np.minimum(out, [np_distance(kind, o, c) for c in cs])
    return out - r


# A point in front of the arm at Q0 (EE height), where every kind of obstacle sits close to
# several spheres without swallowing one.
def _near(s):
    return s.ee_pos(Q0) + np.array([0.0, 0.0, -0.25])


ENVS = {
    "spheres": lambda p: [(*p, 0.08)],
    "capsules": lambda p: [(*(p + [0, -0.2, 0]), *(p + [0, 0.2, 0.05]), 0.05)],
    "cuboids": lambda p: [(*p, 0.06, 0.1, 0.04, *pin.Quaternion(pin.rpy.rpyToMatrix(0.3, -0.2, 0.5)).coeffs()[[3, 0, 1, 2]])],
    "planes": lambda p: [(0.2, 0.1, 1.0, np.dot([0.2, 0.1, 1.0], p))],
}


# ------------------------------------------------------------------ the sphere cover
def test_the_sphere_cover_is_conservative_on_the_iiwa14_meshes():
    """Every vertex of every moving link's collision meshes lies inside a sphere of that link
    (the cover gato.spherize builds at the default collision_res 0.15 m); the fixed base link
    has no spheres; the set fits one row group."""
    s = solver()
    sp = s.collision_spheres
    assert sp["res"] == 0.15 and 5 <= len(sp["radii"]) <= MAX_ROWS_PER_GROUP
    assert np.all(sp["radii"] > 0)
    links = np.array(sp["links"])
    pts = spherize.link_points(URDF, 0.15)
    assert "iiwa_base" in pts and "iiwa_base" not in links        # fixed to the world: no rows
    checked = 0
    for link, (p, _) in pts.items():
        if link == "iiwa_base":
            continue
        sel = links == link
        assert sel.any(), f"{link} has collision geometry but no sphere"
        c, r = sp["centres"][sel], sp["radii"][sel]
        d = np.linalg.norm(p[:, None, :] - c[None], axis=2) - r[None]
        assert d.min(axis=1).max() <= 0.0, f"{link}: a vertex lies outside every sphere"
        checked += len(p)
    assert checked > 10000   # the real meshes were read (not a primitive stand-in)


def test_primitive_geometry_is_covered_too(tmp_path):
    """Box / cylinder / sphere collision shapes: every point of the shape (dense samples, not
    the spherizer's) is inside a sphere of its link."""
    urdf = tmp_path / "prim.urdf"
    urdf.write_text("""<robot name="prim">
  <link name="base"/>
  <link name="a"><collision><origin xyz="0 0 0.2" rpy="0.3 0 0"/><geometry><box size="0.1 0.2 0.4"/></geometry></collision>
   <collision><origin xyz="0.1 0 0"/><geometry><sphere radius="0.05"/></geometry></collision></link>
  <link name="b"><collision><origin xyz="0 0 0.1" rpy="0 1.57 0"/><geometry><cylinder radius="0.04" length="0.3"/></geometry></collision></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="a"/><axis xyz="0 0 1"/>
   <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="j2" type="revolute"><parent link="a"/><child link="b"/><origin xyz="0 0 0.4"/><axis xyz="0 1 0"/>
   <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>""")
    sp = spherize.spherize(urdf, 0.1)
    rng = np.random.default_rng(0)
    links = np.array(sp["links"])

    def inside(link, pts):
        c, r = sp["centres"][links == link], sp["radii"][links == link]
        return (np.linalg.norm(pts[:, None] - c[None], axis=2) - r[None]).min(axis=1).max() <= 0

    # dense surface samples of each shape, in the link frame
    u = rng.uniform(-1, 1, (20000, 3))
    box = u * [0.05, 0.1, 0.2]
    ax = rng.integers(0, 3, len(box))
    box[np.arange(len(box)), ax] = np.sign(u[np.arange(len(box)), ax]) * np.array([0.05, 0.1, 0.2])[ax]
    R = pin.rpy.rpyToMatrix(0.3, 0, 0)
    assert inside("a", box @ R.T + [0, 0, 0.2])
    v = rng.normal(size=(5000, 3))
    assert inside("a", 0.05 * v / np.linalg.norm(v, axis=1, keepdims=True) + [0.1, 0, 0])
    t = rng.uniform(0, 2 * np.pi, 5000)
    cyl = np.stack([0.04 * np.cos(t), 0.04 * np.sin(t), rng.uniform(-0.15, 0.15, 5000)], 1)
    assert inside("b", cyl @ pin.rpy.rpyToMatrix(0, 1.57, 0).T + [0, 0, 0.1])


# ------------------------------------------------------------------ clearance and Jacobian
@pytest.mark.parametrize("kind", list(ENVS))
def test_clearance_and_its_jacobian_match_the_oracle_and_finite_differences(kind):
    """collision_clearance (the rows' values and linearization in the C++ core) against the
    pinocchio/NumPy oracle (1e-9 m) and central differences of itself (1e-6) at seeded
    configurations around Q0, for each obstacle kind."""
    s = solver()
    env = {kind: ENVS[kind](_near(s))}
    s.set_collision_environment(**env)
    rng = np.random.default_rng(1)
    for _ in range(3):
        q = Q0 + rng.uniform(-0.3, 0.3, 7)
        d, J = s.collision_clearance(q)
        assert d.shape == (len(s.collision_spheres["radii"]),) and J.shape == (len(d), 7)
        np.testing.assert_allclose(d, np_clearance(s, q, env), atol=1e-9)
        eps = 1e-6
        fd = np.stack([(s.collision_clearance(q + eps * e)[0] - s.collision_clearance(q - eps * e)[0]) / (2 * eps)
                       for e in np.eye(7)], axis=1)
        np.testing.assert_allclose(J, fd, atol=1e-6)
        assert np.abs(J).max() > 0.1   # the rows do move with q


def test_clearance_is_the_nearest_obstacle_of_all_kinds_together():
    s = solver()
    p = _near(s)
    env = {k: f(p + 0.15 * i * np.array([0, 1, 0])) for i, (k, f) in enumerate(ENVS.items())}
    env["planes"] = [(0, 0, 1, -0.05)]   # the floor slightly below z = 0
    s.set_collision_environment(**env)
    d, _ = s.collision_clearance(Q0)
    np.testing.assert_allclose(d, np_clearance(s, Q0, env), atol=1e-9)


# ------------------------------------------------------------------ solves
def test_the_kkt_blocks_gain_the_al_terms_of_the_violated_rows():
    """debug_setup_kkt with a fresh AL collision group (duals 0, rho w) at a plan whose spheres
    go through the obstacle: the position gradient gains sum_i -w (margin - d_i)+ J_i and the
    position block sum_i w J_i' J_i over the violated rows, per knot 1..N-1 (the NumPy oracle of
    the PHR term with the C++ clearance rows), and nothing else changes."""
    w, margin = 50.0, 0.02
    base, rows = solver(), solver()
    for s in (base, rows):
        s.enable_limit_al()
    p0, c, obs = _obstacle_setup(rows)
    rows.set_collision_environment(spheres=obs)
    rows.enable_collision(mech="al", rho=w, margin=margin)
    ref = np.tile(np.concatenate([_goal_through(rows, p0, c), np.zeros(3)]), N)[None]
    xu = None
    for _ in range(6):
        xu = base.solve(X0[None], ref, xu).xu          # the rows-off plan: through the obstacle
    fresh = solver()                                    # the limit groups' duals at 0, as in `rows`
    fresh.enable_limit_al()
    a, b = fresh.debug_setup_kkt(xu, X0[None], ref), rows.debug_setup_kkt(xu, X0[None], ref)
    dq, dQ = b["q"][0] - a["q"][0], b["Q"][0] - a["Q"][0]
    n_viol = 0
    for k in range(N):
        q = xu[0][k * 21:k * 21 + 7]
        d, J = rows.collision_clearance(q)
        v = np.maximum(margin - d, 0.0) if k >= 1 else np.zeros_like(d)
        n_viol += int((v > 0).sum())
        np.testing.assert_allclose(dq[k, :7], -w * v @ J, atol=1e-9)
        np.testing.assert_allclose(dQ[k, :7, :7], w * J[v > 0].T @ J[v > 0], atol=1e-9)
        assert np.all(dq[k, 7:] == 0) and np.all(dQ[k, 7:, :] == 0) and np.all(dQ[k, :, 7:] == 0)
    assert n_viol > 0
    np.testing.assert_array_equal(a["R"], b["R"])


def _goal_through(s, p0, obstacle_c):
    """A constant goal on the far side of the obstacle (the straight EE path crosses it)."""
    return p0 + 2.0 * (obstacle_c - p0)


def _obstacle_setup(s):
    """Sphere obstacle centred 0.18 m from the EE along +y, radius 0.07: the straight EE path to
    the goal beyond it passes through it."""
    p0 = s.ee_pos(Q0)
    c = p0 + np.array([0.0, 0.18, 0.0])
    return p0, c, [(*c, 0.07)]


@pytest.mark.parametrize("mech", ["admm", "al", "barrier"])
def test_every_mechanism_keeps_the_plan_clear_of_the_obstacle(mech):
    """Repeated warm solves toward a goal behind a sphere obstacle: without the rows the plan's
    spheres go through it (clearance < -2 cm); with the collision group (every mechanism) every
    knot of the returned plan keeps clearance >= margin - 5 mm (the figures in
    docs/constraints.md), and the telemetry of the group is the plan's true violation."""
    def run(with_rows):
        s = solver()
        s.enable_limit_admm() if mech == "admm" else (s.enable_limit_al() if mech == "al" else s.enable_limit_barrier())
        p0, c, obs = _obstacle_setup(s)
        s.set_collision_environment(spheres=obs)
        if with_rows:
            g = s.enable_collision(mech=mech)
        ref = np.tile(np.concatenate([_goal_through(s, p0, c), np.zeros(3)]), N)
        xu = None
        for _ in range(12):
            r = s.solve(X0[None], ref[None], xu)
            xu = r.xu
        qs = np.array([xu[0][k * 21:k * 21 + 7] for k in range(N)])
        dmin = np.array([s.collision_clearance(q)[0].min() for q in qs[1:]])
        return s, r, dmin, (g if with_rows else None)

    _, _, free, _ = run(False)
    assert free.min() < -0.02
    s, r, dmin, g = run(True)
    assert dmin.min() >= 0.02 - 0.005, (mech, dmin.min())
    # the group's reported violation is the plan's: max over knots 1..N-1 of (margin - d)+
    xs = np.array([r.xu[0][k * 21:k * 21 + 7] for k in range(1, N)])
    viol = max(0.0, max((0.02 - s.collision_clearance(q)[0]).max() for q in xs))
    np.testing.assert_allclose(np.asarray(r.stats.row_max_violation).reshape(1, -1)[0, g], viol, atol=1e-9)


def test_telemetry_measures_only_and_duals_and_admm_state_have_their_shapes():
    """Telemetry rows leave the plan bit-identical and report the violation; the AL duals
    (lam_lo >= 0, lam_hi = 0) and ADMM state (y <= 0) come back as (B, N, n_spheres)."""
    B = 2
    base = solver(B)
    base.enable_limit_telemetry()
    tel = solver(B)
    tel.enable_limit_telemetry()
    p0, c, obs = _obstacle_setup(tel)
    tel.set_collision_environment(spheres=obs)
    g = tel.enable_collision()
    assert tel.get_row_groups()[g]["kind"] == rk.COLLISION and tel.get_row_groups()[g]["mech_name"] == "telemetry"
    ref = np.tile(np.concatenate([_goal_through(tel, p0, c), np.zeros(3)]), (B, N))
    x = np.tile(X0, (B, 1))
    a, b = base.solve(x, ref), tel.solve(x, ref)
    np.testing.assert_array_equal(a.xu, b.xu)
    assert np.asarray(b.stats.row_max_violation).reshape(B, -1)[0, g] > 0.02
    n = len(tel.collision_spheres["radii"])
    for mech in ("al", "admm"):
        s = solver(B)
        s.enable_limit_al() if mech == "al" else s.enable_limit_admm()
        s.set_collision_environment(spheres=obs)
        s.enable_collision()
        xu = None
        for _ in range(4):
            xu = s.solve(x, ref, xu).xu
        if mech == "al":
            d = s.get_collision_row_duals()
            assert set(d) == {"lam_hi", "lam_lo"} and all(v.shape == (B, N, n) for v in d.values())
            assert np.all(d["lam_lo"] >= 0) and d["lam_lo"].max() > 0 and np.all(d["lam_hi"] == 0)
            assert np.all(d["lam_lo"][:, 0] == 0)   # knot 0 is outside the window
        else:
            z = s.get_collision_admm_state()
            assert set(z) == {"z", "y"} and all(v.shape == (B, N, n) for v in z.values())
            assert np.all(z["y"] <= 1e-12) and z["y"].min() < 0 and np.all(z["z"][:, 1:] >= 0.02 - 1e-12)


def test_a_knot_mask_switches_the_rows_off():
    """set_row_group_mask takes an (N,) mask for the collision group; an all-False mask makes
    the AL rows contribute nothing (the plan is the rows-off plan) and zeroes their duals."""
    s = solver()
    s.enable_limit_al()
    p0, c, obs = _obstacle_setup(s)
    s.set_collision_environment(spheres=obs)
    g = s.enable_collision()
    with pytest.raises(ValueError, match=r"mask: expected shape \(16,\)"):
        s.set_row_group_mask(g, np.ones((N, 3), dtype=bool))
    s.set_row_group_mask(g, np.zeros(N, dtype=bool))
    off = solver()
    off.enable_limit_al()
    ref = np.tile(np.concatenate([_goal_through(s, p0, c), np.zeros(3)]), N)
    np.testing.assert_array_equal(s.solve(X0[None], ref[None]).xu, off.solve(X0[None], ref[None]).xu)
    assert np.all(s.get_collision_row_duals()["lam_lo"] == 0)
    assert s.get_row_groups()[g]["mask"].shape == (N,)


def test_margin_elastic_rows_and_exact_replay_state():
    """The generic group calls act on the collision group: set_row_group_bounds moves the margin
    (a 5 cm margin keeps >= 5 cm - 5 mm), sigma > 0 makes the AL rows elastic (the duals saturate
    at sigma), and get_solver_state / set_solver_state carry its duals so a second solver
    continues bit for bit."""
    def make(mech, **kw):
        s = solver()
        s.enable_limit_al() if mech == "al" else s.enable_limit_admm()
        p0, c, obs = _obstacle_setup(s)
        s.set_collision_environment(spheres=obs)
        g = s.enable_collision(mech=mech, **kw)
        return s, g, np.tile(np.concatenate([_goal_through(s, p0, c), np.zeros(3)]), N)[None]

    def plan_min(s, xu):
        return min(s.collision_clearance(xu[0][k * 21:k * 21 + 7])[0].min() for k in range(1, N))

    s, g, ref = make("admm")
    n = s.get_row_groups()[g]["n_rows"]
    s.set_row_group_bounds(g, np.full(n, 0.05), np.full(n, np.inf))
    xu = None
    for _ in range(12):
        xu = s.solve(X0[None], ref, xu).xu
    assert plan_min(s, xu) >= 0.05 - 0.005

    s, g, ref = make("al", sigma=0.05)
    for _ in range(12):
        xu = s.solve(X0[None], ref, xu).xu
    lam = s.get_collision_row_duals()["lam_lo"]
    assert lam.max() == pytest.approx(0.05) and plan_min(s, xu) < 0.0   # elastic: the cap lets it through

    a, g, ref = make("admm")
    xu = None
    for _ in range(3):
        xu = a.solve(X0[None], ref, xu).xu
    b, _, _ = make("admm")
    b.set_solver_state(a.get_solver_state())
    np.testing.assert_array_equal(a.solve(X0[None], ref, xu).xu, b.solve(X0[None], ref, xu).xu)
    np.testing.assert_array_equal(a.get_collision_admm_state()["y"], b.get_collision_admm_state()["y"])


# ------------------------------------------------------------------ closed loop
def _closed_loop(with_rows, T=3.0, tick=0.02):
    """Lockstep MPC on PinocchioWorld (RK4, sim_dt = tick): the EE reference moves at 0.15 m/s
    along +y for 0.4 m, straight through a sphere obstacle (radius 0.06 m) centred 0.2 m along
    the path, then holds. Returns (min clearance over all spheres per step, final EE error)."""
    s = solver(integrator="euler")
    s.enable_limit_admm()
    p0 = s.ee_pos(Q0)
    c = p0 + np.array([0.0, 0.2, 0.0])
    obs = [(*c, 0.06)]
    s.set_collision_environment(spheres=obs)
    if with_rows:
        s.enable_collision()
    world = PinocchioWorld(URDF)
    q, dq = Q0.copy(), np.zeros(7)
    s.hold_warm(np.concatenate([q, dq])[None])
    path = lambda t: p0 + np.array([0.0, min(0.15 * t, 0.4), 0.0])  # noqa: E731
    dmin, t = [], 0.0
    for _ in range(int(round(T / tick))):
        ref = np.concatenate([np.concatenate([path(t + k * DT), np.zeros(3)]) for k in range(N)])
        r = s.solve_warm(np.concatenate([q, dq])[None], ref[None])
        s.shift_warm()
        u = r.xu[0][14:21]
        q, dq = world.step(q, dq, u, tick)
        t += tick
        dmin.append(s.collision_clearance(q)[0].min())
    return np.array(dmin), float(np.linalg.norm(s.ee_pos(q) - path(t))), s


@pytest.mark.slow
def test_closed_loop_the_arm_goes_around_a_sphere_obstacle_on_the_reference_path():
    """With the rows every sphere keeps clearance >= margin - 5 mm at every 20 ms step of the
    simulated run and the EE still reaches the reference's end point (outside the obstacle)
    within 5 cm; without them the arm runs through the obstacle (clearance < -2 cm)."""
    free, _, _ = _closed_loop(False)
    assert free.min() < -0.02
    dmin, err, _ = _closed_loop(True)
    assert dmin.min() >= 0.02 - 0.005, dmin.min()
    assert err < 0.05, err


# ------------------------------------------------------------------ bad input
def test_bad_input_raises_value_errors_naming_the_argument():
    s = solver()
    s.enable_limit_admm()
    with pytest.raises(ValueError, match="enable_collision: no collision environment; call "
                                         "set_collision_environment first"):
        s.enable_collision()
    with pytest.raises(ValueError, match=r"spheres: expected a list of \(x, y, z, radius\) tuples \(4 numbers "
                                         r"each\), got shape \(1, 3\)"):
        s.set_collision_environment(spheres=[(0, 0, 1)])
    with pytest.raises(ValueError, match=r"spheres: contains NaN or Inf \(obstacle 1\)"):
        s.set_collision_environment(spheres=[(0, 0, 1, 0.1), (0, np.nan, 1, 0.1)])
    with pytest.raises(ValueError, match=r"spheres: negative radius \(obstacle 0: -0.1\)"):
        s.set_collision_environment(spheres=[(0, 0, 1, -0.1)])
    with pytest.raises(ValueError, match=r"capsules: negative radius \(obstacle 0: -1.0\)"):
        s.set_collision_environment(capsules=[(0, 0, 1, 0, 0, 2, -1.0)])
    with pytest.raises(ValueError, match=r"cuboids: expected a list of"):
        s.set_collision_environment(cuboids=[(0, 0, 1, 1, 1)])
    with pytest.raises(ValueError, match=r"cuboids: negative half extent \(obstacle 0\)"):
        s.set_collision_environment(cuboids=[(0, 0, 1, 1, -1, 1)])
    with pytest.raises(ValueError, match=r"cuboids: zero orientation quaternion \(obstacle 0\)"):
        s.set_collision_environment(cuboids=[(0, 0, 1, 1, 1, 1, 0, 0, 0, 0)])
    with pytest.raises(ValueError, match=r"planes: zero normal \(obstacle 0\)"):
        s.set_collision_environment(planes=[(0, 0, 0, 1)])
    with pytest.raises(ValueError, match=r"planes: contains NaN or Inf \(obstacle 0\)"):
        s.set_collision_environment(planes=[(0, 0, np.inf, 1)])
    with pytest.raises(ValueError, match="collision_clearance: no collision environment"):
        s.collision_clearance(Q0)
    with pytest.raises(ValueError, match="get_collision_row_duals: no collision group is installed"):
        s.get_collision_row_duals()
    s.set_collision_environment(spheres=[(0.5, 0, 0.5, 0.1)])
    for kw, msg in ((dict(margin=np.nan), "margin: expected a finite number"),
                    (dict(knot_lo=N), r"knot_lo: expected an integer in \[0, 15\]"),
                    (dict(rho=-1.0), "rho: expected a finite number > 0"),
                    (dict(delta=0.0), "delta: expected a finite number > 0"),
                    (dict(sigma=-1.0), "sigma: expected a finite number >= 0"),
                    (dict(admm_iters=-1), "admm_iters: expected an integer >= 0"),
                    (dict(mech="bogus"), "mech: expected None or one of")):
        with pytest.raises(ValueError, match=msg):
            s.enable_collision(**kw)
    with pytest.raises(ValueError, match=r"q: "):
        s.collision_clearance(np.zeros(6))
    s.enable_collision()
    with pytest.raises(ValueError, match="enable_collision: the collision group is already installed"):
        s.enable_collision()
    t = solver()
    t.set_collision_environment(spheres=[(0.5, 0, 0.5, 0.1)])
    with pytest.raises(ValueError, match="enable_collision: no limit mechanism is installed"):
        t.enable_collision()


# ------------------------------------------------------------------ codegen
def test_codegen_writes_the_sphere_set_the_solver_uses(tmp_path, monkeypatch):
    """gato.builder.codegen spherizes at collision_res into spheres.json beside the description
    (registry ``collision`` True) and a BSQP of the registered robot uses exactly that set; a
    coarser collision_res gives fewer spheres; a URDF whose meshes are missing records
    collision False with the reason."""
    from gato import builder

    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path / "cache"))
    meta = builder.codegen(URDF, "arm_c", ee_frame="EE", collision_res=0.3)
    folder = tmp_path / "cache" / "robots" / meta["codegen_key"] / "arm_c"
    sp = spherize.load_spheres(folder / "spheres.json")
    assert meta["collision"] is True and gato.robot_info("arm_c")["collision"] is True
    direct = spherize.spherize(URDF, 0.3)
    np.testing.assert_allclose(sp["radii"], direct["radii"], rtol=1e-12)
    assert sp["links"] == direct["links"] and len(sp["radii"]) < len(spherize.spherize(URDF, 0.15)["radii"])
    s = gato.BSQP(gato.robot_urdf("arm_c"), 1, 8, 0.03, plant_type="arm_c")
    np.testing.assert_allclose(s.collision_spheres["centres"], sp["centres"], rtol=0, atol=0)
    bare = tmp_path / "bare.urdf"
    bare.write_text(Path(URDF).read_text())          # the meshes stay behind
    m2 = builder.codegen(bare, "arm_bare", ee_frame="EE", out_dir=tmp_path / "gen", register=False)
    desc = __import__("json").loads((tmp_path / "gen" / "arm_bare" / "description.json").read_text())
    assert m2["collision"] is False and "not found" in desc["collision_note"]
    assert not (tmp_path / "gen" / "arm_bare" / "spheres.json").exists()
