"""compatcheck's admission webhook: the aiohttp transport around ``compatcheck.admission``.

Nothing here decides anything: ``compatcheck.admission.review`` does. This package serves HTTPS, reads the
cluster view, reloads certificates, exposes health and metrics, and shuts down cleanly.
"""
