"""clients/python/examples run with plain Python against a real quarkd (TLS + token, the real quark-worker)."""
import os
import subprocess
import sys
import unittest

from tests.quarkd_process import FIXTURES, TOKENS, Quarkd

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


class ExamplesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Quarkd()

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()

    def run_example(self, name, *args):
        env = dict(os.environ, QUARK_TOKEN=TOKENS["submitter"])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.dirname(EXAMPLES), env.get("PYTHONPATH")]))
        return subprocess.run([sys.executable, os.path.join(EXAMPLES, name), "--server", self.server.address,
                               "--tls-ca", self.server.ca, "--model", f"file://{FIXTURES}/stories260K",
                               "--preset", "ptpc_fp8", *args], env=env, capture_output=True, text=True, timeout=240)

    def test_airflow_operator_returns_the_manifest_and_a_retry_follows_the_same_job(self):
        output = f"file://{self.server.dir}/out/airflow"
        first = self.run_example("airflow_operator.py", "--output", output, "--run-id", "run-1")
        self.assertEqual(first.returncode, 0, first.stderr + self.server.log())
        manifest = first.stdout.strip().splitlines()[-1]
        self.assertTrue(manifest.startswith(output + "/job-") and manifest.endswith("/manifest.json"), manifest)
        self.assertIn("succeeded", first.stderr)
        retried = self.run_example("airflow_operator.py", "--output", output, "--run-id", "run-1")
        self.assertEqual(retried.returncode, 0, retried.stderr)
        self.assertEqual(retried.stdout.strip().splitlines()[-1], manifest, "the same request_id, the same job")

    def test_kubeflow_component_writes_its_output_parameter(self):
        path = os.path.join(self.server.dir, "kfp", "manifest_uri")
        done = self.run_example("kubeflow_component.py", "--output", f"file://{self.server.dir}/out/kfp",
                                "--manifest-uri-path", path, "--max-attempts", "1")
        self.assertEqual(done.returncode, 0, done.stderr + done.stdout + self.server.log())
        with open(path) as f:
            manifest = f.read()
        self.assertTrue(manifest.endswith("/manifest.json"), manifest)
        self.assertTrue(os.path.exists(manifest[len("file://"):]), manifest)

    def test_kubeflow_component_fails_on_a_failed_job(self):
        done = self.run_example("kubeflow_component.py", "--output", f"file://{self.server.dir}/out/kfp",
                                "--model", f"file://{self.server.dir}/models/m", "--max-attempts", "1",
                                "--manifest-uri-path", os.path.join(self.server.dir, "kfp", "never"))
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("JobFailed", done.stderr)
