#!/usr/bin/env bash
# Python's grpcio and grpcio-tools for the gRPC interop tests (retry-grpc/interop): the official
# C-core client and server, driven by the scripts in retry-grpc/interop/python. Installed from
# PyPI with pip, at pinned versions (the ones bench/RESULTS.md §10 was measured with), into a
# virtual environment in cargo's target directory ($CARGO_TARGET_DIR, else target/):
# target/grpcio-venv. The machine's own Python is never changed.
#
#   .ci/grpcio.sh install   # make the virtual environment, or bring it to the pinned versions
#   .ci/grpcio.sh python    # print the Python the tests use, or fail saying how to get one
#
# The tests use $RETRY_TEST_PYTHON if set, else the virtual environment if it exists, else
# `python3`, and run against grpcio 1.85.x (any patch; retry-grpc-interop's
# `harness::GRPCIO_RANGE`). Without one, they skip saying how to get it; with CI set, they fail.
set -euo pipefail

GRPCIO_VERSION=1.85.1
GRPCIO_TOOLS_VERSION=1.85.1

script="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$script")/.."
target="${CARGO_TARGET_DIR:-target}"
venv="$target/grpcio-venv"

# The Python the tests use, as `harness::python` finds it.
python_bin() {
    if [[ -n "${RETRY_TEST_PYTHON:-}" ]]; then
        echo "$RETRY_TEST_PYTHON"
    elif [[ -e "$venv/bin/python" ]]; then
        echo "$venv/bin/python"
    else
        echo python3
    fi
}

# Whether $1 has grpcio and grpcio-tools at exactly the pinned versions ($2 = pinned), or, with
# $2 = range, grpcio 1.85.x and any grpcio-tools.
has_grpcio() {
    "$1" - "$2" "$GRPCIO_VERSION" "$GRPCIO_TOOLS_VERSION" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version
import grpc, grpc_tools  # noqa: F401
if sys.argv[1] == "pinned":
    assert version("grpcio") == sys.argv[2], version("grpcio")
    assert version("grpcio-tools") == sys.argv[3], version("grpcio-tools")
else:
    major, minor, patch = grpc.__version__.split(".")
    assert (major, minor) == ("1", "85") and patch.isdigit(), grpc.__version__
PY
}

install() {
    if [[ -n "${RETRY_TEST_PYTHON:-}" ]]; then
        # A Python the developer chose: checked, never changed.
        if has_grpcio "$RETRY_TEST_PYTHON" range; then
            return
        fi
        echo "RETRY_TEST_PYTHON=$RETRY_TEST_PYTHON has no grpcio 1.85.x with grpcio-tools; unset it to use the virtual environment this script makes" >&2
        exit 1
    fi
    if [[ -e "$venv/bin/python" ]] && has_grpcio "$venv/bin/python" pinned; then
        return
    fi
    if ! command -v python3 >/dev/null 2>&1; then
        echo "python3 is missing: install Python 3 (Debian: apt-get install python3 python3-venv)" >&2
        exit 1
    fi
    if [[ ! -e "$venv/bin/python" ]]; then
        echo "making a virtual environment in $venv" >&2
        if ! python3 -m venv "$venv" >&2; then
            rm -rf "$venv"
            if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
                echo "python3 cannot make a virtual environment; install its venv module (Debian: sudo apt-get install python3-venv)" >&2
                exit 1
            fi
            # Debian's python3 leaves ensurepip to the python3-venv package.
            echo "installing Debian's python3-venv package" >&2
            apt-get update -qq >&2
            apt-get install -y -qq python3-venv >&2
            python3 -m venv "$venv" >&2
        fi
    fi
    echo "installing grpcio==$GRPCIO_VERSION grpcio-tools==$GRPCIO_TOOLS_VERSION into $venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        "grpcio==$GRPCIO_VERSION" "grpcio-tools==$GRPCIO_TOOLS_VERSION" >&2
    has_grpcio "$venv/bin/python" pinned || { echo "grpcio did not install" >&2; exit 1; }
    "$venv/bin/python" -c 'import grpc; print("grpcio", grpc.__version__)' >&2
}

case "${1:-}" in
    install) install ;;
    python)
        python="$(python_bin)"
        if ! has_grpcio "$python" range; then
            echo "$python has no grpcio 1.85.x with grpcio-tools: run \`.ci/grpcio.sh install\`" >&2
            exit 1
        fi
        echo "$python"
        ;;
    *)
        sed -n '2,/^set -euo/p' "$script" | sed '$d' >&2
        exit 2
        ;;
esac
