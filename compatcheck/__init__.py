"""compatcheck: CUDA compatibility rules for Kubernetes GPU workloads, one engine behind a linter and an
admission webhook.

The packages are layers, each importing only those below it (import-linter holds this; see
docs/architecture.md):

    compatcheck.cli        the command line: parse, call, format, exit
    compatcheck.webhook    the aiohttp admission service, its cluster view and certificates (the webhook extra)
    compatcheck.io         files in and out: manifests with positions, rule/data/config/node loaders, fix
    compatcheck.report     output formats (text, JSON, SARIF, JUnit, GitHub) and the rule reference
    compatcheck.core       the pure core: model, versions, knowledge, cluster, workloads, checks, engine, admission
"""

__version__ = "0.1.0"
