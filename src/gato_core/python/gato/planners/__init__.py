"""The planner layer: one control tick from a state and a reference window.

``planner`` (the :class:`Planner` interface, its result types and the registry),
``controller`` (:class:`MPCController`, BSQP per tick), ``bsqp_planner`` / ``osc_planner``
(the registered planners; the sampling planner lives in :mod:`gato.sampling`), ``osc``
(the batched operational-space controller), ``controller_setup`` (one configuration ->
solver + controller), ``safety`` (fallback laws). Beside :mod:`gato.wrench`, above
:mod:`gato.core`.
"""
