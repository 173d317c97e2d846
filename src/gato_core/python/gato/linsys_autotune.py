"""``gato.linsys_autotune``, a path the reference API and older code import: the module is
:mod:`gato.core.linsys_autotune` (docs/architecture.md); this file only re-exports it."""
from .core.linsys_autotune import (__all__, ADMM_FACTOR_MIN_N, ADMM_POLICIES, check_threshold,
                                   decide_policy, DEFAULT_TAU, fit_tau, load_tuning, lookup,
                                   POLICIES, resolve_admm_linsys, resolve_linsys, save_tuning,
                                   tuning_path)  # noqa: F401
