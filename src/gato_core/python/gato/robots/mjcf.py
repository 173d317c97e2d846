"""A URDF as a MuJoCo model (``MjSpec``) whose contact-free dynamics are pinocchio's.

MuJoCo details this module encodes:

- a URDF's ``<mujoco><compiler meshdir=...>`` block may point at a directory
  that does not exist; mesh files are resolved against the URDF's own folder
  (then that meshdir, then ``package://`` roots above it) and written back as
  absolute paths with ``spec.meshdir = ""``;
- MuJoCo does not filter contacts between a world-welded base and its child
  link (the parent filter skips the world body): intersecting base/link-1
  meshes give phantom self-contacts that corrupt the dynamics. Robot geoms get
  contype=1/conaffinity=2 and the table contype=2/conaffinity=1: robot-robot
  pairs never collide, robot-table pairs do;
- joint damping, armature and frictionloss are zeroed and URDF position limits
  are not enforced, so the contact-free dynamics equal pinocchio's ``aba``
  (limits are graded by the harness, not imposed by the plant);
- fixed links stay separate bodies (``fusestatic`` off), so contact reports
  name URDF links; massless links are allowed and do not change the dynamics;
- a link without ``<inertial>`` is massless, as pinocchio reads it (an explicit zero
  inertial on that body only: MuJoCo would otherwise give it the mass of its collision
  geoms at density 1000, go2's eight ``*_calflower*`` links 0.19 kg in all, 20 % off in
  qdd; bodies added to the spec later keep MuJoCo's geom-derived inertia);
- MuJoCo's URDF parser refuses a material name defined twice ("repeated name"),
  which exporters write into every ``<visual>`` (go2 repeats its rubber and logo
  materials, several per visual). When a URDF repeats one, the ``<material>``
  elements inside ``<visual>`` blocks are dropped before parsing: MuJoCo discards
  URDF visuals anyway, so the model (bodies, inertias, collision geoms) is the same.
  The robot file is not changed; URDFs without repeats parse from the file as before;
- a floating world's ground is an infinite plane (``ground`` below) with the
  table's masks: robot-ground pairs collide, robot-robot pairs do not.

``mujoco`` is imported inside the functions: ``import gato`` stays free of it.
"""
from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import numpy as np


ROBOT_CONTYPE, ROBOT_CONAFFINITY = 1, 2
TABLE_CONTYPE, TABLE_CONAFFINITY = 2, 1
_PLANE_DEFAULTS = dict(friction=0.6, pos_xy=(0.6, 0.2), size_xy=(0.25, 0.25), thickness=0.05)
#: The ground of a floating world: top at z [m], sliding friction coefficient.
_GROUND_DEFAULTS = dict(z=0.0, friction=0.8)
_INTEGRATORS = ("euler", "rk4", "implicitfast")
# ---------------------------------------------------------------- MuJoCo model
def _resolve_mesh(file: str, urdf_dir: Path, meshdir: str) -> str:
    if file.startswith("package://"):
        pkg, _, rest = file[len("package://"):].partition("/")
        cands = [urdf_dir / rest] + [p / pkg / rest for p in [urdf_dir, *urdf_dir.parents]]
    elif os.path.isabs(file):
        cands = [Path(file)]
    else:
        cands = [urdf_dir / file]
        if meshdir:
            cands.append((urdf_dir / meshdir / file) if not os.path.isabs(meshdir) else Path(meshdir) / file)
    for c in cands:
        if c.is_file():
            return str(c.resolve())
    raise FileNotFoundError(f"mesh {file!r} of {urdf_dir}: not found (tried {[str(c) for c in cands]})")


def repeated_materials(urdf_path) -> list[str]:
    """Material names a URDF defines more than once (sorted); MuJoCo's parser refuses those."""
    root = ET.parse(str(urdf_path)).getroot()
    counts = Counter(m.get("name") for m in root.iter("material") if m.get("name") is not None and len(m))
    return sorted(n for n, c in counts.items() if c > 1)


def _links_without_inertial(urdf_path) -> list[str]:
    """URDF links that have no ``<inertial>`` (massless for pinocchio)."""
    return [link.get("name") for link in ET.parse(str(urdf_path)).getroot().iter("link")
            if link.find("inertial") is None]


def _urdf_spec(path: Path):
    """``MjSpec`` of a URDF file; a URDF with repeated material names is parsed without the
    ``<material>`` elements of its ``<visual>`` blocks (module docstring)."""
    import mujoco

    if not repeated_materials(path):
        return mujoco.MjSpec.from_file(str(path))
    tree = ET.parse(str(path))
    for visual in tree.getroot().iter("visual"):
        for mat in visual.findall("material"):
            visual.remove(mat)
    return mujoco.MjSpec.from_string(ET.tostring(tree.getroot(), encoding="unicode"))


def _build_spec(urdf_path, plane, timestep, floating, integrator, mass_scale=None, ground=None):
    """MjSpec of the URDF with the masks/zeroing described in the module docstring, plus the table
    and the ground (``ground``: None or a :func:`_normalize_ground` dict); ``mass_scale``
    ({link: factor}, validated) scales those bodies' mass and inertia about the COM."""
    import mujoco

    path = Path(urdf_path).resolve()
    if not path.is_file():
        raise ValueError(f"urdf_path: file not found: {path}")
    spec = _urdf_spec(path)
    spec.compiler.fusestatic = False
    for name in _links_without_inertial(path):  # massless, as for pinocchio (not its geoms' mass)
        body = spec.body(name)
        if body is not None:
            body.explicitinertial = True
            body.mass = 0.0
            body.inertia = np.zeros(3)
    meshdir = spec.meshdir
    for mesh in spec.meshes:
        mesh.file = _resolve_mesh(mesh.file, path.parent, meshdir)
    spec.meshdir = ""
    for name, f in (mass_scale or {}).items():
        body = spec.body(name)
        if body is None:
            raise ValueError(f"mass_scale: link {name!r} is not a MuJoCo body of {path.name}")
        body.mass = body.mass * f
        full = np.asarray(body.fullinertia, dtype=np.float64)
        if np.all(np.isfinite(full)):  # the URDF's full tensor (it overrides inertia / iquat when set)
            body.fullinertia = full * f
        body.inertia = np.asarray(body.inertia, dtype=np.float64) * f
    for j in spec.joints:
        j.damping = np.zeros(3)  # MuJoCo >= 4 stores damping (and stiffness) as 3-vectors
        j.stiffness = np.zeros(3)
        j.armature = 0.0
        j.frictionloss = 0.0
        j.limited = mujoco.mjtLimited.mjLIMITED_FALSE
    for g in spec.geoms:
        g.contype, g.conaffinity = ROBOT_CONTYPE, ROBOT_CONAFFINITY
    if floating:
        root = spec.worldbody.first_body()
        if root is None:
            raise ValueError(f"urdf_path: {path.name} has no robot body to float")
        root.add_freejoint()
    spec.option.timestep = float(timestep)
    spec.option.integrator = {"euler": mujoco.mjtIntegrator.mjINT_EULER, "rk4": mujoco.mjtIntegrator.mjINT_RK4,
                              "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST}[integrator]
    # A diverging state raises here instead of being silently reset to qpos0.
    spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_AUTORESET
    if ground is not None:
        # An infinite plane (size 0 = unbounded); its top is the plane itself, at z.
        spec.worldbody.add_geom(
            name="ground", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0.0, 0.0, 1.0], pos=[0.0, 0.0, ground["z"]],
            contype=TABLE_CONTYPE, conaffinity=TABLE_CONAFFINITY, friction=[ground["friction"], 0.005, 0.0001])
    if plane is None and ground is None:
        spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    elif plane is not None:
        half_t = plane["thickness"] / 2
        spec.worldbody.add_geom(
            name="table", type=mujoco.mjtGeom.mjGEOM_BOX,
            size=[plane["size_xy"][0], plane["size_xy"][1], half_t],
            pos=[plane["pos_xy"][0], plane["pos_xy"][1], plane["z"] - half_t],
            contype=TABLE_CONTYPE, conaffinity=TABLE_CONAFFINITY,
            friction=[plane["friction"], 0.005, 0.0001])
    return spec


def _normalize_plane(plane):
    if plane is None:
        return None
    if not isinstance(plane, dict) or "z" not in plane:
        raise ValueError(f"plane: expected None or a dict with 'z' (table top height, m), got {plane!r}")
    unknown = set(plane) - {"z", *_PLANE_DEFAULTS}
    if unknown:
        raise ValueError(f"plane: unknown keys {sorted(unknown)}; expected z, {', '.join(_PLANE_DEFAULTS)}")
    p = {**_PLANE_DEFAULTS, **plane}
    out = dict(z=float(p["z"]), friction=float(p["friction"]), pos_xy=tuple(float(x) for x in p["pos_xy"]),
               size_xy=tuple(float(x) for x in p["size_xy"]), thickness=float(p["thickness"]))
    if len(out["pos_xy"]) != 2 or len(out["size_xy"]) != 2 or min(out["size_xy"]) <= 0 \
            or out["thickness"] <= 0 or out["friction"] < 0 or not all(
            math.isfinite(x) for x in (out["z"], out["friction"], out["thickness"], *out["pos_xy"], *out["size_xy"])):
        raise ValueError(f"plane: invalid table {out} (size_xy, thickness > 0; friction >= 0; finite)")
    return out


def _normalize_ground(ground, floating: bool):
    """The ground of a world: None (no ground) or {"z": top height [m], "friction": sliding coefficient}.

    ``ground`` None: a floating world gets the default ground (z 0, friction 0.8), a fixed-base
    one none; False: none; True: the default; a dict overrides the defaults' keys."""
    if ground is None:
        ground = bool(floating)
    if ground is False:
        return None
    if ground is True:
        ground = {}
    if not isinstance(ground, dict):
        raise ValueError(f"ground: expected None, True, False or a dict with z / friction, got {ground!r}")
    unknown = set(ground) - set(_GROUND_DEFAULTS)
    if unknown:
        raise ValueError(f"ground: unknown keys {sorted(unknown)}; expected {', '.join(_GROUND_DEFAULTS)}")
    try:
        out = {k: float(v) for k, v in {**_GROUND_DEFAULTS, **ground}.items()}
    except (TypeError, ValueError):
        raise ValueError(f"ground: z and friction must be numbers, got {ground!r}") from None
    if not (math.isfinite(out["z"]) and math.isfinite(out["friction"]) and out["friction"] >= 0):
        raise ValueError(f"ground: invalid ground {out} (finite z; friction finite and >= 0)")
    return out
