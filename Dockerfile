# seqlab serve in a container: the HTTP API over trained runs or ONNX exports, mounted read-only (never baked in).
#
#   docker build -t seqlab .                         # the default target, torch: run directories on CPU PyTorch
#   docker run --rm -p 8000:8000 -e SEQLAB_API_KEY=KEY -v "$PWD/runs/demo:/models/demo:ro" seqlab /models/demo
#
#   docker build --target onnx -t seqlab:onnx .      # ONNX exports on onnxruntime: no PyTorch in the image
#   docker run --rm -p 8000:8000 -e SEQLAB_API_KEY=KEY -v "$PWD/exports/demo:/models/demo:ro" seqlab:onnx /models/demo
#
# Inside the container the server listens on 0.0.0.0 (a published port reaches nothing on 127.0.0.1), so, as
# `seqlab serve --host 0.0.0.0` does anywhere, it warns when no API key is set: pass SEQLAB_API_KEY (or
# --api-key), or publish the port on this machine only (-p 127.0.0.1:8000:8000). Any other `seqlab serve` option
# goes after the model paths (--max-tokens 256, --threads 2, ...), but not --port: the health check asks 8000
# inside (publish it as any port outside, -p 9000:8000). `make docker-check` builds the onnx target and
# proves its health check on an export (CI does it where `docker info` answers).

ARG PYTHON=3.11

# The seqlab wheel, built from this checkout (the only files it needs: .dockerignore keeps the rest out).
FROM python:${PYTHON}-slim-bookworm AS wheel
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
RUN pip wheel --no-cache-dir --disable-pip-version-check --no-deps --wheel-dir /wheels .

# What both servers share: a user without privileges, the port, the health check.
FROM python:${PYTHON}-slim-bookworm AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin seqlab
EXPOSE 8000
# /healthz needs no API key; the slim image has no curl, Python's urllib does it (any failure: exit 1)
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"]

# ONNX exports (`seqlab export RUN --format onnx`) on onnxruntime and numpy. The wheel goes in without its
# dependencies, since they name torch; what `seqlab serve --runtime onnx` imports is listed here instead (pip
# then notes that torch, scipy, ... are missing: they are, on purpose).
FROM runtime AS onnx
COPY --from=wheel /wheels /wheels
RUN pip install --no-deps /wheels/seqlab-*.whl \
 && pip install "numpy>=1.24" "tokenizers>=0.15" "pyyaml>=6.0" "fastapi>=0.110" "uvicorn[standard]>=0.29" \
                "onnxruntime>=1.17" \
 && rm -rf /wheels
USER seqlab
WORKDIR /home/seqlab
ENTRYPOINT ["seqlab", "serve", "--runtime", "onnx", "--host", "0.0.0.0", "--port", "8000"]

# Run directories on PyTorch, CPU only (the default target: the last stage). The image has no local torch
# wheel, so the CPU build comes from PyTorch's own index, pinned to the version the tests run on (the Makefile's);
# the PyPI default would be the CUDA build, gigabytes larger. Everything else comes from PyPI.
FROM runtime AS torch
COPY --from=wheel /wheels /wheels
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu \
 && pip install /wheels/seqlab-*.whl \
 && rm -rf /wheels
USER seqlab
WORKDIR /home/seqlab
ENTRYPOINT ["seqlab", "serve", "--host", "0.0.0.0", "--port", "8000"]
