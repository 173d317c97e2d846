"""Behaviour checklist of the reference API (issue 40), beside the name check (test_status_doc.py).

The reference: ../shared/reference/gato_api_reference.txt ("ref L<n>" = its line n) and
gato_consumer_contract.md ("contract §<n>"). One assertion per documented default and rule:

- ``test_reference_signature_defaults`` / ``test_reference_field_defaults``: every default value
  the reference's signatures and dataclass listings document (parsed from the text when it is on
  this machine), against gato's, one case per (line, name, parameter). A default gato changes on
  purpose is listed in SIGNATURE_DIFFERENCES with gato's value, so neither side can drift.
- the tests below: the rules and behaviours of issue 40's list, one assertion each, not
  depending on the reference file. Where gato deliberately differs
  (docs/reference_differences.md), the test asserts gato's documented behaviour AND that the
  option restoring the reference's works.

Out of this file (owned elsewhere): the exact-Hessian variant (issue 40's second part), the
contact-force ("fc") and floating-base surface (CUDA builds; the audit excluded them).
"""
from __future__ import annotations

import ast
import inspect
import math
import re
from pathlib import Path

import numpy as np
import pytest

import gato
from gato import MPCController, SolverParams

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "reference" / "gato_api_reference.txt"
IIWA = gato.robot_urdf("iiwa14")
DT = 0.03


def solver(N=8, B=1, **kw):
    return gato.BSQP(IIWA, B, N, DT, **kw)


def problem(s, offset=(0.05, 0.0, 0.05)):
    """A hold state at the ready-ish pose and an EE goal `offset` away, (B, nx) and (B, 6N)."""
    q = np.array([0.0, 0.6, 0.0, -1.2, 0.0, 0.9, 0.0])
    x = np.tile(np.r_[q, np.zeros(7)], (s.batch_size, 1))
    ref = np.tile(np.r_[s.ee_pos(q) + np.asarray(offset), 0, 0, 0], (s.batch_size, s.N))
    return x, ref


# ============================================================ documented defaults, parsed
#: Signature defaults gato changes on purpose: (qualified name, parameter) -> gato's default.
#: Each has a row in docs/reference_differences.md ("Arguments accepted but not used").
SIGNATURE_DIFFERENCES = {
    # compile jobs: nothing is compiled per robot on the CPU backend; None = unset, any value raises
    ("gato.builder.build", "jobs"): None,
    ("gato._cache.register_robot", "jobs"): None,
    ("gato._cache.ensure_module", "jobs"): None,
}
#: Class-level values gato changes on purpose (qualified class, attribute) -> the attribute that
#: holds the reference's value (docs/reference_differences.md, "Defaults").
FIELD_DIFFERENCES = {
    ("gato.controller.MPCController", "LIMIT_DEFAULTS"): "LIMIT_DEFAULTS_REFERENCE",
}
#: Reference entries outside this backend: the fc / floating-base surface (CUDA modules). The
#: test lists them so a new one is noticed.
OUT_OF_SCOPE = {"gato.interface.BSQP.fc_slots", "gato.interface.BSQP.add_fc_box", "gato.interface.BSQP.add_fc_cone",
                "gato.interface.BSQP.add_contact_pos_rows", "gato.interface.BSQP.set_fc_ref"}


def _literal(text):
    return ast.literal_eval(text.replace("\u2019", "'").replace("\u2018", "'"))


def _signature_cases():
    """(line, qualified name, parameter, reference default) of every documented signature default."""
    if not REFERENCE.exists():
        return []
    out, cls = [], None
    for i, ln in enumerate(REFERENCE.read_text().splitlines(), 1):
        m = re.match(r"^(class |classmethod )?(gato\.[\w.]+|[a-z_]\w*)\((.*)\)\s*$", ln.strip())
        if not m:
            continue
        kind, name, args = m.groups()
        if kind == "class ":
            cls = name
        qual = name if name.startswith("gato.") else (f"{cls}.{name}" if cls else None)
        try:
            a = ast.parse(f"def f({args.replace(chr(0x2019), chr(39)).replace(chr(0x2018), chr(39))}): pass"
                          ).body[0].args
        except SyntaxError:
            continue  # prose that looks like a call (a docstring example)
        if qual is None:
            continue
        pos = a.posonlyargs + a.args
        pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults))
        pairs += [(k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
        out += [(i, qual, arg.arg, ast.literal_eval(d)) for arg, d in pairs]
    return out


def _field_cases():
    """(line, class, attribute, value) of the reference's `name: type = value` and `NAME = {...}` lines."""
    if not REFERENCE.exists():
        return []
    out, cls = [], None
    for i, ln in enumerate(REFERENCE.read_text().splitlines(), 1):
        s = ln.strip()
        m = re.match(r"^class (gato\.[\w.]+)\(", s)
        if m:
            cls = m.group(1)
            continue
        m = re.match(r"^(\w+): [\w|. \[\]]+ = (.+)$", s) or re.match(r"^([A-Z_]+) = (\{.*\})$", s)
        if m and cls:
            out.append((i, cls, m.group(1), _literal(m.group(2))))
    return out


def _resolve(qual):
    import importlib

    parts = qual.split(".")
    for i in range(len(parts), 0, -1):  # the longest importable module prefix, then attributes
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise AttributeError(qual)


def _same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-12)
    return type(a) is type(b) and a == b if not isinstance(a, (tuple, list)) else a == b


SIGNATURE_CASES = _signature_cases()
FIELD_CASES = _field_cases()
_no_ref = pytest.mark.skipif(not REFERENCE.exists(), reason=f"the reference text is not on this machine ({REFERENCE})")


@_no_ref
def test_the_reference_documents_the_expected_number_of_defaults():
    # the parser reads what the audit counted: a change in it (or in the text) shows up here
    assert len(SIGNATURE_CASES) >= 290 and len(FIELD_CASES) >= 35


@_no_ref
@pytest.mark.parametrize("line,qual,param,ref_default", SIGNATURE_CASES or [(0, "", "", None)],
                         ids=[f"L{c[0]}-{c[1].split('.', 1)[-1]}-{c[2]}" for c in SIGNATURE_CASES] or ["none"])
def test_reference_signature_defaults(line, qual, param, ref_default):
    """ref L<line>: `qual(..., param=ref_default, ...)`: gato's default is the reference's, or the
    documented difference of SIGNATURE_DIFFERENCES."""
    if qual in OUT_OF_SCOPE:
        pytest.skip(f"{qual}: outside the CPU backend's surface (fc / floating base)")
    sig = inspect.signature(_resolve(qual))
    assert param in sig.parameters, f"ref L{line}: {qual} has no parameter {param!r}"
    have = sig.parameters[param].default
    if (qual, param) in SIGNATURE_DIFFERENCES:
        assert not _same(have, ref_default) and have == SIGNATURE_DIFFERENCES[(qual, param)], \
            f"ref L{line}: {qual}({param}=...) is listed as a difference but now reads {have!r}"
    else:
        assert _same(have, ref_default), f"ref L{line}: {qual}({param}={ref_default!r}), gato: {have!r}"


@_no_ref
@pytest.mark.parametrize("line,cls,attr,value", FIELD_CASES or [(0, "", "", None)],
                         ids=[f"L{c[0]}-{c[1].split('.', 1)[-1]}-{c[2]}" for c in FIELD_CASES] or ["none"])
def test_reference_field_defaults(line, cls, attr, value):
    """ref L<line>: `attr: type = value` of a documented dataclass (or a class constant)."""
    import dataclasses

    obj = _resolve(cls)
    if dataclasses.is_dataclass(obj):
        fields = {f.name: f for f in dataclasses.fields(obj)}
        assert attr in fields, f"ref L{line}: {cls} has no field {attr!r}"
        have = fields[attr].default
    else:
        have = getattr(obj, attr)
    if (cls, attr) in FIELD_DIFFERENCES:
        assert have != value and getattr(obj, FIELD_DIFFERENCES[(cls, attr)]) == value, \
            f"ref L{line}: {cls}.{attr}: the reference's value must be kept in {FIELD_DIFFERENCES[(cls, attr)]}"
    else:
        assert _same(have, value), f"ref L{line}: {cls}.{attr} = {value!r}, gato: {have!r}"


# ============================================================ defaults that differ (issue 40)
def test_solver_params_linsys_none_is_bdsv_on_the_cpu_and_pcg_restores_the_reference():
    # ref L553: "None = wired default: pcg fixed-base" (the GPU backend's). gato's CPU default is
    # bdsv (one block-tridiagonal solve costs less than a warm step's PCG iterations:
    # docs/benchmarks.md, "Linear solve on the CPU"); linsys="pcg" is the reference's path.
    s = solver(max_sqp_iters=2)
    assert SolverParams().linsys is None and s.linsys == "bdsv"
    x, ref = problem(s)
    assert s.solve(x, ref).stats.linsys == "bdsv"
    p = solver(linsys="pcg", max_sqp_iters=2)
    r = p.solve(x, ref)
    assert p.linsys == "pcg" and r.stats.linsys == "pcg" and r.stats.pcg_iters.max() > 0


def test_controller_linsys_none_is_bdsv_on_the_cpu_and_auto_restores_the_reference():
    # ref L719: MPCController(linsys=None) resolves "auto" for fixed-base solvers; gato's CPU: "bdsv"
    c = MPCController(solver(), limits="off")
    assert c.linsys == "bdsv" and c.bdsv_threshold is None
    # ref L721: "defaults to 0.1 under auto"
    a = MPCController(solver(), linsys="auto", limits="off")
    assert a.linsys == "auto" and a.bdsv_threshold == 0.1
    # ref L719: "after a PCG cap-out [or a cold step] ... bdsv_first", otherwise "pcg": a step at the
    # state it was reset to is warm (pred_err 0)
    s = a.solver
    x, ref = problem(s)
    a.reset(x[0])
    a.step(x[0], ref[0])
    assert s.linsys == "pcg"


def test_controller_admm_linsys_none_is_bdsv_factor_on_the_cpu_and_auto_restores_the_reference():
    # ref L727: admm_linsys None (default) resolves "auto"; gato's CPU: "bdsv_factor"
    assert MPCController(solver()).admm_linsys == "bdsv_factor"
    c = MPCController(solver(), linsys="auto", admm_linsys="auto")
    # ref L729: admm_threshold "defaults to bdsv_threshold (one signal, two switches)"
    assert c.admm_linsys == "auto" and c.admm_threshold == c.bdsv_threshold == 0.1


def test_raw_solver_admm_linsys_default_is_bdsv_factor_and_pcg_restores_the_reference():
    # ref L213: set_admm_linsys: "pcg" (default) | "bdsv_factor"; gato's CPU default is the factor
    s = solver()
    assert s.admm_linsys == "bdsv_factor"
    s.set_admm_linsys("pcg")
    assert s.admm_linsys == "pcg"  # ref L217: the property reads what is set
    with pytest.raises(ValueError, match="admm_linsys: expected one of"):
        s.set_admm_linsys("bdsv")


def test_limit_defaults_differ_and_the_reference_values_are_one_option_away():
    # ref L735 / contract §4: ADMM limits "per-box rho 0.1 / 0.03 / 1e-5, cap 10"; gato: cap 30,
    # velocity rho 0.1 (issue 22: the reference's values let the RK4 plant overshoot the
    # velocity limit by up to ~5 %, docs/constraints.md)
    d, r = MPCController.LIMIT_DEFAULTS["admm"], MPCController.LIMIT_DEFAULTS_REFERENCE["admm"]
    assert (d["iters"], d["rho_qd"]) == (30, 0.1) and (r["iters"], r["rho_qd"]) == (10, 0.03)
    assert {k: v for k, v in d.items() if k not in ("iters", "rho_qd")} == \
        {k: v for k, v in r.items() if k not in ("iters", "rho_qd")}
    c = MPCController(solver())
    assert c.limits == "admm" and c.solver.admm_iters == 30
    assert [g["rho"] for g in c.solver.get_row_groups()] == pytest.approx([0.1, 0.1, 1e-5])
    ref = MPCController(solver(), limits="admm", limits_kw=MPCController.LIMIT_DEFAULTS_REFERENCE["admm"])
    assert ref.solver.admm_iters == 10 and ref.solver.admm_eps_rel == 0.01
    assert [g["rho"] for g in ref.solver.get_row_groups()] == pytest.approx([0.1, 0.03, 1e-5])


def _collision_solver():
    s = solver()
    s.enable_limit_admm()
    s.set_collision_environment(spheres=[(0.6, 0.0, 0.4, 0.05)])
    return s


@pytest.mark.parametrize("mech,gato_w", [("admm", 10.0), ("al", 100.0)])
def test_enable_collision_weights_differ_and_rho_restores_the_reference(mech, gato_w):
    # ref L423 (add_contact_pos_rows): "Mechanism defaults follow enable_collision (... admm rho
    # 1.0, al rho 1.0)"; gato: ADMM 10 / AL 100, the weights that enforce the clearance here
    # (docs/constraints.md); rho=1.0 is the reference's
    s = _collision_solver()
    g = s.enable_collision(mech=mech)
    assert s.get_row_groups()[g]["rho"] == gato_w
    s = _collision_solver()
    g = s.enable_collision(mech=mech, rho=1.0)
    assert s.get_row_groups()[g]["rho"] == 1.0


def test_sphere_cover_is_coarser_at_the_default_and_collision_res_restores_a_reference_sized_one(tmp_path,
                                                                                                 monkeypatch):
    # ref L1352: "0.15 => ~30-45 spheres on the vendored arms"; gato's spherizer gives 18 on iiwa14
    # at 0.15 (one sphere per slab); register_robot(collision_res=0.07) gives a reference-sized
    # cover that still fits one group (MAX_ROWS_PER_GROUP rows)
    from gato.core.rowgroups import MAX_ROWS_PER_GROUP

    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path))
    s = solver()
    assert 10 <= len(s.collision_spheres["radii"]) <= 18 and s.collision_spheres["res"] == 0.15
    gato.register_robot("iiwa_fine", IIWA, ee_frame="EE", collision_res=0.07)
    fine = gato.BSQP(IIWA, 1, 8, DT, plant_type="iiwa_fine")
    n = len(fine.collision_spheres["radii"])
    assert fine.collision_spheres["res"] == 0.07 and 25 <= n <= MAX_ROWS_PER_GROUP


def test_set_linsys_updates_solver_params():
    # contract §4: "solver.params records configuration fields; setters for those fields update it"
    s = solver()
    assert s.params.linsys is None
    s.set_linsys("pcg")
    assert s.params.linsys == "pcg" and s.linsys == "pcg"
    s.set_cost_weights(q_cost=3.0)  # (ref L455) the other setter of configuration fields
    assert s.params.q_cost == 3.0 and s.params.linsys == "pcg"


def test_solver_params_asdict_keeps_the_reference_fields_first_and_the_extensions_at_reference_values():
    # ref L535: SolverParams has 16 fields through exact_hessian; gato appends u_ref, rot_cost,
    # N_rot_cost and line_search, whose defaults are the reference's behaviour ('zero' control
    # reference, no orientation cost, the 'best' line search)
    ref_fields = ["max_sqp_iters", "max_pcg_iters", "pcg_tol", "solve_ratio", "mu", "rho", "adapt_rho", "linsys",
                  "q_cost", "qd_cost", "u_cost", "N_cost", "q_lim_cost", "vel_lim_cost", "ctrl_lim_cost"]
    d = SolverParams().asdict()
    assert [k for k in d if k in ref_fields] == ref_fields and "exact_hessian" in d
    extra = {k: v for k, v in d.items() if k not in ref_fields + ["exact_hessian"]}
    assert extra == {"u_ref": "zero", "rot_cost": 0.0, "N_rot_cost": 0.0, "line_search": "best"}
    # the reference's 16-field dict round-trips (ref L631: from_mapping; unknown keys are an error)
    ref_only = {k: v for k, v in d.items() if k in ref_fields + ["exact_hessian"]}
    assert SolverParams.from_mapping(ref_only) == SolverParams()
    with pytest.raises(ValueError, match="unknown field"):
        SolverParams.from_mapping({"kkt_tol": 1e-3})  # contract §6: kkt_tol is gone


# ============================================================ arguments never silently ignored
def test_register_robot_uses_or_refuses_every_argument(tmp_path, monkeypatch):
    # ref L1480: register_robot(name, urdf_path, *, N, ee_frame, floating_base, collision_res,
    # contact_frames, variant, build, cache_dir_override, arch, jobs, force)
    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path))
    e = gato.register_robot("arm", IIWA, collision_res=0.05, contact_frames=["EE"])
    assert e["collision_res"] == 0.05 and gato.robot_info("arm")["collision_res"] == 0.05  # used
    assert gato.robot_info("arm")["contact_frames"] == ["EE"]
    for kw, msg in ((dict(contact_frames=["nope"]), "contact_frames: frame 'nope' not found"),
                    (dict(contact_frames="EE"), "contact_frames: expected a list"),
                    (dict(collision_res=0.0), "collision_res: expected None or a sphere spacing"),
                    (dict(arch="90"), "arch: '90' is a CUDA architecture"),
                    (dict(jobs=4), "jobs: 4 parallel compile jobs"),
                    (dict(variant="fc"), "variant: 'fc' modules are CUDA builds"),           # build=False too
                    (dict(variant="fc", build=True), "variant: 'fc' modules are CUDA builds"),
                    (dict(variant="EH"), "variant: expected 'default' or 'eh'")):
        with pytest.raises(ValueError, match=msg):
            gato.register_robot("bad", IIWA, **kw)
    with pytest.raises(TypeError, match="nonsense"):
        gato.register_robot("bad", IIWA, nonsense=1)  # was swallowed by **_ignored
    assert "bad" not in gato._cache.load_manifest()  # nothing registered on bad input


def test_build_uses_build_dir_and_refuses_jobs(tmp_path, monkeypatch):
    # ref L1354: build(..., arch=None, jobs=4, build_dir=None, ...)
    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path / "cache"))
    arm = tmp_path / "arm6.urdf"
    arm.write_bytes(gato.robot_urdf("indy7").read_bytes())
    with pytest.raises(ValueError, match="jobs: 2 parallel compile jobs"):
        gato.build(arm, N=[8], jobs=2)
    with pytest.raises(ValueError, match="build_dir: expected a folder path"):
        gato.build(arm, N=[8], build_dir=3)
    assert gato.build(arm, N=[8], build_dir=tmp_path / "tree") == [("arm6", 8)]
    assert (tmp_path / "tree" / "arm6" / "description.json").is_file()       # used: the generated tree
    assert Path(gato.robot_info("arm6")["urdf"]).parent == tmp_path / "tree" / "arm6"


# ============================================================ the figure protocols
def test_pickplace_min_separation_default_and_zero_gives_the_reference_draws():
    # ref L1150: pickplace_scenarios(model, plant, n, *, seed, n_goals=3, ramps=(0.0, 0.6, 1.2),
    # ee_frame=None, ik_err_max=0.005) draws goals in the box, keeps those IK reaches; gato adds
    # min_separation=0.1 (a goal next to the previous one is no pick-and-place move)
    from gato import tasks
    from gato.sim import scenarios as sc

    model = gato.BSQP(IIWA, 1, 8, DT).model
    sig = inspect.signature(tasks.pickplace_scenarios)
    assert sig.parameters["min_separation"].default == 0.1
    seps = [np.linalg.norm(np.diff(s["goals"], axis=0), axis=1).min()
            for s in tasks.pickplace_scenarios(model, "iiwa14", 4, seed=3)]
    assert min(seps) >= 0.1
    with pytest.raises(ValueError, match="min_separation: expected a finite distance >= 0"):
        tasks.pickplace_scenarios(model, "iiwa14", 1, seed=0, min_separation=-1.0)
    # min_separation=0: the reference's draw, written out here from its documented steps
    got = tasks.pickplace_scenarios(model, "iiwa14", 2, seed=5, n_goals=2, min_separation=0.0)
    rng = np.random.default_rng(5)
    lo, hi = sc.GOAL_BOX["iiwa14"]
    for s in got:
        goals = []
        while len(goals) < 2:
            g = rng.uniform(lo, hi)
            # "reachable by IK from the ready pose within ik_err_max and inside the position limits
            # by Q_MARGIN" (ref L1150; gato's docstring: 100 DLS updates)
            qg, err = tasks.ik_track(model, "EE", sc.Q_READY["iiwa14"], g[None, :], first_iters=100)
            if err[0] <= 0.005 and tasks.within_q_limits(model, qg, tasks.Q_MARGIN):
                goals.append(g)
        q0 = sc.Q_READY["iiwa14"] + rng.uniform(-0.05, 0.05, model.nq)  # "ready with 0.05 rad jitter"
        ramp = (0.0, 0.6, 1.2)[rng.integers(3)]
        np.testing.assert_array_equal(s["goals"], np.array(goals))
        np.testing.assert_array_equal(s["q0"], q0)
        assert s["ramp"] == ramp


class _Fixed:
    """A duck-typed sampler with a fixed (B, 6) batch (world wrenches)."""

    def __init__(self, batch):
        self.batch = np.asarray(batch, dtype=float)
        self.batch_size = len(self.batch)

    def generate_batch(self):
        return self.batch.copy()

    def update(self, best, errors, batch_used=None):
        pass

    def reset(self):
        pass

    def get_stats(self):
        return {}


def test_force_hypothesis_selection_default_and_the_reference_rollout_scorer():
    # ref L847-853: default scorer: x_next_B = solver.sim_forward(x_prev, u_prev, dt);
    # best = argmin_b ||x_next_B[b] - x_meas||. gato's default scores the momentum residual
    # (scorer="momentum"); scorer="rollout" with score_dt=None is the reference's exactly.
    from gato.hypotheses import ForceHypothesisBatch

    batch = [[0, 0, 0, 0, 0, 0], [0, 0, -40.0, 0, 0, 0], [30.0, 0, 0, 0, 0, 0], [0, 25.0, 0, 0, 0, 0]]
    s = gato.BSQP(IIWA, 4, 8, DT)
    x, _ = problem(s)
    x_prev, u_prev = x[0], np.full(7, 0.5)
    # "reality": entry 1's wrench acted over the interval, plus a disturbance along one joint
    h = ForceHypothesisBatch(_Fixed(batch), s.model, "EE", scorer="rollout", score_dt=None)
    assert ForceHypothesisBatch(_Fixed(batch), s.model, "EE").scorer == "momentum"
    h.apply(s, x_prev)
    x_next = np.asarray(s.sim_forward(np.tile(x_prev, (4, 1)), np.tile(u_prev, (4, 1)), DT))
    x_meas = x_next[1] + np.r_[np.zeros(7), 0.01, 0, 0, 0, 0, 0, 0]
    best = h.select(s, None, x_prev, u_prev, x_meas, DT)
    expect = np.linalg.norm(x_next - x_meas, axis=1)
    assert best == int(np.argmin(expect)) and np.allclose(h.last_errors, expect)
    with pytest.raises(ValueError, match="scorer: expected one of"):
        ForceHypothesisBatch(_Fixed(batch), s.model, "EE", scorer="merit")


def test_identified_wrench_batch_select_fits_at_tick_rate_and_tick_fit_false_is_the_reference_noop():
    # ref L907-911: IdentifiedWrenchBatch.select: "No-op: there is only one hypothesis" (the fit
    # runs at sensor rate from the driver); gato fits at tick rate when no sensor sample arrived
    from gato.estimators import OneStepWrenchIdentifier
    from gato.hypotheses import IdentifiedWrenchBatch

    s = solver()
    x, _ = problem(s)
    x_meas = x[0] + np.r_[np.zeros(7), 0.02 * np.ones(7)]
    h = IdentifiedWrenchBatch(OneStepWrenchIdentifier(s.model, "EE"), s.model, "EE")
    assert h.select(s, None, x[0], np.zeros(7), x_meas, DT) == 0 and h.tick_fits == 1
    ref = IdentifiedWrenchBatch(OneStepWrenchIdentifier(s.model, "EE"), s.model, "EE", tick_fit=False)
    assert ref.select(s, None, x[0], np.zeros(7), x_meas, DT) == 0
    assert ref.tick_fits == 0 and ref.identifier.n_updates == 0
    # ref L823: "At batch_size == 1 both hooks are no-ops (select returns 0)"
    assert np.array_equal(ref.last_errors, np.zeros(1))


def test_mpc_gato_observe_first_default_and_false_restores_the_reference():
    # ref L1254: MPC_GATO has no start-pose hold; gato holds the start pose for the first period
    # when the hypotheses identify from the sensor (docs/benchmarks_hypotheses.md)
    m = gato.MPC_GATO(None, IIWA, N=8, batch_size=2, estimator="wid", verbose=False)
    assert m.observes_first()
    off = gato.MPC_GATO(None, IIWA, N=8, batch_size=2, estimator="wid", verbose=False, observe_first=False)
    assert not off.observes_first()
    plain = gato.MPC_GATO(None, IIWA, N=8, verbose=False)  # nothing identifies: the reference's start
    assert not plain.observes_first()


def test_force_estimator_is_none_at_batch_size_one():
    # ref L1262: force_estimator: "The hypothesis estimator (None at batch_size == 1)"
    from gato.estimators import IdentifiedWrenchSampler

    one = gato.MPC_GATO(None, IIWA, N=8, batch_size=1, estimator="wid", verbose=False)
    assert one.force_estimator is None and isinstance(one.wrench_identifier, IdentifiedWrenchSampler)
    four = gato.MPC_GATO(None, IIWA, N=8, batch_size=4, estimator="wid", verbose=False)
    assert isinstance(four.force_estimator, IdentifiedWrenchSampler)


def test_pace_by_solve_time_solve_advances_the_world_by_the_solve_time():
    # ref L1282: "pace_by_solve_time: if True (default, real-time MPC), advance the sim by the
    # measured wall-clock solve time each control step". gato's True advances by the step's wall
    # time (solve + the controller's host work); "solve" is the reference's wording: each period
    # is the previous step's solve time (the clock carries sub-substep remainders)
    m = gato.MPC_GATO(None, IIWA, N=8, verbose=False)
    x = np.r_[np.array([0.0, 0.6, 0.0, -1.2, 0.0, 0.9, 0.0]), np.zeros(7)]
    goal = m.solver.ee_pos(x[:7]) + [0.15, 0.0, 0.0]  # not reached within the timeout
    _, st = m.run_mpc_goals(x, [goal], goal_timeout=0.1, pace_by_solve_time="solve")
    t, solve_s = np.asarray(st["timestamps"]), np.asarray(st["solve_times"]) / 1000.0
    assert st["config"]["pace_by_solve_time"] == "solve" and t.size > 3
    assert abs((t[-1] - t[0]) - solve_s[:-1].sum()) <= 0.001 + 1e-9  # within one sim_dt substep
    _, wall = m.run_mpc_goals(x, [goal], goal_timeout=0.1)  # the default: the step's wall time
    tw, ww = np.asarray(wall["timestamps"]), np.asarray(wall["step_wall_times"]) / 1000.0
    assert abs((tw[-1] - tw[0]) - ww[:-1].sum()) <= 0.001 + 1e-9
    with pytest.raises(ValueError, match="pace_by_solve_time: expected True"):
        m.run_mpc_goals(x, [goal], goal_timeout=0.03, pace_by_solve_time="wall")


def test_pinocchio_world_takes_an_mpc_gato():
    # ref L1174: class gato.worlds.PinocchioWorld(mpc): "Constructed by MPC_GATO itself"
    m = gato.MPC_GATO(None, IIWA, N=8, verbose=False, constant_f_ext=[0, 0, -20.0, 0, 0, 0],
                      pendulum_config={"mass": 1.0, "length": 0.3})
    w = gato.worlds.PinocchioWorld(m)
    assert w.urdf_path == m.model_path and w.ee_frame == m.solver.ee_frame
    assert w.pendulum["mass"] == 1.0 and np.allclose(w.constant_f_ext, [0, 0, -20.0, 0, 0, 0])
    q, dq, u = np.array([0.0, 0.6, 0.0, -1.2, 0.0, 0.9, 0.0]), np.zeros(7), np.full(7, 1.0)
    a = w.step(q, dq, u, 0.001)
    b = m.world.step(q, dq, u, 0.001)
    np.testing.assert_allclose(a[0], b[0], atol=1e-12)
    np.testing.assert_allclose(a[1], b[1], atol=1e-12)
    with pytest.raises(ValueError, match="ee_frame / pendulum / constant_f_ext: PinocchioWorld"):
        gato.worlds.PinocchioWorld(m, pendulum={"mass": 1.0, "length": 0.3})
    with pytest.raises(ValueError, match="urdf_path: expected a URDF path or a gato.MPC_GATO"):
        gato.worlds.PinocchioWorld(3)


# ============================================================ smaller items
def test_soft_al_cone_is_refused_by_both_entries():
    # ref L371: set_row_group_soft: "sigma > 0 makes its rows ELASTIC (AL: the multiplier
    # saturates at sigma ...)". The CPU core's AL cone has no multiplier cap: both entries refuse
    # it (add_lin_u_rows used to accept sigma and ignore it); ADMM cones take it.
    C = np.zeros((3, 7))
    C[0, 0], C[1, 1], C[2, 2] = 1.0, 1.0, 1.0
    s = solver()
    s.enable_limit_al()
    with pytest.raises(ValueError, match="sigma: elastic cones are ADMM-only"):
        s.add_lin_u_rows(C, cone=True, mech="al", sigma=1.0)
    g = s.add_lin_u_rows(C, cone=True, mech="al")
    with pytest.raises(ValueError, match="elastic cones are ADMM-only"):
        s.set_row_group_soft(g, 1.0)
    a = s.add_lin_u_rows(C, cone=True, mech="admm", sigma=1.0)
    assert s.get_row_groups()[a]["sigma"] == 1.0


class _SlowArray:
    """An array whose conversion takes `delay` seconds (a stand-in for a slow input copy)."""

    def __init__(self, a, delay):
        self.a, self.delay = a, delay

    def __array__(self, dtype=None, copy=None):
        import time

        time.sleep(self.delay)
        return np.asarray(self.a, dtype=dtype)


def test_solve_budget_is_measured_from_entry():
    # contract §4: "budget_s ... is measured from entry to the call"; ref L197: "The loop runs the
    # next iteration only while the time spent so far plus that iteration's predicted cost still
    # fits ... the first iteration always runs". An input whose copy takes the whole budget leaves
    # one iteration (the core's clock used to start after the copies).
    s = solver(N=16, max_sqp_iters=20)
    x, ref = problem(s, offset=(0.2, -0.1, 0.1))
    free = s.solve(x, ref, budget_s=10.0)
    assert free.stats.sqp_iters[0] > 1 and not free.stats.budget_hit
    s.reset()
    spent = s.solve(x, _SlowArray(ref, 0.2), budget_s=0.1)
    assert spent.stats.sqp_iters[0] == 1 and spent.stats.budget_hit


def test_ee_frame_id_is_the_frame_and_a_urdf_without_it_is_refused():
    # ref L495: ee_frame_id: "Frame id of the codegen'd EE target frame, or None if the URDF lacks
    # it". gato refuses such a URDF at construction (naming ee_frame), so the id is always a frame's.
    s = solver()
    assert s.ee_frame_id == s.model.getFrameId("EE")
    with pytest.raises(ValueError, match="ee_frame"):
        gato.BSQP(IIWA, 1, 8, DT, ee_frame="no_such_frame")


# ============================================================ documented rules that match
def test_solve_is_stateless_in_the_trajectory_and_never_modifies_the_callers_arrays():
    # ref L197-199 / contract §4: xu_warm=None seeds a hold at xcur_B (a cold start); the caller's
    # array is never modified; SolveResult.xu is a fresh array
    s = solver(max_sqp_iters=2)
    x, ref = problem(s)
    a = s.solve(x, ref)
    warm = np.array(a.xu)
    keep = warm.copy()
    b = s.solve(x, ref, warm)
    assert np.array_equal(warm, keep) and b.xu is not warm
    s.reset()
    c = s.solve(x, ref)  # None: a hold again, not the previous solution
    np.testing.assert_array_equal(c.xu, a.xu)


def test_trajectory_layout_and_result_helpers():
    # ref L113 / contract §4: xu row length N*(nx+nu) - nu = [x_0, u_0, x_1, ..., x_{N-1}];
    # ref L165: u0 = first actuated control; ref L169: control_at clamps to the last control knot
    s = solver(B=2)
    x, ref = problem(s)
    r = s.solve(x, ref)
    N, nx, nu = s.N, s.nx, s.nu
    assert r.xu.shape == (2, N * (nx + nu) - nu) and r.batch_size == 2
    np.testing.assert_array_equal(r.u0(1), r.xu[1, nx:nx + nu])
    np.testing.assert_array_equal(r.control_at(100, 0), r.control_at(N - 2, 0))
    assert r.n_fc == 0 and r.fc_at(0).shape == (0,)  # ref L173: empty on non-contact-force builds
    assert r.diverged.shape == (2,) and not r.diverged.any()  # ref L181


def test_module_name_available_and_robot_info_rules():
    # ref L9: bsqpN{N}_{plant}[_{variant}]
    assert gato.module_name("iiwa14", 32) == "bsqpN32_iiwa14" and gato.module_name("iiwa14", 32, "eh") == \
        "bsqpN32_iiwa14_eh"
    # ref L13: available("default") -> {(plant, N): filename}; "all" -> {(plant, N, variant): filename}
    assert ("iiwa14", 32) in gato.available() and ("iiwa14", 32, "default") in gato.available("all")
    assert gato.available("fc") == {}  # the contact-force variant is a CUDA build
    # ref L17-19: robot_info: {nq, nv, ee_frame, urdf, floating_base, contact_frames, collision,
    # codegen_key}, or {} if unregistered
    info = gato.robot_info("iiwa14")
    assert {"nq", "nv", "ee_frame", "urdf", "floating_base", "contact_frames", "collision", "codegen_key"} <= set(info)
    assert gato.robot_info("no_such_robot") == {}


def test_row_group_order_rule():
    # contract §4: "enable_limit_* before any appended group ... or it raises"
    s = solver()
    with pytest.raises(ValueError, match="no limit mechanism is installed"):
        s.add_lin_u_rows(np.eye(7)[:1])
    s.enable_limit_telemetry()
    assert s.row_mech == "telemetry"  # ref L305: row_mech names the mechanism


def test_limits_are_the_urdf_limits_shrunk_by_the_margin():
    # contract §2: "the baked barrier limits are the URDF limits SHRUNK by 0.1 rad on each side
    # (position AND torque tables)"
    s = solver()
    s.enable_limit_telemetry()
    lim = s.limits
    pos, vel, tau = s.get_row_groups()[:3]
    np.testing.assert_allclose(pos["lo"], lim["q_lo"] + 0.1)
    np.testing.assert_allclose(pos["hi"], lim["q_hi"] - 0.1)
    np.testing.assert_allclose(tau["hi"], lim["u"] - 0.1)


def test_controller_limit_rules():
    # ref L731: limits None: a fixed-base arm without row groups gets "admm"; a solver the caller
    # configured is left as configured; "off" installs nothing
    assert MPCController(solver()).limits == "admm"
    s = solver()
    s.enable_limit_barrier()
    assert MPCController(s).limits == "barrier"
    assert MPCController(solver(), limits="off").limits is None
    with pytest.raises(ValueError, match="limits_kw: given, but limits='off'"):
        MPCController(solver(), limits="off", limits_kw={"iters": 5})


def test_controller_step_contract():
    # contract §4: StepResult.u is the ACTUATED control; StepResult.limits reads "admm";
    # row_viol the winner's violation per row group; budget_s None: max_sqp_iters iterations
    s = solver(max_sqp_iters=3)
    c = MPCController(s)
    x, ref = problem(s)
    c.reset(x[0])
    r = c.step(x[0], ref[0])
    assert r.u.shape == (s.n_actuated,) and np.all(np.isfinite(r.u))
    assert r.limits == "admm" and r.row_viol.shape == (3,)
    assert r.iterations <= 3 and not r.budget_hit
    assert c.warm_start == "shift" and c.reset_rho_each_step  # ref L715 / L717 defaults


def test_hypothesis_batch_of_one_is_a_plain_mpc():
    # ref L823: "At batch_size == 1 both hooks are no-ops (select returns 0)"
    from gato.estimators import ForceEstimator
    from gato.hypotheses import ForceHypothesisBatch

    s = solver()
    h = ForceHypothesisBatch(ForceEstimator(1), s.model, "EE")
    x, _ = problem(s)
    h.apply(s, x[0])
    assert h.select(s, None, x[0], np.zeros(7), x[0], DT) == 0


def test_solver_toggles_default_off_or_on_as_documented():
    s = solver(max_sqp_iters=2)
    x, ref = problem(s)
    # ref L245: set_collect_stats: "On by default": the per-iteration arrays are filled
    assert s.solve(x, ref).stats.step_size.shape[1] >= 1
    s.set_collect_stats(False)
    assert s.solve(x, ref).stats.step_size.shape == (1, 0)
    assert np.array_equal(s.get_admm_rho_scale(), np.ones(1))  # ref L385: rho adaptation "default OFF"
    # ref L225: set_admm_exit(eps_abs=0.0, eps_rel=0.0, check_every=1): the exit is off by default
    assert (s.admm_eps_abs, s.admm_eps_rel, s.admm_check_every) == (0.0, 0.0, 1)
    # ref L259: exact_hessian_available(): the CPU core runs the 'eh' variant (test/test_exact_hessian.py)
    assert s.exact_hessian_available() is True and s.params.exact_hessian is False  # GN by default


def test_references_window_and_done_rules():
    # ref L777-781: TrajectoryReference: the last valid window starts at knot size // 6 - N,
    # done fires one knot after that
    from gato import GoalReference, TrajectoryReference

    T, N, dt = 20, 8, 0.1
    traj = np.zeros(6 * T)
    traj[0::6] = np.arange(T)
    r = TrajectoryReference(traj, dt, N)
    last = T - N
    assert r.window(last * dt)[0] == last and r.window(1e3)[0] == last  # clamped
    assert not r.done(last * dt) and r.done((last + 1) * dt)
    g = GoalReference([0.5, 0.0, 0.4], N)  # ref L785: constant window over the horizon
    assert np.array_equal(g.window(0.0), np.tile([0.5, 0.0, 0.4, 0, 0, 0], N)) and not g.done(1e6)
