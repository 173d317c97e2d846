"""``gato.builder``, a path the reference API and older code import: URDF codegen is
:mod:`gato.robots.builder`, :func:`build` (codegen + the solver cache entries) is in
:mod:`gato.core.cache` (docs/architecture.md); this file only re-exports them."""
from .core.cache import build  # noqa: F401
from .robots.builder import (all_robots, canonicalize_inertials, codegen, GENERATOR_VERSION,  # noqa: F401
                             load_registry, repo_root, rotated_inertial_origins, rpy_matrix)
