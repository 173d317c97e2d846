"""The wrench layer: external-wrench estimators, hypothesis batches and the swing model.

``estimators`` (samplers and the one-step identifier), ``hypotheses`` (batch-as-identity:
B model hypotheses, reality picks one), ``swing`` (a hanging payload read as a pendulum).
Beside :mod:`gato.planners`, above :mod:`gato.core`.
"""
