# compatcheck admission webhook image.
#   docker build -t compatcheck:0.1.0 .
# The build stage makes the wheel; the runtime stage installs it with the webhook extra into a virtualenv and
# runs as an unprivileged user with nothing else in the image. ENTRYPOINT is `compatcheck webhook serve`; the
# chart passes the flags (--port, --config, --tls-secret, ...).
FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY compatcheck ./compatcheck
COPY rules ./rules
RUN pip install --no-cache-dir build && python -m build --wheel --outdir /dist

FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/compatcheck/bin:$PATH
COPY --from=build /dist/*.whl /tmp/
RUN python -m venv /opt/compatcheck \
 && /opt/compatcheck/bin/pip install --no-cache-dir "$(ls /tmp/compatcheck-*.whl)[webhook]" \
 && /opt/compatcheck/bin/python -m compileall -q /opt/compatcheck \
 && rm -f /tmp/*.whl \
 && useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin compatcheck
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["compatcheck", "webhook", "serve"]
CMD ["--help"]
