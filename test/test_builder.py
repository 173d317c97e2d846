"""gato.builder: the registry view and URDF inertial normalization (pure Python; no compile)."""
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest

import gato
from gato import builder


def _rotate_inertials(src, dst, seed=0):
    """A copy of ``src`` whose every inertia is expressed in a random rotated frame: the same
    rigid bodies (I_local = R^T I_link R with R the new origin rpy), so dynamics are unchanged."""
    rng = np.random.default_rng(seed)
    tree = ET.parse(src)
    names = []
    for link in tree.getroot().iter("link"):
        inertial = link.find("inertial")
        if inertial is None:
            continue
        origin, inertia = inertial.find("origin"), inertial.find("inertia")
        assert origin.get("rpy", "0 0 0").split() == ["0", "0", "0"]  # the source is canonical
        rpy = rng.uniform(-np.pi, np.pi, 3)
        keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
        ixx, ixy, ixz, iyy, iyz, izz = (float(inertia.get(k)) for k in keys)
        i_link = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        rot = builder.rpy_matrix(rpy)
        i_local = rot.T @ i_link @ rot
        for k, (a, b) in zip(keys, ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))):
            inertia.set(k, repr(float(i_local[a, b])))
        origin.set("rpy", " ".join(repr(float(v)) for v in rpy))
        names.append(link.get("name"))
    tree.write(dst)
    return names


def _dynamics(urdf, seed=1, n=20):
    """RNEA torques and ABA accelerations at seeded random states, (n, nv) each."""
    model = pin.buildModelFromUrdf(str(urdf))
    data = model.createData()
    rng = np.random.default_rng(seed)
    tau, qdd = [], []
    for _ in range(n):
        q = rng.uniform(-np.pi, np.pi, model.nq)   # revolute joints (nq == nv); seeded, unlike pin's
        v, a, u = (rng.standard_normal(model.nv) for _ in range(3))
        tau.append(pin.rnea(model, data, q, v, a).copy())
        qdd.append(pin.aba(model, data, q, v, 10 * u).copy())
    return np.array(tau), np.array(qdd)


def test_canonicalize_inertials_keeps_the_dynamics_to_machine_precision(tmp_path):
    original = gato.robot_urdf("iiwa14")
    rotated = tmp_path / "iiwa14_rotated.urdf"
    names = _rotate_inertials(original, rotated)
    assert len(names) >= 7
    assert builder.rotated_inertial_origins(original) == []
    assert builder.rotated_inertial_origins(rotated) == names
    tau0, qdd0 = _dynamics(original)
    tau_r, qdd_r = _dynamics(rotated)
    np.testing.assert_allclose(tau_r, tau0, rtol=0, atol=1e-11)   # the rotated copy is the same robot
    np.testing.assert_allclose(qdd_r, qdd0, rtol=0, atol=1e-9)

    canon = tmp_path / "iiwa14_canon.urdf"
    assert builder.canonicalize_inertials(rotated, canon) == names
    assert builder.rotated_inertial_origins(canon) == []
    tau_c, qdd_c = _dynamics(canon)
    scale_tau, scale_qdd = np.abs(tau_r).max(), np.abs(qdd_r).max()
    assert np.abs(tau_c - tau_r).max() <= 1e-13 * scale_tau
    assert np.abs(qdd_c - qdd_r).max() <= 1e-12 * scale_qdd
    # masses, centres of mass and the link-frame inertias of the original come back
    m0, mc = pin.buildModelFromUrdf(str(original)), pin.buildModelFromUrdf(str(canon))
    for i0, ic in zip(m0.inertias, mc.inertias):
        assert ic.mass == i0.mass
        np.testing.assert_array_equal(ic.lever, i0.lever)
        np.testing.assert_allclose(ic.inertia, i0.inertia, rtol=0, atol=1e-15)
    # the rest of the file is untouched: same joints, limits and EE frame
    assert [j for j in mc.names] == [j for j in m0.names]
    np.testing.assert_array_equal(mc.effortLimit, m0.effortLimit)
    assert mc.existFrame("EE")


def test_canonicalize_in_place_and_a_canonical_urdf_is_a_copy(tmp_path):
    original = gato.robot_urdf("iiwa14")
    copy = tmp_path / "copy.urdf"
    assert builder.canonicalize_inertials(original, copy) == []
    tau0, _ = _dynamics(original, n=3)
    np.testing.assert_array_equal(_dynamics(copy, n=3)[0], tau0)
    rotated = tmp_path / "r.urdf"
    names = _rotate_inertials(original, rotated, seed=3)
    assert builder.canonicalize_inertials(rotated, rotated) == names   # out_path == urdf_path
    assert builder.rotated_inertial_origins(rotated) == []
    np.testing.assert_allclose(_dynamics(rotated, n=3)[0], tau0, rtol=0, atol=1e-11)


def test_bad_urdf_input_names_the_path(tmp_path):
    missing = tmp_path / "none.urdf"
    with pytest.raises(FileNotFoundError, match="urdf_path: file not found: .*none.urdf"):
        builder.rotated_inertial_origins(missing)
    with pytest.raises(FileNotFoundError, match="none.urdf"):
        builder.canonicalize_inertials(missing, tmp_path / "out.urdf")
    junk = tmp_path / "junk.urdf"
    junk.write_text("this is not xml <")
    with pytest.raises(ValueError, match="urdf_path: .*junk.urdf is not well-formed XML"):
        builder.rotated_inertial_origins(junk)
    sdf = tmp_path / "model.sdf"
    sdf.write_text("<sdf version='1.6'><model name='m'/></sdf>")
    with pytest.raises(ValueError, match=r"model.sdf is not a URDF \(root element <sdf>"):
        builder.canonicalize_inertials(sdf, tmp_path / "out.urdf")
    bad_rpy = tmp_path / "bad_rpy.urdf"
    bad_rpy.write_text("<robot name='r'><link name='a'><inertial><origin rpy='0 x 0'/><mass value='1'/>"
                       "<inertia ixx='1' ixy='0' ixz='0' iyy='1' iyz='0' izz='1'/></inertial></link></robot>")
    with pytest.raises(ValueError, match="link 'a' inertial origin rpy='0 x 0' is not 3 finite numbers"):
        builder.rotated_inertial_origins(bad_rpy)
    with pytest.raises(FileNotFoundError, match="out_path: folder not found"):
        builder.canonicalize_inertials(gato.robot_urdf("iiwa14"), tmp_path / "no" / "such" / "out.urdf")
    assert not (tmp_path / "out.urdf").exists()


def test_repo_root_and_load_registry(tmp_path, monkeypatch):
    root = builder.repo_root()
    assert (root / "src" / "gato_core" / "CMakeLists.txt").is_file()
    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path))
    reg = builder.load_registry()
    assert {"iiwa14", "indy7"} <= set(reg)
    assert reg["iiwa14"]["nq"] == 7 and reg["iiwa14"]["ee_frame"] == "EE" and reg["iiwa14"]["urdf"] == "iiwa14.urdf"
    reg["iiwa14"]["nq"] = 99                                       # a copy: the registry is unchanged
    assert builder.load_registry()["iiwa14"]["nq"] == 7
    gato.register_robot("my_arm", gato.robot_urdf("indy7"), ee_frame="EE")
    assert builder.load_registry()["my_arm"]["nv"] == 6           # registered robots are listed


def test_codegen_writes_the_description_and_registers_the_robot(tmp_path, monkeypatch):
    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path / "cache"))
    rotated = tmp_path / "arm.urdf"
    names = _rotate_inertials(gato.robot_urdf("iiwa14"), rotated, seed=5)
    meta = builder.codegen(rotated, "my_arm", ee_frame="EE")
    folder = tmp_path / "cache" / "robots" / meta["codegen_key"] / "my_arm"
    assert meta["urdf_path"] == str(folder / "my_arm.urdf") and meta["nq"] == 7
    desc = __import__("json").loads((folder / "description.json").read_text())
    assert desc["canonicalized_links"] == names and desc["contact_frames"] == ["EE"]
    ref = pin.buildModelFromUrdf(str(gato.robot_urdf("iiwa14")))
    np.testing.assert_array_equal(desc["q_max"], ref.upperPositionLimit)
    np.testing.assert_array_equal(desc["tau_max"], ref.effortLimit)
    assert builder.rotated_inertial_origins(folder / "my_arm.urdf") == []
    # registered: BSQP by name, on the generated (canonical) URDF, same plans as iiwa14's
    assert gato.robot_info("my_arm")["codegen_key"] == meta["codegen_key"]
    s = gato.BSQP(gato.robot_urdf("my_arm"), 1, 8, 0.03, plant_type="my_arm", max_sqp_iters=2)
    s0 = gato.BSQP(gato.robot_urdf("iiwa14"), 1, 8, 0.03, max_sqp_iters=2)
    x = np.r_[0.1 * np.ones(7), np.zeros(7)][None]
    ref_ee = np.tile(np.r_[s0.ee_pos(x[0, :7]) + [0.05, 0, 0], 0, 0, 0], (1, 8))
    np.testing.assert_allclose(s.solve(x, ref_ee).xu, s0.solve(x, ref_ee).xu, rtol=0, atol=1e-9)
    # same inputs -> same key and folder; another option -> another key
    assert builder.codegen(rotated, "my_arm", ee_frame="EE")["codegen_key"] == meta["codegen_key"]
    other = builder.codegen(rotated, "my_arm", ee_frame="A7", out_dir=tmp_path / "gen", register=False)
    assert other["codegen_key"] != meta["codegen_key"] and (tmp_path / "gen" / "my_arm" / "my_arm.urdf").is_file()
    assert gato.robot_info("my_arm")["ee_frame"] == "EE"            # register=False left the manifest alone


def test_codegen_and_build_reject_bad_input(tmp_path, monkeypatch):
    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path / "cache"))
    urdf = gato.robot_urdf("iiwa14")
    for kwargs, msg in ((dict(ee_frame="nope"), "ee_frame: frame 'nope' not found"),
                        (dict(contact_frames=["EE", "x"]), "contact_frames: frame 'x' not found"),
                        (dict(floating_base=True), "floating_base: the CPU backend"),
                        (dict(algorithm_list=["aba"]), "algorithm_list: the CPU backend"),
                        (dict(collision_res=-1.0), "collision_res: expected None or a sphere spacing")):
        with pytest.raises(ValueError, match=msg):
            builder.codegen(urdf, "arm", **kwargs)
    with pytest.raises(ValueError, match="name: expected an identifier"):
        builder.codegen(urdf, "my arm")
    with pytest.raises(FileNotFoundError, match="none.urdf"):
        builder.codegen(tmp_path / "none.urdf", "arm")
    for kwargs, msg in ((dict(N=[8, 1]), "N: expected an integer >= 2"), (dict(arch="90"), "arch: '90'"),
                        (dict(contact_forces=True), "contact_forces: the 'fc' variant is a CUDA build"),
                        (dict(exact_hessian="yes"), "exact_hessian: expected True or False")):
        with pytest.raises(ValueError, match=msg):
            gato.build(urdf, **kwargs)
    assert not (tmp_path / "cache" / "manifest.json").exists()        # nothing registered on bad input


def test_build_makes_the_robot_usable_by_name(tmp_path, monkeypatch):
    from gato import _cache

    monkeypatch.setenv("GATO_CACHE_DIR", str(tmp_path / "cache"))
    arm = tmp_path / "panda_like.urdf"
    arm.write_bytes(gato.robot_urdf("indy7").read_bytes())
    assert gato.build(arm, N=[8, 16]) == [("panda_like", 8), ("panda_like", 16)]
    assert set(_cache.available_cached()) == {("panda_like", 8, "default"), ("panda_like", 16, "default")}
    s = gato.BSQP(gato.robot_urdf("panda_like"), 2, 16, 0.03, plant_type="panda_like")
    assert s.nq == 6 and s.plant_type == "panda_like"
