"""python -m quarkd: quarkctl's commands (submit, get, list, watch, cancel, delete, presets) on the Python client.

Exit codes as quarkctl: 0 ok / job succeeded, 1 job failed, 2 bad arguments, 3 job cancelled, 4 quarkd refused
the call or is unreachable (the gRPC code and message are printed).
"""
import argparse
import json
import sys

from google.protobuf import json_format

from .client import Client
from .errors import QuarkdError
from .spec import parse_labels
from ._stubs import service_pb2

EXIT_OK, EXIT_JOB_FAILED, EXIT_USAGE, EXIT_CANCELLED, EXIT_RPC_ERROR = 0, 1, 2, 3, 4


def _parser():
    parser = argparse.ArgumentParser(prog="python -m quarkd", description="quarkd's Python client (as quarkctl)")
    parser.add_argument("--server", help="quarkd address HOST:PORT (default $QUARK_SERVER or localhost:50051)")
    parser.add_argument("--token", help="bearer token (default $QUARK_TOKEN)")
    parser.add_argument("--tls-ca", help="PEM CAs of quarkd's certificate: connect with TLS")
    parser.add_argument("--tls-cert", help="PEM client certificate (mutual TLS)")
    parser.add_argument("--tls-key", help="PEM key of --tls-cert")
    parser.add_argument("-o", "--output-format", choices=("table", "json"), default="table")
    parser.add_argument("--timeout", type=float, default=30.0, help="deadline of each unary call, seconds")
    commands = parser.add_subparsers(dest="command", required=True)

    submit = commands.add_parser("submit", help="submit a quantization job")
    submit.add_argument("-f", "--job-file", help="job file: quark.v1.JobSpec in JSON (or YAML with PyYAML)")
    submit.add_argument("--model", help="model folder URI (file:// or s3://)")
    submit.add_argument("--scheme", help="preset name (presets)")
    submit.add_argument("--config", help="config file: quark.v1.Config in JSON (or YAML with PyYAML)")
    submit.add_argument("--kv-cache-dtype", help="KV-cache quantization: fp8 or int8")
    submit.add_argument("--exclude", action="append", default=[], help="module to leave in float (repeatable)")
    submit.add_argument("--calib", help="calibration text URI")
    submit.add_argument("--num-calib-samples", type=int)
    submit.add_argument("--seq-len", type=int)
    submit.add_argument("--seed", type=int)
    submit.add_argument("--eval", help="perplexity evaluation text URI")
    submit.add_argument("--output", help="output prefix URI; artifacts land under OUTPUT/<job id>/")
    submit.add_argument("--label", action="append", default=[], help="KEY=VALUE (repeatable)")
    submit.add_argument("--export", action="append", default=[], help="hf_quark, gguf, onnx (repeatable)")
    submit.add_argument("--gguf-type", help="GGUF type of the float weights: F32 F16 BF16 Q8_0 Q4_0 Q4_1")
    submit.add_argument("--max-ppl-increase", type=float, help="accuracy gate, e.g. 0.02 = +2%%")
    submit.add_argument("--quant-algo", default="", help="algorithms in order, comma-separated (e.g. gptq)")
    submit.add_argument("--priority", type=int)
    submit.add_argument("--max-attempts", type=int)
    submit.add_argument("--deadline", type=int, help="stop the job this many seconds after submission")
    submit.add_argument("--force", action="store_true", help="run even when an identical job succeeded")
    submit.add_argument("--request-id", help="idempotency key")
    submit.add_argument("--wait", action="store_true", help="follow progress; exit code by the final state")

    commands.add_parser("get", help="show one job").add_argument("id")
    listing = commands.add_parser("list", help="list jobs")
    listing.add_argument("--state", action="append", default=[])
    listing.add_argument("--label", action="append", default=[])
    listing.add_argument("--page-size", type=int)
    watch = commands.add_parser("watch", help="follow a job's events until it ends")
    watch.add_argument("id")
    watch.add_argument("--after", type=int, default=0)
    commands.add_parser("cancel", help="cancel a queued or running job").add_argument("id")
    commands.add_parser("delete", help="delete a finished job from the store (its artifacts stay)").add_argument("id")
    commands.add_parser("presets", help="list the presets")
    return parser


def _load_document(flag, path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as error:
        raise ValueError(f"{flag}: cannot read {path}: {error.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        import yaml
    except ImportError:
        raise ValueError(f"{flag}: {path} is not JSON (YAML needs PyYAML: python3-yaml)") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(f"{flag}: {path}: {error}") from None
    if not isinstance(document, dict):
        raise ValueError(f"{flag}: {path} is not a mapping")
    return document


def _submit_kwargs(args):
    return dict(
        spec=_load_document("--job-file", args.job_file) if args.job_file else None,
        preset=args.scheme, config=_load_document("--config", args.config) if args.config else None,
        kv_cache_dtype=args.kv_cache_dtype, exclude=args.exclude, calib=args.calib,
        num_calib_samples=args.num_calib_samples, seq_len=args.seq_len, seed=args.seed, eval=args.eval,
        output=args.output, exports=args.export, labels=parse_labels(args.label, "--label"), gguf_type=args.gguf_type,
        max_ppl_increase=args.max_ppl_increase, quant_algo=args.quant_algo, priority=args.priority,
        max_attempts=args.max_attempts, deadline_seconds=args.deadline, force=args.force)


def _print_job(job, fmt, out):
    if fmt == "json":
        out.write(json_format.MessageToJson(job.proto, indent=None, preserving_proto_field_name=True) + "\n")
        return
    out.write(f"id:        {job.id}\nstate:     {job.state_name}\n")
    out.write(f"model:     {job.proto.spec.model_uri}\n")
    if job.error:
        out.write(f"error:     {job.error}\n")
    if job.manifest_uri:
        out.write(f"manifest:  {job.manifest_uri}\n")
    for artifact in job.artifacts:
        out.write(f"artifact:  {artifact.uri} ({artifact.size_bytes} bytes, sha256 {artifact.sha256})\n")
    for name, value in sorted(job.metrics.items()):
        out.write(f"metric:    {name} = {value:g}\n")


def _exit_code(job):
    return {service_pb2.JOB_STATE_FAILED: EXIT_JOB_FAILED,
            service_pb2.JOB_STATE_CANCELLED: EXIT_CANCELLED}.get(job.state, EXIT_OK)


def _progress_printer(err):
    def show(progress):
        err.write(f"{progress.phase:10s} {100 * progress.fraction:5.1f}%  layer {progress.layer}/{progress.num_layers}"
                  f"  {progress.message}\n")
    return show


def _run(args, client, out, err):
    if args.command == "submit":
        job = client.submit(request_id=args.request_id, **{"model": args.model, **_submit_kwargs(args)})
        if args.wait:
            job.wait(progress=_progress_printer(err))
        _print_job(job, args.output_format, out)
        return _exit_code(job) if args.wait else EXIT_OK
    if args.command == "get":
        _print_job(client.get(args.id), args.output_format, out)
        return EXIT_OK
    if args.command == "list":
        jobs = client.list(states=args.state, labels=parse_labels(args.label, "--label"), page_size=args.page_size)
        for job in jobs:
            if args.output_format == "json":
                _print_job(job, "json", out)
            else:
                out.write(f"{job.id}  {job.state_name:10s}  {job.proto.spec.model_uri}\n")
        return EXIT_OK
    if args.command == "watch":
        for event in client.watch(args.id, args.after):
            kind = event.WhichOneof("event")
            detail = getattr(event, kind) if kind else ""
            if kind == "state":
                detail = service_pb2.JobState.Name(event.state)
            elif kind == "progress":
                detail = f"{event.progress.phase} {100 * event.progress.fraction:.1f}% {event.progress.message}"
            out.write(f"#{event.sequence} {kind}: {detail}\n")
        job = client.get(args.id)
        if args.output_format == "json":
            _print_job(job, "json", out)
        return _exit_code(job)
    if args.command == "cancel":
        _print_job(client.cancel(args.id), args.output_format, out)
        return EXIT_OK
    if args.command == "delete":
        freed = client.delete(args.id)
        if args.output_format == "json":
            reply = service_pb2.DeleteJobResponse(id=args.id, freed_bytes=freed)  # as quarkctl -o json prints it
            out.write(json_format.MessageToJson(reply, indent=None, preserving_proto_field_name=True) + "\n")
        else:
            out.write(f"deleted {args.id} ({freed} bytes freed)\n")
        return EXIT_OK
    for preset in client.presets():  # presets
        out.write(f"{preset.name:24s} {'(legacy) ' if preset.legacy else ''}{preset.description}\n")
    return EXIT_OK


def main(argv=None, out=sys.stdout, err=sys.stderr):
    args = _parser().parse_args(argv)
    tls = None
    if args.tls_ca or args.tls_cert or args.tls_key:
        from .client import Tls
        try:
            tls = Tls(args.tls_ca, args.tls_cert, args.tls_key)
        except ValueError as error:
            err.write(f"error: {error}\n")
            return EXIT_USAGE
    try:
        with Client(args.server, token=args.token, tls=tls, timeout=args.timeout) as client:
            return _run(args, client, out, err)
    except ValueError as error:
        err.write(f"error: {error}\n")
        return EXIT_USAGE
    except QuarkdError as error:
        err.write(f"error: {error}\n")
        return EXIT_RPC_ERROR
