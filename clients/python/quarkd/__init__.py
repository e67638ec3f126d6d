"""quarkd's Python client: submit quantization jobs to quarkd, follow them, cancel them.

    import quarkd
    with quarkd.Client("quarkd.example:50051", token=TOKEN, tls="ca.pem") as client:
        job = client.submit("s3://models/llama", preset="fp8", output="s3://out/q")
        job.wait(progress=lambda p: print(p.phase, p.fraction))
        print(job.state_name, job.manifest_uri)
"""
from .client import Client, Job, Tls, TERMINAL_STATES
from .errors import JobFailed, QuarkdError
from .spec import build_spec
from ._stubs import config_pb2, service_pb2

__all__ = ["Client", "Job", "Tls", "TERMINAL_STATES", "JobFailed", "QuarkdError", "build_spec", "config_pb2",
           "service_pb2"]
