"""One way to turn a controller configuration into a solver + MPC controller, and to
apply tunable changes to them: used by the ROS controller node (gato_ros) and by
``gato replay`` (which must rebuild exactly what the node ran).

A configuration is a mapping with the names of the controller parameter schema
(docs/parameters.md): ``robot, N, dt, batch_size, warm_start, linsys,
reseed_threshold, limits`` plus the cost keys :data:`COST_KEYS`, solver keys
:data:`SOLVER_KEYS` and the optional collision keys :data:`COLLISION_KEYS` (world obstacles
of the solver's COLLISION rows; absent = none). Validation of ranges and choices belongs to the schema
(gato_ros.params); this module raises ValueError only for what it cannot build.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..core import rowkinds as rk
from ..core.config import SolverParams
from .controller import MPCController
from ..core.bsqp import BSQP, robot_urdf

__all__ = ["COST_KEYS", "SOLVER_KEYS", "COLLISION_KEYS", "POSE_KEYS", "COLLISION_DEFAULTS", "COLLISION_MECHS",
           "TUNABLE_KEYS",
           "build_controller", "apply_tunables", "tunables", "collision_obstacles", "collision_settings",
           "check_collision_limits", "urdf_sha256"]

#: Cost weights (SolverParams fields set through ``solver.set_cost_weights``).
COST_KEYS = ("q_cost", "qd_cost", "u_cost", "N_cost", "q_lim_cost", "vel_lim_cost", "ctrl_lim_cost")
#: Solver settings (SolverParams fields set through ``solver.set_params``); u_ref: the control
#: cost's reference ("zero" | "gravity", docs/solver_method.md).
SOLVER_KEYS = ("mu", "rho", "max_sqp_iters", "max_pcg_iters", "pcg_tol", "u_ref")
#: Collision clearance rows (docs/constraints.md "Collision clearance rows", "From ROS"): world
#: obstacles as flat arrays (spheres x, y, z, r per obstacle; planes nx, ny, nz, offset per
#: half-space n.p <= offset), the clearance margin [m] and the rows' mechanism. No obstacle = no rows.
COLLISION_KEYS = ("collision_spheres", "collision_planes", "collision_margin", "collision_mech")
#: Values of the collision keys a configuration leaves out (rows off; margin and mechanism as measured).
COLLISION_DEFAULTS = {"collision_spheres": [], "collision_planes": [], "collision_margin": 0.02,
                      "collision_mech": "admm"}
#: Mechanisms of the collision rows (telemetry: clearances in the stats, no effect on the plan).
COLLISION_MECHS = ("admm", "al", "barrier", "telemetry")
#: The controller's factor on the EE position weights of pose windows (issue 30; MPCController
#: ``pose_ee_weight_scale``); a configuration without it (a bag from before it): 1, off.
POSE_KEYS = ("pose_ee_weight_scale",)
#: Everything :func:`apply_tunables` applies between ticks.
TUNABLE_KEYS = COST_KEYS + SOLVER_KEYS + ("linsys", "reseed_threshold", "limits") + COLLISION_KEYS + POSE_KEYS

_REQUIRED = ("robot", "N", "dt", "batch_size", "warm_start", "linsys", "reseed_threshold", "limits")


def urdf_sha256(path) -> str:
    """SHA-256 (hex) of a URDF file's bytes: which model a recording was made with."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def build_controller(config: Mapping, *, urdf=None) -> MPCController:
    """A :class:`gato.BSQP` and its :class:`gato.MPCController` for ``config``.

    Args:
        config: controller configuration (module docstring); missing cost / solver keys
            take the SolverParams defaults.
        urdf: URDF path overriding ``gato.robot_urdf(config["robot"])`` (e.g. the URDF a
            replay was pointed at).

    Raises ValueError naming a missing key, when ``limits`` needs a row-group method
    the solver lacks, or naming the collision key whose value is invalid (or that needs
    ``limits`` other than "off": the collision group comes after the limit groups).
    """
    missing = [k for k in _REQUIRED if k not in config]
    if missing:
        raise ValueError(f"config: missing {missing} (controller parameters: docs/parameters.md)")
    robot = config["robot"]
    sp = SolverParams(**{k: config[k] for k in COST_KEYS + SOLVER_KEYS if k in config})
    solver = BSQP(str(urdf or robot_urdf(robot)), int(config["batch_size"]), int(config["N"]),
                  float(config["dt"]), sp, plant_type=robot)
    limits = config["limits"]
    if limits != "off" and not callable(getattr(solver, f"enable_limit_{limits}", None)):
        raise ValueError(f"limits: {limits!r} needs the solver's constraint row-group layer "
                         f"(no enable_limit_{limits} on {type(solver).__name__}); use 'off'")
    col = _collision_settings(config, COLLISION_DEFAULTS)
    ctrl = MPCController(solver, warm_start=config["warm_start"], linsys=config["linsys"],
                         reseed_threshold=config["reseed_threshold"] or None, limits=limits,
                         pose_ee_weight_scale=config.get("pose_ee_weight_scale", 1.0))
    _install_collision(ctrl, col)
    return ctrl


def apply_tunables(controller: MPCController, changes: Mapping) -> None:
    """Apply tunable changes (names of :data:`TUNABLE_KEYS`) to a controller and its
    solver, as between two ticks. Unknown names, an invalid collision value or obstacles
    with ``limits`` "off" raise ValueError (nothing applied). Collision obstacles that only
    move keep the group's duals; a new mechanism, rows switched on / off or new ``limits``
    re-install the row groups (limits first, then the collision group)."""
    unknown = sorted(set(changes) - set(TUNABLE_KEYS))
    if unknown:
        raise ValueError(f"changes: {unknown} are not tunable (tunables: {list(TUNABLE_KEYS)})")
    s = controller.solver
    col = None
    if "limits" in changes or any(k in changes for k in COLLISION_KEYS):
        # checked before anything is applied: a bad value leaves the controller as it was
        col = _collision_settings(changes, collision_settings(controller))
        check_collision_limits(col, changes.get("limits", controller.limits or "off"))
    if "pose_ee_weight_scale" in changes:
        controller.pose_ee_weight_scale = changes["pose_ee_weight_scale"]   # from the next pose window on
    cost = {k: changes[k] for k in COST_KEYS if k in changes}
    if cost:
        if "q_cost" in cost or "N_cost" in cost:
            controller.restore_ee_weights()   # the change is to the configured weights, not a pose tick's
        s.set_cost_weights(**cost)
    sp = {k: changes[k] for k in SOLVER_KEYS if k in changes}
    if sp:
        s.set_params(s.params.replace(**sp))
    if "linsys" in changes:
        controller.linsys = changes["linsys"]
        if changes["linsys"] != "auto":
            s.set_linsys(changes["linsys"])
    if "reseed_threshold" in changes:
        controller.reseed_threshold = changes["reseed_threshold"] or None
    if "limits" in changes:
        _apply_limits(s, changes["limits"])  # removes every row group: the collision group follows
        _install_collision(controller, col, force=True)
    elif col:
        _install_collision(controller, col)


def _apply_limits(s, mech: str) -> None:
    if callable(getattr(s, "get_row_groups", None)) and s.get_row_groups() \
            and callable(getattr(s, "disable_row_groups", None)):
        s.disable_row_groups()
    if mech != "off":
        enable = getattr(s, f"enable_limit_{mech}", None)
        if not callable(enable):
            raise ValueError(f"limits: {mech!r} needs the solver's constraint row-group layer "
                             f"(no enable_limit_{mech} on {type(s).__name__}); use 'off'")
        enable(**MPCController.LIMIT_DEFAULTS[mech])


def tunables(controller: MPCController) -> dict:
    """The tunables in force, read back from the solver and controller objects (the collision
    keys: obstacles and margin from the solver's collision environment and group; none
    installed: empty obstacle lists and the configured margin / mechanism)."""
    p = controller.solver.params
    out = {k: getattr(p, k) for k in COST_KEYS + SOLVER_KEYS}
    out["q_cost"], out["N_cost"] = controller.configured_ee_weights()   # without a pose tick's scale
    out.update(pose_ee_weight_scale=controller.pose_ee_weight_scale, linsys=controller.linsys,
               limits=controller.limits or "off",
               reseed_threshold=controller.reseed_threshold or 0.0)
    out.update(collision_settings(controller))
    return out


# ---------------------------------------------------------------- collision rows
def collision_obstacles(name: str, value, width: int = 4) -> np.ndarray:
    """The (n, 4) obstacle table of a flat collision parameter (``collision_spheres``: x, y, z, r
    per sphere, r > 0; ``collision_planes``: nx, ny, nz, offset per plane, normal non-zero),
    world frame, metres. ValueError naming ``name``: not a list of numbers, a length that is not
    a multiple of 4, NaN / Inf, a radius <= 0, a zero normal."""
    try:
        a = np.asarray(list(value), dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a flat list of numbers, got {value!r}") from None
    what = "x, y, z, r per sphere" if name == "collision_spheres" else "nx, ny, nz, offset per plane"
    if a.size % width:
        raise ValueError(f"{name}: length {a.size} is not a multiple of {width} ({what})")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: contains NaN or Inf (obstacle {int(np.argwhere(~np.isfinite(a))[0][0]) // width})")
    t = a.reshape(-1, width)
    if name == "collision_spheres":
        bad = np.argwhere(t[:, 3] <= 0)
        if bad.size:
            i = int(bad[0][0])
            raise ValueError(f"{name}: radius must be > 0 [m] (obstacle {i}: {float(t[i, 3])!r})")
    else:
        bad = np.argwhere(np.linalg.norm(t[:, :3], axis=1) < 1e-9)
        if bad.size:
            raise ValueError(f"{name}: zero normal (plane {int(bad[0][0])})")
    return t


def _collision_settings(config: Mapping, base: Mapping) -> dict:
    """The four collision settings of ``config`` over ``base``, validated (ValueError naming the key)."""
    out = {k: config.get(k, base[k]) for k in COLLISION_KEYS}
    for k in ("collision_spheres", "collision_planes"):
        out[k] = [float(v) for v in collision_obstacles(k, out[k]).ravel()]
    m = out["collision_margin"]
    if isinstance(m, bool) or not isinstance(m, (int, float, np.floating, np.integer)) or not np.isfinite(m) \
            or m < 0:
        raise ValueError(f"collision_margin: expected a finite number >= 0 [m], got {m!r}")
    out["collision_margin"] = float(m)
    if out["collision_mech"] not in COLLISION_MECHS:
        raise ValueError(f"collision_mech: expected one of {COLLISION_MECHS}, got {out['collision_mech']!r}")
    return out


def check_collision_limits(col: Mapping, limits: str) -> None:
    """ValueError naming ``collision_spheres`` when obstacles are set (``col``: the collision keys)
    and ``limits`` is "off": the collision group needs a limit mechanism installed before it."""
    if (col["collision_spheres"] or col["collision_planes"]) and limits == "off":
        raise ValueError("collision_spheres: the collision rows need a limit mechanism (limits is 'off'; the "
                         "collision group comes after the limit groups): set limits or clear the obstacles")


def collision_settings(controller: MPCController) -> dict:
    """The collision settings in force on ``controller`` (the :data:`COLLISION_KEYS`): obstacles
    from the solver's collision environment while the collision group is installed (else empty),
    margin and mechanism from that group (else the ones last configured)."""
    out = dict(getattr(controller, "_collision_cfg", COLLISION_DEFAULTS))
    s = controller.solver
    groups = s.get_row_groups() if callable(getattr(s, "get_row_groups", None)) else []
    grp = next((g for g in groups if g["kind"] == rk.COLLISION), None)
    if grp is None:
        return dict(out, collision_spheres=[], collision_planes=[])
    env = s.collision_environment
    return dict(collision_spheres=[float(v) for v in np.ravel(env["spheres"])],
                collision_planes=[float(v) for v in np.ravel(env["planes"])],
                collision_margin=float(grp["lo"][0]), collision_mech=str(grp["mech_name"]))


def _install_collision(controller: MPCController, col: Mapping, force: bool = False) -> None:
    """Bring the solver's collision group to ``col`` (validated settings): obstacles only moved
    (the group keeps its duals), the margin moved through the group's bounds; a mechanism change
    or switching the rows on / off re-installs the row groups (limits first). ``force``: the
    groups were just re-installed without the collision group."""
    s = controller.solver
    check_collision_limits(col, controller.limits or "off")
    on = bool(col["collision_spheres"] or col["collision_planes"])
    if on and not callable(getattr(s, "enable_collision", None)):
        raise ValueError(f"collision_spheres: {type(s).__name__} has no collision rows (enable_collision)")
    now = collision_settings(controller) if not force else dict(COLLISION_DEFAULTS)
    installed = bool(now["collision_spheres"] or now["collision_planes"])
    controller._collision_cfg = dict(col)
    if not on and not installed:
        return
    env = dict(spheres=collision_obstacles("collision_spheres", col["collision_spheres"]),
               planes=collision_obstacles("collision_planes", col["collision_planes"]))
    if on and installed and now["collision_mech"] == col["collision_mech"]:
        s.set_collision_environment(**env)
        if now["collision_margin"] != col["collision_margin"]:
            gi = next(g["index"] for g in s.get_row_groups() if g["kind"] == rk.COLLISION)
            s.set_row_group_bounds(gi, col["collision_margin"], np.inf)
        return
    if installed:  # no single-group removal: re-install the limits, then the collision group
        _apply_limits(s, controller.limits or "off")
    if on:
        s.set_collision_environment(**env)
        s.enable_collision(mech=col["collision_mech"], margin=col["collision_margin"])


def config_json(config: Mapping, controller: MPCController, urdf) -> str:
    """The configuration of a running controller as JSON: ``config`` with the tunables
    read back from the objects, plus ``urdf_sha256``, ``gato_version``, ``solver_backend``."""
    from ..core.version import __version__

    out = dict(config)
    out.update(tunables(controller))
    out.update(urdf_sha256=urdf_sha256(urdf), gato_version=__version__,
               solver_backend=getattr(controller.solver, "backend", "cpu"))
    return json.dumps(out, sort_keys=True)
