"""``gato.reference_window``, the old module name of :class:`ReferenceWindow`: the window and the
nanosecond helpers live in :mod:`gato.core.references`; this file only re-exports them."""
from .core.references import NS_PER_S, ReferenceWindow, ns_to_sec, sec_to_ns  # noqa: F401
