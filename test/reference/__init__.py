"""Slow, obvious pure-NumPy reference implementations used to check the fast solver."""
