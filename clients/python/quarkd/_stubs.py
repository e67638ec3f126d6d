"""The generated gRPC stubs of proto/quark/v1 (protoc + grpc_python_plugin at build time).

They are found on sys.path as the package ``quark.v1``, or in the folder named by $QUARKD_PYTHON_STUBS (the build
writes them to <build>/clients/python/gen).
"""
import os
import sys

_folder = os.environ.get("QUARKD_PYTHON_STUBS")
if _folder and _folder not in sys.path:
    sys.path.insert(0, _folder)

try:
    from quark.v1 import config_pb2  # noqa: E402  (generated)
    from quark.v1 import service_pb2  # noqa: E402
    from quark.v1 import service_pb2_grpc  # noqa: E402
    from quark.v1 import provenance_pb2, provenance_pb2_grpc  # noqa: E402
except ImportError as error:  # pragma: no cover - reported to the user as is
    raise ImportError(
        "quarkd: the generated stubs (quark.v1.service_pb2) were not found: build the quarkd_python target "
        "(ninja quarkd_python) and set QUARKD_PYTHON_STUBS=<build>/clients/python/gen, or put them on sys.path"
    ) from error

__all__ = ["config_pb2", "service_pb2", "service_pb2_grpc", "provenance_pb2", "provenance_pb2_grpc"]
