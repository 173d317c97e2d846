"""The typed classes of the C++ core's plain structs (gato._core.Settings, RowGroupSpec,
AdmmConfig, SolveStats) and its enums: the new path across the binding. Dicts still
convert (the reference's consumers pass them) through the same field table, with a
ValueError naming the struct and the key or field for an unknown key or a bad value."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import gato
from gato import _core
from gato import rowkinds as rk

URDF = str(gato.robot_urdf("iiwa14"))
EE = gato.robot_info("iiwa14")["ee_frame"]


def test_settings_fields_enums_and_dict_round_trip():
    s = _core.Settings(mu=5.0, linsys="bdsv_first", integrator=_core.Integrator.RK4, line_search=1)
    assert s.mu == 5.0 and s.linsys == _core.LinSys.BDSV_FIRST
    assert s.integrator == _core.Integrator.RK4 and s.line_search == _core.LineSearch.FIRST
    d = s.to_dict()
    assert list(d) == list(_core.Settings.fields)
    assert _core.Settings.from_dict(d) == s and _core.Settings(**d) == s
    assert pickle.loads(pickle.dumps(s)) == s
    assert s != _core.Settings()
    s.linsys = "PCG"
    assert s.linsys == _core.LinSys.PCG
    assert "Settings(max_sqp_iters=1" in repr(_core.Settings())


@pytest.mark.parametrize("bad,match", [
    ({"kkt_tol": 1e-3}, r"Settings: unknown key 'kkt_tol' \(fields: max_sqp_iters, "),
    ({"mu": "ten"}, r"Settings: mu: expected a number, got 'ten'"),
    ({"max_sqp_iters": 2.5}, r"Settings: max_sqp_iters: expected an integer, got 2.5"),
    ({"max_sqp_iters": True}, r"Settings: max_sqp_iters: expected an integer, got True"),
    ({"adapt_rho": 1}, r"Settings: adapt_rho: expected a bool, got 1"),
    ({"linsys": "cholesky"}, r"Settings: linsys: expected one of pcg, bdsv, bdsv_first"),
    ({"integrator": 7}, r"Settings: integrator: expected one of euler, semi_implicit, rk4"),
    ({1: 2}, r"Settings: keys must be field names"),
])
def test_settings_dict_errors_name_the_key_or_field(bad, match):
    with pytest.raises(ValueError, match=match):
        _core.Settings.from_dict(bad)
    with pytest.raises(ValueError, match=match):
        _core.Solver64(URDF, EE, 1, 4, 0.03, bad, 1)


def test_attribute_assignment_is_checked_too():
    s = _core.Settings()
    with pytest.raises(ValueError, match="Settings: rho: expected a number"):
        s.rho = "x"
    with pytest.raises(ValueError, match="Settings: linsys: expected one of"):
        s.linsys = "lu"


def test_solver_takes_typed_settings_dicts_or_none_alike():
    typed = _core.Settings(max_sqp_iters=2, u_cost=1e-4, linsys=_core.LinSys.BDSV)
    legacy = {"max_sqp_iters": 2, "u_cost": 1e-4, "linsys": int(_core.LinSys.BDSV)}  # the integer form
    a = _core.Solver64(URDF, EE, 1, 6, 0.03, typed, 1)
    b = _core.Solver64(URDF, EE, 1, 6, 0.03, legacy, 1)
    assert a.settings == b.settings == typed
    assert _core.Solver64(URDF, EE, 1, 6, 0.03).settings == _core.Settings()
    b.set_settings({"mu": 3.0})
    assert b.settings == _core.Settings(mu=3.0)
    b.set_linsys("pcg")
    assert b.settings.linsys == _core.LinSys.PCG
    with pytest.raises(ValueError, match="set_linsys: linsys: expected one of"):
        b.set_linsys("qr")


def test_bsqp_settings_reach_the_core_typed():
    s = gato.BSQP(URDF, 1, 6, 0.03, mu=4.0, line_search="first", integrator="rk4", linsys="pcg")
    st = s._s.settings
    assert isinstance(st, _core.Settings)
    assert (st.mu, st.line_search, st.integrator, st.linsys) == \
        (4.0, _core.LineSearch.FIRST, _core.Integrator.RK4, _core.LinSys.PCG)
    s.set_cost_weights(u_cost=3e-5)
    assert s._s.settings.u_cost == 3e-5
    assert gato.SolverParams(mu=4.0).to_settings(integrator="rk4") == \
        _core.Settings(mu=4.0, integrator="rk4")
    with pytest.raises(ValueError, match="integrator: expected one of"):
        gato.SolverParams().to_settings(integrator="midpoint")


def test_rowkinds_are_the_core_enums():
    assert rk.Q_BOX == int(_core.RowKind.Q_BOX) and rk.LIN_U == int(_core.RowKind.LIN_U)
    assert rk.ADMM == int(_core.RowMech.ADMM)
    assert rk.KIND_NAMES[rk.EE_TERMINAL] == "ee_terminal" and rk.MECH_IDS["al"] == rk.AL
    assert gato.interface.ADMM_LINSYS_MODES == ("pcg", "bdsv_factor")


def box_group(n, **kw):
    return dict(kind="u_box", mech="al", n_rows=n, knot_lo=0, knot_hi=5, lo=[-50.0] * n, hi=[50.0] * n,
                weight=1.0, reset_state=True, **kw)


def test_row_group_specs_typed_and_dict_solve_alike():
    x = np.r_[0.1, 0.5, -0.2, -1.2, 0.3, 0.6, -0.4, np.zeros(7)]
    solvers = []
    for form in ("typed", "dict"):
        s = _core.Solver64(URDF, EE, 1, 6, 0.03, {"max_sqp_iters": 3}, 1)
        g = box_group(s.nu)
        s.set_row_groups([_core.RowGroupSpec(**g)] if form == "typed" else [g])
        solvers.append(s)
    spec = _core.RowGroupSpec(**box_group(7))
    assert spec.kind == _core.RowKind.U_BOX and spec.mech == _core.RowMech.AL and spec.delta == 0.05
    outs = []
    for s in solvers:
        p = np.r_[0.6, 0.0, 0.4, 0.0, 0.0, 0.0]
        xu = np.zeros((1, s.xu_size))
        for k in range(s.N):
            xu[0, k * 21:k * 21 + 14] = x
        s.solve(x[None], np.tile(p, (1, s.N)), xu)
        outs.append((xu, s.stats()))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    st = outs[0][1]
    assert isinstance(st, _core.SolveStats) and st.n_groups == 1
    assert st.row_max_violation.shape == (1, 1) and st.sqp_iters.shape == (1,)
    assert st.pcg_iters.shape == (1, st.iters_run) and len(st.linsys_used) == st.iters_run
    assert all(isinstance(v, _core.LinSys) for v in st.linsys_used)
    assert set(st.profile) == {"kkt_us", "schur_us", "linsys_us", "linesearch_us"}


@pytest.mark.parametrize("bad,match", [
    ({"kind": "torque_box"}, r"RowGroupSpec: kind: expected one of q_box, qd_box, u_box"),
    ({"mech": 9}, r"RowGroupSpec: mech: expected one of telemetry, barrier, admm, al"),
    ({"lo": "abc"}, r"RowGroupSpec: lo: expected a sequence of numbers"),
    ({"rows": 3}, r"RowGroupSpec: unknown key 'rows'"),
])
def test_row_group_dict_errors_name_the_field(bad, match):
    s = _core.Solver64(URDF, EE, 1, 6, 0.03, None, 1)
    with pytest.raises(ValueError, match=match):
        s.set_row_groups([{**box_group(7), **bad}])


def test_admm_config_typed_dict_and_defaults():
    a = _core.AdmmConfig()
    assert (a.iters, a.check_every, a.linsys, a.merit) == (10, 1, _core.AdmmLinSys.BDSV_FACTOR, False)
    s = _core.Solver64(URDF, EE, 1, 6, 0.03, None, 1)
    s.set_admm_config(_core.AdmmConfig(iters=5, linsys="pcg"))
    s.set_admm_config({"iters": 5, "eps_rel": 1e-3})
    with pytest.raises(ValueError, match="AdmmConfig: unknown key 'tol'"):
        s.set_admm_config({"tol": 1e-3})
    b = gato.BSQP(URDF, 1, 6, 0.03)
    b.enable_limit_admm(iters=7, eps_rel=1e-2)
    assert b.admm_iters == 7 and b.admm_linsys == "bdsv_factor"


def test_embedded_mpc_takes_typed_settings_or_a_dict():
    x = np.r_[0.1, 0.5, -0.2, -1.2, 0.3, 0.6, -0.4, np.zeros(7)]
    goal = np.array([[0.55, 0.05, 0.6]])
    plans = []
    for settings in (_core.Settings(max_sqp_iters=2, u_cost=1e-4), {"max_sqp_iters": 2, "u_cost": 1e-4}, {}):
        mpc = _core.EmbeddedMpc(URDF, EE, 8, 0.03, settings, warmup_solves=1)
        assert mpc.step(10**9, x, goal, 10**9, 0.03)
        plans.append(np.array(mpc.xu))
    np.testing.assert_array_equal(plans[0], plans[1])
    assert not np.array_equal(plans[0], plans[2])  # the settings reached the solver
    with pytest.raises(ValueError, match="Settings: unknown key 'horizon'"):
        _core.EmbeddedMpc(URDF, EE, 8, 0.03, {"horizon": 8})
