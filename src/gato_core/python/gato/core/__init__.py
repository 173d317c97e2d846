"""The solver layer: the batched SQP face of the C++ core and what it stands on.

``bsqp`` (:class:`BSQP`) with its row-group half ``rowgroups`` and ``rowkinds``,
``config`` (:class:`SolverParams`), ``results``, ``linsys_autotune`` (the linear-system
policy), ``native`` (which compiled core this CPU loads), ``cuda_backend``, ``executor``
(the plugin's plan executor bindings), ``cache`` (the per-host module cache), ``arrays``
(numpy / torch / JAX at the boundary), ``state`` (the measured state, checked once) and
``references`` (EE references and windows, numpy only). Imports only :mod:`gato.robots`.
"""
