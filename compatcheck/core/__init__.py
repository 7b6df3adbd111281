"""The pure core: the model, RFC 6901 pointers and RFC 6902 patches, versions, the knowledge base, the cluster
model, the kind → pod-spec table, the checks, the engine and the admission decisions.

It takes and returns plain data. It must not read files, print, parse YAML (no ruamel), speak HTTP (no aiohttp),
talk to Kubernetes (no kubernetes client) or touch key material (no cryptography): ``compatcheck.io``, the CLI
and the webhook do that around it. import-linter holds this (pyproject.toml, ``[tool.importlinter]``).
"""
