"""``gato._cache``, a path the reference API and older code import: the module cache is
:mod:`gato.core.cache`, the cache folder and robot manifest :mod:`gato.robots.manifest`
(docs/architecture.md); this file only re-exports them."""
from .core.cache import (available_cached, detect_arch, ensure_module, find_module,  # noqa: F401
                         load_module, module_key, native_root, register_robot, resolve,
                         toolchain_identity)
from .robots.manifest import cache_dir, load_manifest, robot_entry, store_entry  # noqa: F401
