"""Baseline for benchmarks/webhook_load.py: a bare aiohttp HTTPS endpoint answering a constant
AdmissionReview (same TLS settings as the webhook). Usage: bare_server.py CERT KEY PORT"""

import json
import sys

from aiohttp import web

from compatcheck.webhook.server import tls_context

CONSTANT = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "x", "allowed": True}}


async def handle(request: web.Request) -> web.Response:
    await request.read()
    return web.json_response(CONSTANT, dumps=json.dumps)


app = web.Application(client_max_size=3 * 1024 * 1024)
app.router.add_post("/validate", handle)
app.router.add_get("/readyz", lambda r: web.Response(text="ok"))
web.run_app(app, host="127.0.0.1", port=int(sys.argv[3]), ssl_context=tls_context(sys.argv[1], sys.argv[2]),
            print=None, access_log=None)
