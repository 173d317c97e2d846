"""The simulation layer: worlds, the one closed-loop simulation, scenarios and plots.

``loop`` (:class:`Simulation`, tasks, disturbances, :func:`run_closed_loop`), ``worlds``
(pinocchio RK4 and MuJoCo), ``scenarios`` (figure-8 and pick-and-place tasks sized to a
URDF's limits; ``gato.tasks``), ``plotting``. Above :mod:`gato.planners`.
"""
