"""An Airflow operator that quantizes a model on quarkd (a sketch to copy into a DAG folder).

With Airflow installed it is a real BaseOperator; without it (here) a minimal stand-in keeps the same shape, so
`python airflow_operator.py --server ... --model ... --preset ... --output ...` runs the operator once, as a task
would, and prints the manifest URI it pushes to XCom.

In a DAG:
    quantize = QuarkdQuantizeOperator(task_id="quantize", server="quarkd:50051", token_env="QUARK_TOKEN",
                                      tls_ca="/etc/quarkd/ca.pem", model="s3://models/llama-3-8b",
                                      preset="fp8", kv_cache_dtype="fp8", output="s3://quantized/llama-3-8b")
"""
import argparse
import logging
import os

import quarkd

try:
    from airflow.models import BaseOperator
except ImportError:  # plain Python: the parts of BaseOperator this operator uses
    class BaseOperator:
        template_fields = ()

        def __init__(self, task_id, **kwargs):
            self.task_id = task_id
            self.log = logging.getLogger(task_id)


class QuarkdQuantizeOperator(BaseOperator):
    """Submits a job, logs its progress, and returns the manifest URI (XCom); a FAILED or CANCELLED job fails the
    task (quarkd.JobFailed). Airflow's retries resubmit with the same request_id, so a retried task follows the
    job it already submitted instead of starting another."""

    template_fields = ("model", "output", "preset")

    def __init__(self, *, server, model, output, preset=None, config=None, token_env="QUARK_TOKEN", tls_ca=None,
                 timeout_s=None, submit_args=None, **kwargs):
        super().__init__(**kwargs)
        self.server, self.model, self.output, self.preset, self.config = server, model, output, preset, config
        self.token_env, self.tls_ca, self.timeout_s = token_env, tls_ca, timeout_s
        self.submit_args = dict(submit_args or {})

    def request_id(self, context):
        run_id = (context or {}).get("run_id", "manual")
        return f"airflow-{self.task_id}-{run_id}"

    def execute(self, context):
        with quarkd.Client(self.server, token=os.environ.get(self.token_env), tls=self.tls_ca) as client:
            job = client.submit(self.model, preset=self.preset, config=self.config, output=self.output,
                                request_id=self.request_id(context), **self.submit_args)
            self.log.info("quarkd job %s submitted", job.id)
            job.wait(progress=lambda p: self.log.info("%s %.0f%% %s", p.phase, 100 * p.fraction, p.message),
                     timeout=self.timeout_s, raise_on_failure=True)
            self.log.info("quarkd job %s succeeded: %s", job.id, job.manifest_uri)
            return job.manifest_uri


def main():
    parser = argparse.ArgumentParser(description="Run QuarkdQuantizeOperator once, as an Airflow task would")
    parser.add_argument("--server", required=True)
    parser.add_argument("--tls-ca")
    parser.add_argument("--model", required=True)
    parser.add_argument("--preset", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--run-id", default="manual")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
    operator = QuarkdQuantizeOperator(task_id="quantize", server=args.server, tls_ca=args.tls_ca, model=args.model,
                                      preset=args.preset, output=args.output, submit_args={"max_attempts": 1})
    print(operator.execute({"run_id": args.run_id}))


if __name__ == "__main__":
    main()
