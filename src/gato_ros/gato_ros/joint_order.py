"""The two joint orders of a node: the configured ``joint_names`` (the order its commands and
the Float64MultiArray convention use) and the model's (the URDF's, or the solver's). ROS-free;
the controller logic and the simulation world's logic map through it."""
from __future__ import annotations

import numpy as np

__all__ = ["JointOrder"]


class JointOrder:
    """Args: names: the configured joint_names; model_joints: the model's joints in its order;
    robot: named by the error. ValueError (naming joint_names) unless ``names`` is a permutation
    of ``model_joints``.

    ``to_names``: index array, names order <- model order (``v_model[to_names]`` is in
    ``names`` order). :meth:`index`: model order <- the order of a message's names."""

    def __init__(self, names, model_joints, robot: str):
        names, model_joints = list(names), list(model_joints)
        if sorted(names) != sorted(model_joints):
            raise ValueError(f"joint_names: {names} are not the joints of {robot}'s URDF {model_joints}")
        self.names, self.model_joints = names, model_joints
        self.to_names = np.array([model_joints.index(n) for n in names])
        self._index: dict = {}

    def index(self, names) -> np.ndarray | None:
        """Index array, model order <- ``names`` order (``v[idx]`` is in model order), or None
        when ``names`` lacks a model joint. Cached for the few name lists a node sees."""
        key = tuple(names)
        idx = self._index.get(key)
        if idx is None:
            pos = {n: i for i, n in enumerate(key)}
            if not all(n in pos for n in self.model_joints):
                return None
            idx = np.array([pos[n] for n in self.model_joints])
            if len(self._index) > 16:
                self._index.clear()
            self._index[key] = idx
        return idx

    def missing(self, names) -> list:
        """The model joints ``names`` lacks (in model order)."""
        have = set(names)
        return [j for j in self.model_joints if j not in have]
