"""A Kubeflow Pipelines component that quantizes a model on quarkd (a sketch).

`quantize` is a plain function; with kfp installed it is also wrapped as a lightweight component
(`quantize_op`, kfp.dsl.component with the quarkd package installed in its image). Run as a container entrypoint
(or here, with plain Python) it writes the manifest URI to --manifest-uri-path, as a KFP output parameter:

    python kubeflow_component.py --server quarkd:50051 --model s3://models/m --preset fp8 \
        --output s3://quantized/m --manifest-uri-path /tmp/outputs/manifest_uri
"""
import argparse
import os


def quantize(server: str, model: str, preset: str, output: str, tls_ca: str = "", request_id: str = "",
             max_attempts: int = 0) -> str:
    """Submits the job, waits for it, returns the manifest URI; raises quarkd.JobFailed when it does not succeed.
    The token comes from $QUARK_TOKEN (mount it from a Kubernetes Secret)."""
    import quarkd  # inside the function: KFP lightweight components ship only the function's body

    with quarkd.Client(server, tls=tls_ca or None) as client:
        job = client.submit(model, preset=preset, output=output, request_id=request_id or None,
                            max_attempts=max_attempts or None)
        job.wait(progress=lambda p: print(f"{p.phase} {100 * p.fraction:.0f}% {p.message}", flush=True),
                 raise_on_failure=True)
        return job.manifest_uri


try:
    from kfp import dsl

    quantize_op = dsl.component(base_image="python:3.11", packages_to_install=["grpcio", "protobuf"])(quantize)
except ImportError:
    quantize_op = None  # kfp is not installed: the function and the entrypoint below still work


def main():
    parser = argparse.ArgumentParser(description="quarkd quantization as a Kubeflow component")
    parser.add_argument("--server", required=True)
    parser.add_argument("--tls-ca", default="")
    parser.add_argument("--model", required=True)
    parser.add_argument("--preset", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--request-id", default="")
    parser.add_argument("--max-attempts", type=int, default=0)
    parser.add_argument("--manifest-uri-path", required=True, help="where KFP collects the output parameter")
    args = parser.parse_args()
    manifest_uri = quantize(args.server, args.model, args.preset, args.output, args.tls_ca, args.request_id,
                            args.max_attempts)
    os.makedirs(os.path.dirname(os.path.abspath(args.manifest_uri_path)), exist_ok=True)
    with open(args.manifest_uri_path, "w") as f:
        f.write(manifest_uri)
    print(manifest_uri)


if __name__ == "__main__":
    main()
