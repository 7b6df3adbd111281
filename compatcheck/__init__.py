"""compatcheck: CUDA compatibility rules for Kubernetes GPU workloads.

The package is layered: ``model`` (plain data) <- ``versions``/``knowledge``/``cluster``/``workloads``
(pure domain logic) <- ``checks`` (typed check types) <- ``engine`` (evaluation) <- ``loader``/``manifests``
(I/O) <- ``report`` and ``cli`` (presentation). Lower layers never import higher ones.
"""

__version__ = "0.1.0"
