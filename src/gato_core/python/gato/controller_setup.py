"""One way to turn a controller configuration into a solver + MPC controller, and to
apply tunable changes to them: used by the ROS controller node (gato_ros) and by
``gato replay`` (which must rebuild exactly what the node ran).

A configuration is a mapping with the names of the controller parameter schema
(docs/parameters.md): ``robot, N, dt, batch_size, warm_start, linsys,
reseed_threshold, limits`` plus the cost keys :data:`COST_KEYS` and solver keys
:data:`SOLVER_KEYS`. Validation of ranges and choices belongs to the schema
(gato_ros.params); this module raises ValueError only for what it cannot build.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

from .config import SolverParams
from .controller import MPCController
from .interface import BSQP, robot_urdf

__all__ = ["COST_KEYS", "SOLVER_KEYS", "TUNABLE_KEYS", "build_controller", "apply_tunables", "tunables",
           "urdf_sha256"]

#: Cost weights (SolverParams fields set through ``solver.set_cost_weights``).
COST_KEYS = ("q_cost", "qd_cost", "u_cost", "N_cost", "q_lim_cost", "vel_lim_cost", "ctrl_lim_cost")
#: Solver settings (SolverParams fields set through ``solver.set_params``).
SOLVER_KEYS = ("mu", "rho", "max_sqp_iters", "max_pcg_iters", "pcg_tol")
#: Everything :func:`apply_tunables` applies between ticks.
TUNABLE_KEYS = COST_KEYS + SOLVER_KEYS + ("linsys", "reseed_threshold", "limits")

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

    Raises ValueError naming a missing key, or when ``limits`` needs a row-group method
    the solver lacks.
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
    return MPCController(solver, warm_start=config["warm_start"], linsys=config["linsys"],
                         reseed_threshold=config["reseed_threshold"] or None, limits=limits)


def apply_tunables(controller: MPCController, changes: Mapping) -> None:
    """Apply tunable changes (names of :data:`TUNABLE_KEYS`) to a controller and its
    solver, as between two ticks. Unknown names raise ValueError (nothing applied)."""
    unknown = sorted(set(changes) - set(TUNABLE_KEYS))
    if unknown:
        raise ValueError(f"changes: {unknown} are not tunable (tunables: {list(TUNABLE_KEYS)})")
    s = controller.solver
    cost = {k: changes[k] for k in COST_KEYS if k in changes}
    if cost:
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
        _apply_limits(s, changes["limits"])


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
    """The tunables in force, read back from the solver and controller objects."""
    p = controller.solver.params
    out = {k: getattr(p, k) for k in COST_KEYS + SOLVER_KEYS}
    out.update(linsys=controller.linsys, limits=controller.limits or "off",
               reseed_threshold=controller.reseed_threshold or 0.0)
    return out


def config_json(config: Mapping, controller: MPCController, urdf) -> str:
    """The configuration of a running controller as JSON: ``config`` with the tunables
    read back from the objects, plus ``urdf_sha256``, ``gato_version``, ``solver_backend``."""
    from . import __version__

    out = dict(config)
    out.update(tunables(controller))
    out.update(urdf_sha256=urdf_sha256(urdf), gato_version=__version__,
               solver_backend=getattr(controller.solver, "backend", "cpu"))
    return json.dumps(out, sort_keys=True)
