#!/usr/bin/env bash
# Python's grpcio and grpcio-tools for the gRPC interop tests (retry-grpc/interop): the official
# C-core client and server, driven by the scripts in retry-grpc/interop/python. Installed from
# PyPI with pip, at pinned versions (the ones bench/RESULTS.md §10 was measured with).
#
#   .ci/grpcio.sh install   # pip install them if missing or at another version
#   .ci/grpcio.sh python    # print the Python that has them, or fail saying how to get them
#
# The tests use $RETRY_TEST_PYTHON, else `python3`; with CI set, a missing grpcio fails them.
set -euo pipefail

GRPCIO_VERSION=1.85.1
GRPCIO_TOOLS_VERSION=1.85.1

python_bin() {
    echo "${RETRY_TEST_PYTHON:-python3}"
}

installed() {
    "$(python_bin)" - "$GRPCIO_VERSION" "$GRPCIO_TOOLS_VERSION" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version
import grpc, grpc_tools  # noqa: F401
assert version("grpcio") == sys.argv[1], version("grpcio")
assert version("grpcio-tools") == sys.argv[2], version("grpcio-tools")
PY
}

install() {
    local python
    python="$(python_bin)"
    if ! command -v "$python" >/dev/null 2>&1; then
        echo "$python is missing: install Python 3 (Debian: apt-get install python3 python3-pip)" >&2
        exit 1
    fi
    if installed; then
        return
    fi
    echo "installing grpcio==$GRPCIO_VERSION grpcio-tools==$GRPCIO_TOOLS_VERSION with $python -m pip" >&2
    # --break-system-packages: a Debian Python refuses pip installs outside a virtualenv
    # (PEP 668); the flag is older pips' unknown option, so it is tried second.
    "$python" -m pip install --quiet --disable-pip-version-check \
        "grpcio==$GRPCIO_VERSION" "grpcio-tools==$GRPCIO_TOOLS_VERSION" >&2 ||
        "$python" -m pip install --quiet --disable-pip-version-check --break-system-packages \
            "grpcio==$GRPCIO_VERSION" "grpcio-tools==$GRPCIO_TOOLS_VERSION" >&2
    installed || { echo "grpcio did not install" >&2; exit 1; }
    "$python" -c 'import grpc; print("grpcio", grpc.__version__)' >&2
}

case "${1:-}" in
    install) install ;;
    python)
        if ! installed; then
            echo "grpcio $GRPCIO_VERSION is missing: run \`.ci/grpcio.sh install\`" >&2
            exit 1
        fi
        python_bin
        ;;
    *)
        sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
        exit 2
        ;;
esac
