"""Compatibility name: :class:`ReferenceWindow` and the nanosecond helpers live in
:mod:`gato.references` (with the references that produce the windows)."""
from .references import NS_PER_S, ReferenceWindow, ns_to_sec, sec_to_ns

__all__ = ["ReferenceWindow", "sec_to_ns", "ns_to_sec", "NS_PER_S"]
