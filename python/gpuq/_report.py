"""Reports: the JSON reports of gpuq's Rust core as objects with attributes."""

from __future__ import annotations

import copy
import json
from typing import Any, Dict


class Report:
    """A report of a run: every field of the JSON report that gpuq's CLI prints is an
    attribute (``report.status``, ``report.iterations``, ...), and ``to_dict()`` returns
    all of them.
    """

    def __init__(self, fields: Dict[str, Any]):
        self._fields = fields

    @classmethod
    def _from_json(cls, text: str):
        return cls(json.loads(text))

    def __getattr__(self, name: str) -> Any:
        fields = self.__dict__.get("_fields", {})
        if name in fields:
            return fields[name]
        raise AttributeError(f"{type(self).__name__} has no field {name!r}")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._fields))

    def to_dict(self) -> Dict[str, Any]:
        """All the fields, as the CLI's ``--json`` report has them (a deep copy)."""
        return copy.deepcopy(self._fields)

    def __repr__(self) -> str:
        keys = [k for k in self._SHOWN if k in self._fields]
        inner = ", ".join(f"{k}={self._fields[k]!r}" for k in keys)
        return f"{type(self).__name__}({inner})"

    _SHOWN = ("status", "converged", "iterations", "relative_residual", "time_s")


class SolveReport(Report):
    """The report of a linear solve.

    Attributes (besides every other field of ``to_dict()``): ``status`` (``converged``,
    ``max_iterations``, ``stagnated``, ``breakdown``, ``accuracy_limit``, ...),
    ``converged`` (the *true* residual met the tolerance), ``iterations``,
    ``relative_residual`` (true ||b - A x|| / ||b||), ``residual_history`` (the
    recurrence's relative residual per iteration, the initial one first), ``time_s``,
    ``setup_time_s``, ``method``, ``preconditioner``, ``backend``, ``layout``,
    ``stopped`` (the message of a breakdown or stagnation, else None), ``stats`` (the
    backend's counters during the iterations), ``transfers`` (of :func:`gpuq.solve`: the
    backend's host-device copies during the whole call, ``uploads``, ``bytes_up``,
    ``downloads``, ``bytes_down``; on a GPU with CUDA arrays only the scalars the
    iterations read back), and with AMG ``amg`` (the hierarchy) and ``amg_setup_s``.
    """


class IntegrationResult(Report):
    """The result of an integration.

    Attributes: ``estimate``, ``error`` (the error estimate), ``converged``,
    ``evaluations``, ``boxes``, ``rounds``, ``status`` (why it stopped: ``converged``,
    ``evaluation-cap``, ``memory-cap``, ``time-limit``, ``interrupted``), ``method`` (the
    method that ran), ``timings``, ``backend``, ``evaluation`` (where the integrand ran).
    """

    _SHOWN = ("estimate", "error", "converged", "evaluations", "status")


class MonteCarloReport(Report):
    """The report of a Monte Carlo estimate (``mc-forward``, ``mc-adjoint``): ``status``
    (``estimate``, ``converged``, ``not_converged``, ``inaccurate``, ``interrupted``),
    ``relative_residual``, ``std_error`` (per entry), ``histories``, ``batches``, ...; or of
    an MCSA solve (the fields of :class:`SolveReport`).
    """

    _SHOWN = ("status", "relative_residual", "histories", "iterations", "converged")
