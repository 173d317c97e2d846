"""Command-line tools of gato (``python -m gato.tools.<name>``).

- ``autotune_linsys``: probe a task under pure pcg and pure bdsv and store the
  per-task linear-system policy (see :mod:`gato.linsys_autotune`).
"""
