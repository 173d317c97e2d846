"""gato.fingerprint: the committed table, the checker, and the solver self-check.

The table pins pinocchio aba at seeded probes; these tests check that it is
exactly what tools/make_fingerprint.py produces from the pinned URDFs, that the
checker passes the same model and the solver, and that it names the kind of
mismatch the consumer contract says it names (inertia vs damping).
"""
import json

import numpy as np
import pytest

import gato
import gato.fingerprint as fp
import gato.floating  # noqa: F401  (gato.floating.FloatingPlant)
from gato.robots import sha256_file
from gato.tools import make_fingerprint as mk

pin = pytest.importorskip("pinocchio")

PLANTS = ("iiwa14", "indy7", "fr3", "gen3", "ur5e", "go2")  # go2: floating base (issue 34)
GO2_FEET = ["FL_foot_joint", "FR_foot_joint", "RL_foot_joint", "RR_foot_joint"]


def pin_model(plant):
    urdf = str(gato.robot_urdf(plant))
    if gato.robot_info(plant).get("floating_base"):
        return pin.buildModelFromUrdf(urdf, pin.JointModelFreeFlyer())
    return pin.buildModelFromUrdf(urdf)


def aba_fn(plant, armature=None, damping=None):
    """qdd_fn of pinocchio aba on the plant's URDF, optionally with extra armature / viscous damping."""
    model = pin_model(plant)
    if armature is not None:
        model.armature = np.asarray(model.armature) + np.asarray(armature)
    data = model.createData()
    D = np.zeros(model.nv) if damping is None else np.asarray(damping, dtype=float)

    def qdd(q, qd, u):
        return pin.aba(model, data, q, qd, u - D * qd)

    return qdd


def test_table_schema_probes_and_urdf_pins():
    table = fp.load()
    assert table["schema"] == 2
    assert tuple(table["plants"]) == PLANTS
    for plant, e in table["plants"].items():
        urdf = gato.robot_urdf(plant)
        assert e["urdf_sha256"] == sha256_file(urdf) == gato.robot_info(plant)["urdf_sha256"]
        model = pin_model(plant)
        nb = 6 if e["floating_base"] else 0          # the base's unactuated rows (zero in every u)
        assert e["floating_base"] == (plant == "go2")
        assert (e["nq"], e["nv"]) == (model.nq, model.nv)
        assert e["joints"] == list(model.names)[1 + (nb > 0):]
        kinds = [p["kind"] for p in e["probes"]]
        assert kinds.count("gravity") == 4 and kinds.count("coriolis") == 3
        assert kinds.count("inertia_j") == e["nv"] - nb
        for p in e["probes"]:
            q, qd, u = (np.asarray(p[k]) for k in ("q", "qd", "u"))
            assert q.shape == (e["nq"],) and qd.shape == u.shape == (e["nv"],) == np.shape(p["qdd"])
            assert np.all(q > model.lowerPositionLimit) and np.all(q < model.upperPositionLimit)
            assert not u[:nb].any()
            if nb:
                assert abs(np.linalg.norm(q[3:7]) - 1.0) < 1e-8   # schema 2: quaternion xyzw
            if p["kind"] in ("gravity", "inertia_j"):
                assert not qd.any()
            if p["kind"] == "gravity":
                assert not u.any()
            if p["kind"] == "coriolis":
                assert np.all(qd != 0)
            if p["kind"] == "inertia_j":
                j = p["joint"]
                assert np.flatnonzero(u).tolist() == [j] and u[j] == p["torque"] > 0
                np.testing.assert_array_equal(np.asarray(p["qdd"]) - p["qdd_gravity"], p["response"])
                # ~10 rad/s^2 on the driven joint by construction (torque = 10 M_jj, 3 significant figures)
                assert 1.0 < p["response"][j] < 100.0


def test_table_regenerates_exactly_from_the_urdfs():
    fresh = mk.build_table(PLANTS)
    assert mk._max_rel_diff(fp.load(), fresh) <= 1e-12


def test_pinocchio_aba_passes_at_machine_precision():
    for plant in PLANTS:
        res = fp.check(aba_fn(plant), plant)
        assert res["ok"], fp.report(res)
        assert res["max_rel_err"] < 1e-12
        nb = 6 if plant == "go2" else 0
        assert np.all(np.isnan(res["inertia_ratio"][:nb]))
        np.testing.assert_allclose(res["inertia_ratio"][nb:], 1.0, atol=1e-12)


def test_the_cores_floating_plant_passes_the_go2_fingerprint():
    """gato.floating.FloatingPlant (the floating SQP's dynamics): u's base rows are zero at every
    probe, so its actuated aba takes u[6:]; measured max relative error 0.0 (the same pinocchio aba)."""
    plant = gato.floating.FloatingPlant(str(gato.robot_urdf("go2")), GO2_FEET)

    def qdd(q, qd, u):
        assert not np.any(u[:6])
        return plant.aba(q, qd, u[6:])

    res = fp.check(qdd, "go2")
    assert res["ok"] and res["max_rel_err"] < 1e-12, fp.report(res)
    assert "disagree" not in fp.report(res)                          # the base rows (no probe) are not named
    heavy = fp.check(lambda q, qd, u: 0.8 * qdd(q, qd, u), "go2")   # a 25 % heavier robot is named
    assert not heavy["ok"] and np.allclose(heavy["inertia_ratio"][6:], 0.8)
    assert "joints [6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17] disagree" in fp.report(heavy)


def test_the_floating_mujoco_world_passes_the_go2_fingerprint():
    """MuJoCoWorld(floating=True), contact-free: its qdd in pinocchio's free-flyer convention passes the
    go2 table, moving-base (coriolis) probes included (measured 2.5e-13; 3.2e-4 before the base rows'
    w x v term)."""
    from gato.worlds import MuJoCoWorld

    world = MuJoCoWorld(str(gato.robot_urdf("go2")), floating=True, ground=False)
    res = fp.check(world.qdd, "go2")
    assert res["ok"] and res["max_rel_err"] < 1e-10, fp.report(res)


@pytest.mark.parametrize("plant", ["iiwa14", "indy7"])
def test_check_solver_passes_bsqp(plant):
    url = str(gato.robot_urdf(plant))
    res = fp.check_solver(gato.BSQP(url, 2, 8, 0.01))
    assert res["ok"] and res["urdf_sha256_ok"], fp.report(res)
    assert res["max_rel_err"] < 1e-12  # euler: (v' - v)/h recovers the solver's aba exactly
    res32 = fp.check_solver(gato.BSQP(url, 1, 8, 0.01, dtype=np.float32))
    assert res32["ok"] and res32["max_rel_err"] < 5e-6  # float32 rounding (measured 5e-7)
    res_rk4 = fp.check_solver(gato.BSQP(url, 1, 8, 0.01, integrator="rk4"))
    assert res_rk4["ok"] and res_rk4["max_rel_err"] < 1e-7  # two Richardson levels (measured 2e-9)
    assert "URDF sha256 matches" in fp.report(res)


def test_solver_qdd_fn_equals_aba_off_the_probes():
    plant = "iiwa14"
    solver = gato.BSQP(str(gato.robot_urdf(plant)), 3, 8, 0.01, integrator="semi_implicit")
    f, ref = fp.solver_qdd_fn(solver), aba_fn(plant)
    rng = np.random.default_rng(7)
    for _ in range(3):
        q, qd, u = rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 7), rng.uniform(-20, 20, 7)
        np.testing.assert_allclose(f(q, qd, u), ref(q, qd, u), rtol=1e-12, atol=1e-10)


def test_check_names_an_inertia_mismatch_on_one_joint():
    # 0.01 kg m^2 of armature on iiwa14 joint 7 (rotor inertia a URDF does not carry)
    res = fp.check(aba_fn("iiwa14", armature=[0, 0, 0, 0, 0, 0, 0.01]), "iiwa14")
    ratio = res["inertia_ratio"]
    assert not res["ok"]
    assert ratio[6] < 0.5  # joint 7 responds at less than half the reference acceleration
    np.testing.assert_allclose(ratio[:6], 1.0, atol=0.02)  # the other joints barely move
    assert int(np.argmax(np.abs(ratio - 1.0))) == 6
    assert "MISMATCH" in fp.report(res) and "joints [6]" in fp.report(res)


def test_damping_mismatch_shows_only_on_the_coriolis_probes():
    res = fp.check(aba_fn("indy7", damping=np.full(6, 2.0)), "indy7")
    assert not res["ok"]
    np.testing.assert_allclose(res["inertia_ratio"], 1.0, atol=1e-12)  # qd = 0: damping-immune
    for r in res["probes"]:
        assert r["ok"] == (r["kind"] != "coriolis"), (r["name"], r["rel_err"])


def test_check_input_errors(tmp_path):
    with pytest.raises(ValueError, match="plant"):
        fp.check(aba_fn("iiwa14"), "no_such_plant")
    with pytest.raises(ValueError, match="qdd_fn"):
        fp.check(lambda q, qd, u: np.zeros(3), "iiwa14")
    with pytest.raises(ValueError, match="rtol"):
        fp.check(aba_fn("iiwa14"), "iiwa14", rtol=0)
    bad = tmp_path / "old.json"
    bad.write_text(json.dumps({"schema": 1, "plants": {}}))
    with pytest.raises(ValueError, match="schema-2"):
        fp.load(bad)


def test_solver_qdd_fn_shape_and_gravity_sign():
    f = fp.solver_qdd_fn(gato.BSQP(str(gato.robot_urdf("indy7")), 1, 8, 0.01))
    a = f(np.zeros(6), np.zeros(6), np.zeros(6))
    assert a.shape == (6,) and a.dtype == np.float64
    np.testing.assert_allclose(a, aba_fn("indy7")(np.zeros(6), np.zeros(6), np.zeros(6)), rtol=1e-12, atol=1e-12)


def _table_without_kinds(tmp_path, rename=None):
    t = fp.load()
    for pr in t["plants"]["iiwa14"]["probes"]:
        del pr["kind"]
        if rename and pr["name"] == rename[0]:
            pr["name"] = rename[1]
    path = tmp_path / "nokind.json"
    path.write_text(json.dumps(t))
    return path


def test_probes_without_kind_take_it_from_their_names(tmp_path):
    """A table whose probes carry no 'kind' (an older or hand-written file) is read by the probe
    name prefix: the same result as the full table, kind for kind."""
    path = _table_without_kinds(tmp_path)
    full = fp.check(aba_fn("iiwa14"), "iiwa14")
    res = fp.check(aba_fn("iiwa14"), "iiwa14", path=path)
    assert res["ok"] and [r["kind"] for r in res["probes"]] == [r["kind"] for r in full["probes"]]
    assert {r["kind"] for r in res["probes"]} == {"gravity", "inertia_j", "coriolis"}
    np.testing.assert_array_equal(res["inertia_ratio"], full["inertia_ratio"])
    bad = fp.check(aba_fn("iiwa14", armature=[0, 0, 0, 0.5, 0, 0, 0]), "iiwa14", path=path)
    assert not bad["ok"] and "inertia_j" in fp.report(bad)


def test_probe_without_kind_or_telling_name_is_refused(tmp_path):
    path = _table_without_kinds(tmp_path, rename=("inertia_3", "probe_7"))
    with pytest.raises(ValueError, match=r"plant 'iiwa14', probe 7 \('probe_7'\): has no 'kind' field and its "
                                         r"name does not say it .* add \"kind\": one of"):
        fp.check(aba_fn("iiwa14"), "iiwa14", path=path)
    t = fp.load()
    del t["plants"]["iiwa14"]["probes"][4]["response"]
    (tmp_path / "noresp.json").write_text(json.dumps(t))
    with pytest.raises(ValueError, match=r"'inertia_0'\): a inertia_j probe needs the field\(s\) \['response'\]"):
        fp.check(aba_fn("iiwa14"), "iiwa14", path=tmp_path / "noresp.json")
    t = fp.load()
    t["plants"]["iiwa14"]["probes"][0]["kind"] = "wobble"
    (tmp_path / "badkind.json").write_text(json.dumps(t))
    with pytest.raises(ValueError, match=r"'gravity_0'\): unknown kind 'wobble'"):
        fp.check(aba_fn("iiwa14"), "iiwa14", path=tmp_path / "badkind.json")
