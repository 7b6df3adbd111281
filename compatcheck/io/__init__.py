"""Input and output around the core: manifests read with positions (ruamel), rule, data, config, node and CRL
files loaded and validated, helm/kustomize rendering, ``fix``'s round-trip edits, baselines, and the lint run
that ties files to the engine.

It may use the core and the reporters' model; it must not import the CLI or the webhook, nor anything the
webhook extra brings (aiohttp, kubernetes, cryptography, prometheus-client).
"""
