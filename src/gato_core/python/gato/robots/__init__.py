"""The robot layer: registry, URDF codegen, frames, sphere covers, dynamics fingerprint.

``registry`` (names, EE frames, URDF lookup; ``_registry.json``), ``manifest`` (the per-user
cache folder and its robot manifest), ``builder`` (URDF inertial normalization and codegen),
``frames`` (wrench frames, EE kinematics), ``spherize`` (collision spheres), ``mjcf`` (a URDF
as a MuJoCo model), ``mass_scale`` (link-mass model errors), ``fingerprint`` (is your plant
our robot?). The bundled URDF copies
of a wheel install live in ``urdf/``. The bottom layer: imports nothing else of gato.

``gato.robots`` was the registry module's path; its names stay importable from here.
"""
from .registry import (all_robots, detect_plant, find_urdf, resolve_robot, sha256_file,  # noqa: F401
                       shipped_registry)
