"""``gato.spherize``, a path the reference API and older code import: the module is
:mod:`gato.robots.spherize` (docs/architecture.md); this file only re-exports it."""
from .robots.spherize import (cached_spheres, cover, DEFAULT_RES, link_points, load_spheres,
                              moving_links, read_stl, spherize, SPHERIZER_VERSION, write_spheres)  # noqa: F401
