"""Generates the Python messages and stubs of proto/interop.proto into a temporary directory
with grpcio-tools' bundled protoc (nothing committed, nothing installed), and imports them."""

import importlib
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(HERE, "..", "proto")


def load():
    """Returns (interop_pb2, interop_pb2_grpc)."""
    from grpc_tools import protoc

    out = tempfile.mkdtemp(prefix="retry-grpc-interop-")
    status = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{PROTO_DIR}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            os.path.join(PROTO_DIR, "interop.proto"),
        ]
    )
    if status != 0:
        raise SystemExit(f"protoc failed with status {status}")
    sys.path.insert(0, out)
    return importlib.import_module("interop_pb2"), importlib.import_module("interop_pb2_grpc")
