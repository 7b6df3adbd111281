"""The driver/runtime version policy a cluster declares (``driverPolicy`` in ``.compatcheck.yaml``, the chart value
of the same name, and per node pool the ``compatcheck.io/forward-compatibility`` and
``compatcheck.io/minor-version-compatibility`` labels).

The default is the platform's own rule: a driver at least as new as the image's CUDA runtime is mandatory, and a
driver older than the runtime is an error (``cuda-driver-too-old`` across a major version,
``cuda-driver-behind-runtime`` within one). NVIDIA's forward compatibility (the image's cuda-compat libraries) and
minor-version compatibility are real, but whether they work depends on the node's container toolkit and on what
the platform supports, which the cluster knows and compatcheck does not: they are relaxations a cluster declares,
and then the warnings ``cuda-driver-needs-forward-compat`` and ``cuda-driver-needs-minor-version-compat`` take the
errors' place. See docs/driver-policy.md for the table of cases.

Pure: typed data and the reading of a label's value; ``compatcheck.io.config`` reads the config file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from compatcheck.core.model import Severity

FORWARD_COMPAT_LABEL = "compatcheck.io/forward-compatibility"
MINOR_VERSION_COMPAT_LABEL = "compatcheck.io/minor-version-compatibility"
POLICY_LABELS = frozenset({FORWARD_COMPAT_LABEL, MINOR_VERSION_COMPAT_LABEL})

# How the config spells each relaxation, for messages that say how to declare it.
FORWARD_COMPAT_KEY = "driverPolicy.forwardCompatibility"
MINOR_VERSION_COMPAT_KEY = "driverPolicy.minorVersionCompatibility"

Relaxation = Literal["forward", "minor-version"]


@dataclass(frozen=True)
class DriverPolicy:
    """The relaxations of "driver >= runtime" that the cluster as a whole declares. A node pool's label overrides
    its part for that pool (``Declared``)."""

    forward_compatibility: bool = False
    minor_version_compatibility: bool = False
    # The severity of findings decided from the newest release a table knows (a tag newer than the table, a
    # floating tag): None, the rule's own (config ``assumedSeverity: rule``).
    assumed_severity: Severity | None = None

    def declared(self, relaxation: Relaxation, pool: bool | None) -> Declared:
        """Whether ``relaxation`` holds for a pool whose label says ``pool`` (None: no label), and who says so."""
        if pool is not None:
            return Declared(pool, "label")
        on = self.forward_compatibility if relaxation == "forward" else self.minor_version_compatibility
        return Declared(on, "config")


DEFAULT_POLICY = DriverPolicy()  # the platform's rule: nothing declared


@dataclass(frozen=True)
class Declared:
    on: bool
    by: Literal["config", "label"]


def parse_flag(value: str) -> bool | None:
    """A policy label's value: "true" or "false" (any case, surrounding blanks ignored); None for anything else."""
    text = value.strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    return None
