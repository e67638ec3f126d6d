"""The Python client against a real quarkd on loopback with TLS and bearer tokens."""
import hashlib
import io
import json
import os
import time
import unittest
from urllib.parse import urlparse

import grpc

import quarkd
from quarkd import cli
from tests.quarkd_process import FIXTURES, TOKENS, Quarkd


def tiny_job(server):
    """stories260K, uint4 weight-only, perplexity on two short windows: seconds on one CPU worker."""
    return dict(model=f"file://{FIXTURES}/stories260K", preset="ptpc_fp8", output=f"file://{server.dir}/out",
                eval=f"file://{FIXTURES}/eval/tinystories_heldout_split.txt", labels={"client": "python"},
                max_attempts=1, spec={"evaluation": {"seq_len": 64, "max_windows": 4}})


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class RealWorkerTest(unittest.TestCase):
    """One quarkd with the real quark-worker: a tiny job end to end, the refusals, the CLI."""

    @classmethod
    def setUpClass(cls):
        cls.server = Quarkd(signing_key=True)

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def client(self, token=TOKENS["submitter"]):
        return quarkd.Client(self.server.address, token=token, tls=self.server.ca)

    def test_tiny_job_end_to_end(self):
        with self.client() as client:
            job = client.submit(**tiny_job(self.server), force=True)  # not deduplicated from the CLI test's job
            self.assertEqual(job.tenant, "py")
            phases = []
            job.wait(progress=lambda p: phases.append(p.phase), timeout=240)
            self.assertEqual(job.state_name, "SUCCEEDED", job.error + self.server.log())
            self.assertIn("quantize", phases)
            self.assertIn("ppl_after", job.metrics)
            self.assertTrue(job.manifest_uri.startswith(f"file://{self.server.dir}/out/{job.id}/"), job.manifest_uri)
            self.assertTrue(job.artifacts)
            for artifact in job.artifacts:  # what quarkd reports is what is on disk
                self.assertEqual(sha256_of(urlparse(artifact.uri).path), artifact.sha256, artifact.uri)
            listed = [j.id for j in client.list(states=["succeeded"], labels={"client": "python"})]
            self.assertIn(job.id, listed)
            self.assertEqual(client.get(job.id).proto.spec.labels["client"], "python")
            # Signed provenance: the manifest names the key quarkd serves.
            key = client.signing_key()
            self.assertEqual(key.algorithm, "ed25519")
            with open(urlparse(job.manifest_uri).path) as f:
                self.assertEqual(json.load(f)["signature"]["key_id"], key.key_id)

    def test_refused_submit_names_the_field(self):
        with self.client() as client:
            with self.assertRaises(quarkd.QuarkdError) as refused:
                client.submit(**{**tiny_job(self.server), "deadline_seconds": 10**12})
            self.assertEqual(refused.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertEqual(refused.exception.field, "spec.deadline_seconds", refused.exception.details)
            with self.assertRaises(quarkd.QuarkdError) as missing:
                client.get("no-such-job")
            self.assertEqual(missing.exception.code, grpc.StatusCode.NOT_FOUND)
        # Refused before anything is sent: the argument is named.
        with self.assertRaisesRegex(ValueError, '^exports: "safetensors" is not one of'):
            quarkd.build_spec("file:///m", preset="fp8", exports=["safetensors"])
        with self.assertRaisesRegex(ValueError, "^max_attempts: 0 is not an integer >= 1"):
            quarkd.build_spec("file:///m", preset="fp8", max_attempts=0)
        with self.assertRaisesRegex(ValueError, "^config: not JSON"):
            quarkd.build_spec("file:///m", config="{global_quant_config")
        with self.assertRaisesRegex(ValueError, "^labels: \"novalue\" is not KEY=VALUE"):
            quarkd.build_spec("file:///m", preset="fp8", labels=["novalue"])

    def test_tokens_and_tls_are_enforced(self):
        with self.client(token="") as anonymous:
            with self.assertRaises(quarkd.QuarkdError) as refused:
                anonymous.presets()
            self.assertEqual(refused.exception.code, grpc.StatusCode.UNAUTHENTICATED)
        with self.client(token=TOKENS["viewer"]) as viewer:
            self.assertTrue(viewer.presets())
            with self.assertRaises(quarkd.QuarkdError) as refused:
                viewer.submit(**tiny_job(self.server))
            self.assertEqual(refused.exception.code, grpc.StatusCode.PERMISSION_DENIED)
        with quarkd.Client(self.server.address, token=TOKENS["submitter"], timeout=5) as plaintext:
            with self.assertRaises(quarkd.QuarkdError) as refused:
                plaintext.presets()
            self.assertEqual(refused.exception.code, grpc.StatusCode.UNAVAILABLE)

    def run_cli(self, *args):
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(["--server", self.server.address, "--tls-ca", self.server.ca, "--token",
                         TOKENS["submitter"], *args], out=out, err=err)
        return code, out.getvalue(), err.getvalue()

    def test_cli_mirrors_quarkctl(self):
        job = tiny_job(self.server)
        code, out, err = self.run_cli("-o", "json", "submit", "--model", job["model"], "--scheme", job["preset"],
                                      "--output", job["output"], "--label", "via=cli",
                                      "--max-attempts", "1", "--wait")
        self.assertEqual(code, 0, out + err + self.server.log())
        final = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(final["state"], "JOB_STATE_SUCCEEDED")
        self.assertEqual(final["spec"]["labels"], {"via": "cli"})
        code, out, err = self.run_cli("get", final["id"])
        self.assertEqual(code, 0, err)
        self.assertIn("state:     SUCCEEDED", out)
        code, out, err = self.run_cli("submit", "--model", job["model"], "--scheme", "fp8", "--output",
                                      job["output"], "--deadline", str(10**12))
        self.assertEqual(code, cli.EXIT_RPC_ERROR, out + err)
        self.assertIn("INVALID_ARGUMENT: spec.deadline_seconds:", err)
        code, out, err = self.run_cli("submit", "--model", job["model"], "--label", "novalue")
        self.assertEqual(code, cli.EXIT_USAGE)
        self.assertIn('--label: "novalue" is not KEY=VALUE', err)


class CancelTest(unittest.TestCase):
    """A sleeping test worker holds the job while it is cancelled."""

    @classmethod
    def setUpClass(cls):
        cls.server = Quarkd(test_mode="sleep:60")

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def test_cancel_a_running_job(self):
        with quarkd.Client(self.server.address, token=TOKENS["submitter"], tls=self.server.ca) as client:
            job = client.submit(f"file://{self.server.dir}/models/m", preset="fp8",
                                output=f"file://{self.server.dir}/out")
            deadline = time.monotonic() + 30
            while job.refresh().state_name != "RUNNING" and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertEqual(job.state_name, "RUNNING", self.server.log())
            job.cancel()
            with self.assertRaises(quarkd.JobFailed) as failed:
                job.wait(timeout=60, raise_on_failure=True)
            self.assertEqual(failed.exception.job.state_name, "CANCELLED")
            events = list(client.watch(job.id))
            self.assertEqual(events[-1].state, quarkd.service_pb2.JOB_STATE_CANCELLED)
            with self.assertRaises(quarkd.QuarkdError) as unsigned:
                client.signing_key()
            self.assertEqual(unsigned.exception.code, grpc.StatusCode.NOT_FOUND)
            self.assertIn("started without --signing-key", unsigned.exception.details)

    def test_delete_only_a_finished_job_of_ones_tenant(self):
        with quarkd.Client(self.server.address, token=TOKENS["submitter"], tls=self.server.ca) as client:
            job = client.submit(f"file://{self.server.dir}/models/m", preset="fp8",
                                output=f"file://{self.server.dir}/out", labels={"test": "delete"})
            with self.assertRaises(quarkd.QuarkdError) as unfinished:
                job.delete()
            self.assertEqual(unfinished.exception.code, grpc.StatusCode.FAILED_PRECONDITION)
            self.assertIn("only a finished job can be deleted", unfinished.exception.details)
            job.cancel()
            job.wait(timeout=60)
            self.assertEqual(job.state_name, "CANCELLED", self.server.log())
            with quarkd.Client(self.server.address, token=TOKENS["viewer"], tls=self.server.ca) as viewer:
                with self.assertRaises(quarkd.QuarkdError) as refused:
                    viewer.delete(job.id)
                self.assertEqual(refused.exception.code, grpc.StatusCode.PERMISSION_DENIED)
            freed = job.delete()
            self.assertGreater(freed, len(job.proto.SerializeToString()))  # the row and its events
            with self.assertRaises(quarkd.QuarkdError) as gone:
                client.get(job.id)
            self.assertEqual(gone.exception.code, grpc.StatusCode.NOT_FOUND)
            with self.assertRaises(quarkd.QuarkdError) as again:
                client.delete(job.id)
            self.assertEqual(again.exception.code, grpc.StatusCode.NOT_FOUND)
            self.assertNotIn(job.id, [j.id for j in client.list(labels={"test": "delete"})])

            # The CLI, as quarkctl delete: text, JSON, and the refusal's exit code.
            second = client.submit(f"file://{self.server.dir}/models/m", preset="fp8",
                                   output=f"file://{self.server.dir}/out").cancel()
            second.wait(timeout=60)
            base = ["--server", self.server.address, "--tls-ca", self.server.ca, "--token", TOKENS["submitter"]]
            out, err = io.StringIO(), io.StringIO()
            self.assertEqual(cli.main([*base, "-o", "json", "delete", second.id], out=out, err=err), cli.EXIT_OK,
                             err.getvalue())
            reply = json.loads(out.getvalue())
            self.assertEqual(reply["id"], second.id)
            self.assertGreater(int(reply["freed_bytes"]), 0)
            out, err = io.StringIO(), io.StringIO()
            self.assertEqual(cli.main([*base, "delete", second.id], out=out, err=err), cli.EXIT_RPC_ERROR)
            self.assertIn("NOT_FOUND", err.getvalue())


if __name__ == "__main__":
    unittest.main()
