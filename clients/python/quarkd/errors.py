"""Errors of the quarkd client: every RPC failure is a QuarkdError carrying the gRPC code and the field it names."""
import re

import grpc

# quarkd's messages start with the field path they are about: "spec.model_uri: ...", "id: required".
_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?(?:\.[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?)*): ")


def field_of(message):
    """The field path a quarkd error message starts with ("spec.max_attempts"), or None."""
    match = _FIELD.match(message or "")
    return match.group(1) if match else None


class QuarkdError(Exception):
    """An RPC that quarkd (or the channel) refused.

    code: a grpc.StatusCode (INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, UNAUTHENTICATED, UNAVAILABLE, ...);
    details: quarkd's message; field: the request field it names ("spec.max_attempts"), or None.
    """

    def __init__(self, code, details, method=""):
        self.code = code
        self.details = details or ""
        self.field = field_of(self.details)
        self.method = method
        name = code.name if isinstance(code, grpc.StatusCode) else str(code)
        super().__init__(f"{method + ': ' if method else ''}{name}: {self.details}")

    @classmethod
    def from_rpc_error(cls, error, method=""):
        return cls(error.code(), error.details(), method)


class JobFailed(Exception):
    """Job.wait(raise_on_failure=True): the job ended FAILED or CANCELLED. job: the final quark.v1.Job."""

    def __init__(self, job):
        self.job = job
        state = job.state_name
        super().__init__(f"job {job.id} ended {state}" + (f": {job.error}" if job.error else ""))
