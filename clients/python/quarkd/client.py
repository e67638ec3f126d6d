"""The typed API: Client (one channel to quarkd) and Job (a submitted job you can wait on, watch, cancel and delete)."""
import os
import time
import uuid

import grpc

from ._stubs import provenance_pb2, provenance_pb2_grpc, service_pb2, service_pb2_grpc
from .errors import JobFailed, QuarkdError
from .spec import build_spec, job_state

TERMINAL_STATES = (service_pb2.JOB_STATE_SUCCEEDED, service_pb2.JOB_STATE_FAILED, service_pb2.JOB_STATE_CANCELLED)


class Tls:
    """TLS settings: ca_file (PEM CAs of quarkd's certificate; None = the system roots) and, for mutual TLS, the
    client's cert_file and key_file."""

    def __init__(self, ca_file=None, cert_file=None, key_file=None):
        if bool(cert_file) != bool(key_file):
            raise ValueError("tls: cert_file and key_file go together")
        self.ca_file, self.cert_file, self.key_file = ca_file, cert_file, key_file

    def credentials(self):
        def read(name, path):
            if not path:
                return None
            try:
                with open(path, "rb") as f:
                    return f.read()
            except OSError as error:
                raise ValueError(f"tls.{name}: cannot read {path}: {error.strerror}") from None
        return grpc.ssl_channel_credentials(root_certificates=read("ca_file", self.ca_file),
                                            private_key=read("key_file", self.key_file),
                                            certificate_chain=read("cert_file", self.cert_file))


def _tls_of(tls):
    if tls is None or tls is False:
        return None
    if tls is True:
        return Tls()
    if isinstance(tls, str):
        return Tls(ca_file=tls)
    if isinstance(tls, Tls):
        return tls
    raise ValueError(f"tls: expected None, True, a CA file path or a Tls, not {type(tls).__name__}")


class Job:
    """A job as quarkd last reported it (`proto`, a quark.v1.Job), bound to the client that fetched it."""

    def __init__(self, client, proto):
        self._client = client
        self.proto = proto

    id = property(lambda self: self.proto.id)
    state = property(lambda self: self.proto.state)
    error = property(lambda self: self.proto.error)
    tenant = property(lambda self: self.proto.tenant)
    progress = property(lambda self: self.proto.progress)
    artifacts = property(lambda self: list(self.proto.result.artifacts))
    manifest_uri = property(lambda self: self.proto.result.manifest_uri)
    metrics = property(lambda self: dict(self.proto.result.metrics))

    @property
    def state_name(self):
        """"QUEUED", "RUNNING", "SUCCEEDED", "FAILED" or "CANCELLED"."""
        return service_pb2.JobState.Name(self.proto.state).replace("JOB_STATE_", "")

    @property
    def done(self):
        return self.proto.state in TERMINAL_STATES

    def refresh(self):
        self.proto = self._client.get(self.id).proto
        return self

    def watch(self, after_sequence=0):
        """The job's events (quark.v1.JobEvent) from after_sequence on, until the job ends."""
        return self._client.watch(self.id, after_sequence)

    def wait(self, progress=None, timeout=None, raise_on_failure=False):
        """Follows the job to its end and returns self (refreshed). `progress(quark.v1.Progress)` is called for every
        progress event. A dropped stream is resumed after the last event seen. timeout: seconds, then TimeoutError.
        raise_on_failure: a FAILED or CANCELLED job raises JobFailed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        after = 0
        while not self.done:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"job {self.id} still {self.state_name} after {timeout} s")
            try:
                for event in self._client.watch(self.id, after, timeout=remaining):
                    after = event.sequence
                    if event.HasField("progress") and progress is not None:
                        progress(event.progress)
                    if event.HasField("job"):
                        self.proto = event.job
                    if event.WhichOneof("event") == "state" and event.state in TERMINAL_STATES:
                        break
            except QuarkdError as error:
                if error.code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    continue  # the loop's own deadline check reports it
                if error.code != grpc.StatusCode.UNAVAILABLE:
                    raise
                time.sleep(0.5)  # quarkd restarting: resume after the last event
            self.refresh()
        if raise_on_failure and self.state != service_pb2.JOB_STATE_SUCCEEDED:
            raise JobFailed(self)
        return self

    def cancel(self):
        self.proto = self._client.cancel(self.id).proto
        return self

    def delete(self):
        """Deletes this finished job from quarkd's store (Client.delete); returns the bytes freed."""
        return self._client.delete(self.id)

    def __repr__(self):
        return f"Job(id={self.id!r}, state={self.state_name})"


class Client:
    """A connection to quarkd.

    address: HOST:PORT (default $QUARK_SERVER or localhost:50051); token: bearer token (default $QUARK_TOKEN);
    tls: None (plaintext), True (system roots), a CA file path, or a Tls; timeout: seconds for each unary call.
    Every refused call raises QuarkdError (its .code and .field).
    """

    def __init__(self, address=None, token=None, tls=None, timeout=30.0):
        self.address = address or os.environ.get("QUARK_SERVER") or "localhost:50051"
        self._token = token if token is not None else os.environ.get("QUARK_TOKEN") or None
        self.timeout = timeout
        tls = _tls_of(tls)
        if tls is None:
            self._channel = grpc.insecure_channel(self.address)
        else:
            self._channel = grpc.secure_channel(self.address, tls.credentials())
        self._stub = service_pb2_grpc.QuantizationServiceStub(self._channel)
        self._provenance = provenance_pb2_grpc.ProvenanceServiceStub(self._channel)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _metadata(self):
        return (("authorization", f"Bearer {self._token}"),) if self._token else ()

    def _call(self, method, request, stub=None):
        try:
            return getattr(stub or self._stub, method)(request, timeout=self.timeout, metadata=self._metadata())
        except grpc.RpcError as error:
            raise QuarkdError.from_rpc_error(error, method) from None

    def submit(self, model=None, *, request_id=None, **kwargs):
        """Submits a job; returns its Job. The arguments are quarkctl submit's flags (see spec.build_spec):
        model, preset or config, kv_cache_dtype, exclude, calib, num_calib_samples, seq_len, seed, eval, output,
        exports, labels, gguf_type, max_ppl_increase, quant_algo, priority, max_attempts, deadline_seconds, force,
        resources, spec. request_id: the idempotency key (a fresh one by default)."""
        request = service_pb2.SubmitJobRequest(request_id=request_id or f"py-{uuid.uuid4()}",
                                               spec=build_spec(model, **kwargs))
        return Job(self, self._call("SubmitJob", request))

    def get(self, job_id):
        return Job(self, self._call("GetJob", service_pb2.GetJobRequest(id=job_id)))

    def cancel(self, job_id):
        return Job(self, self._call("CancelJob", service_pb2.CancelJobRequest(id=job_id)))

    def delete(self, job_id):
        """DeleteJob: a finished (succeeded, failed or cancelled) job of the caller's tenant (admins: any) leaves the
        store with its events, freeing its bytes from the tenant's storage quota; its artifacts stay. Returns the
        bytes freed. QuarkdError FAILED_PRECONDITION for a queued or running job (cancel it first), NOT_FOUND for a
        missing job or another tenant's, PERMISSION_DENIED for a viewer."""
        return self._call("DeleteJob", service_pb2.DeleteJobRequest(id=job_id)).freed_bytes

    def list(self, states=(), labels=None, page_size=None, all_pages=True):
        """Jobs (newest first as quarkd lists them); states: names or JobState values; labels: every one must
        match. all_pages follows next_page_token to the end."""
        request = service_pb2.ListJobsRequest(
            states=[s if isinstance(s, int) else job_state(s) for s in states], labels=labels or {},
            page_size=page_size or 0)
        jobs = []
        while True:
            response = self._call("ListJobs", request)
            jobs.extend(Job(self, j) for j in response.jobs)
            if not all_pages or not response.next_page_token:
                return jobs
            request.page_token = response.next_page_token

    def watch(self, job_id, after_sequence=0, timeout=None):
        """Yields the job's events (quark.v1.JobEvent) until it ends; timeout bounds the whole stream (seconds)."""
        request = service_pb2.WatchJobRequest(id=job_id, after_sequence=after_sequence)
        stream = self._stub.WatchJob(request, timeout=timeout, metadata=self._metadata())
        try:
            for event in stream:
                yield event
                if event.WhichOneof("event") == "state" and event.state in TERMINAL_STATES:
                    return
        except grpc.RpcError as error:
            raise QuarkdError.from_rpc_error(error, "WatchJob") from None
        finally:
            stream.cancel()

    def presets(self):
        """quark.v1.Preset messages: every scheme quarkd knows."""
        return list(self._call("ListPresets", service_pb2.ListPresetsRequest()).presets)

    def validate(self, model=None, *, preset=None, kv_cache_dtype=None, exclude=()):
        """ValidateConfig (a dry run): the quark.v1.ValidateConfigResponse."""
        request = service_pb2.ValidateConfigRequest(model_uri=model or "", kv_cache_dtype=kv_cache_dtype or "",
                                                    exclude=list(exclude))
        if preset:
            request.preset = preset
        return self._call("ValidateConfig", request)

    def signing_key(self):
        """The quark.v1.SigningKey quarkd's workers sign manifest.json with (key_id, public_key base64, PEM);
        QuarkdError NOT_FOUND when quarkd signs nothing. `quarkctl verify` checks manifests against it."""
        return self._call("GetSigningKey", provenance_pb2.GetSigningKeyRequest(), stub=self._provenance)
