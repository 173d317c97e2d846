"""Front ends over the simulation and planner layers: the reference API's driver and adapters.

``mpc_gato`` (:class:`MPC_GATO`), ``envs`` (a gymnasium environment), ``policy``
(obs -> action), ``limit_scenarios`` (the joint-limit layer's closed-loop runs).
"""
