"""compatcheck's admission webhook: the aiohttp transport around ``compatcheck.core.admission``.

Nothing here decides anything: ``compatcheck.core.admission.review`` does. This package serves HTTPS, reads the
cluster view, reloads certificates, exposes health and metrics, and shuts down cleanly.
"""
