"""Test support: a real quarkd on 127.0.0.1 (port 0) with TLS (certificates made by the openssl command) and a
tokens file, supervising one local worker (the real quark-worker, or quark-test-worker in a test mode)."""
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time

BINARY_DIR = os.environ.get("QUARK_BINARY_DIR", "")
SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SHARED_DIR = os.environ.get("QUARK_SHARED_DIR") or os.path.join(SOURCE_DIR, "..", "shared")
FIXTURES = os.path.abspath(os.path.join(SHARED_DIR, "fixtures"))

TOKENS = {"submitter": "qk_py_submitter_1", "viewer": "qk_py_viewer_2"}


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(folder):
    """ca.pem and server.pem/.key (CN localhost, SAN 127.0.0.1) in `folder`; ECDSA P-256."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-days", "2", "-subj", "/CN=py-ca", "-keyout", "ca.key", "-out", "ca.pem", cwd=folder)
    _openssl("req", *ec, "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr", cwd=folder)
    with open(os.path.join(folder, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-days", "2", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-extfile", "san.ext", "-out", "server.pem", cwd=folder)


def write_tokens(path):
    sha = lambda token: hashlib.sha256(token.encode()).hexdigest()  # noqa: E731
    tokens = [{"name": "py-ci", "sha256": sha(TOKENS["submitter"]), "tenant": "py", "role": "submitter"},
              {"name": "py-view", "sha256": sha(TOKENS["viewer"]), "tenant": "py", "role": "viewer"}]
    with open(path, "w") as f:
        json.dump({"tokens": tokens}, f)
    os.chmod(path, 0o600)


class Quarkd:
    """quarkd with TLS and tokens. test_mode: "" = the real quark-worker, else quark-test-worker --test-mode."""

    def __init__(self, test_mode="", extra_args=(), signing_key=False):
        self.dir = tempfile.mkdtemp(prefix="quarkd-py-")
        os.makedirs(os.path.join(self.dir, "out"))
        os.makedirs(os.path.join(self.dir, "models", "m"))
        make_certificates(self.dir)
        write_tokens(os.path.join(self.dir, "tokens.json"))
        self.ca = os.path.join(self.dir, "ca.pem")
        if signing_key:  # manifests signed by the workers (quarkd --signing-key)
            _openssl("genpkey", "-algorithm", "ed25519", "-out", "signing.pem", cwd=self.dir)
            extra_args = (*extra_args, "--signing-key", os.path.join(self.dir, "signing.pem"))
        roots = f"{self.dir},{FIXTURES}"
        worker = "worker/quark-worker" if not test_mode else "tests/worker/quark-test-worker"
        ready = os.path.join(self.dir, "ready.json")
        argv = [os.path.join(BINARY_DIR, "server/quarkd"), "--data-dir", os.path.join(self.dir, "data"),
                "--listen", "127.0.0.1:0", "--metrics-listen", "", "--workers", "1",
                "--worker-binary", os.path.join(BINARY_DIR, worker), "--worker-arg=--lease-wait-ms=1000",
                f"--worker-arg=--data-dir={os.path.join(self.dir, 'worker')}", f"--worker-arg=--allowed-roots={roots}",
                "--allowed-roots", roots, "--heartbeat-interval-ms", "200", "--ready-file", ready,
                "--tls-cert", os.path.join(self.dir, "server.pem"), "--tls-key", os.path.join(self.dir, "server.key"),
                "--tokens-file", os.path.join(self.dir, "tokens.json"), *extra_args]
        if test_mode:
            argv.append(f"--worker-arg=--test-mode={test_mode}")
        self._log = open(os.path.join(self.dir, "quarkd.log"), "wb")
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not os.path.exists(ready):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("quarkd did not start:\n" + self.log())
            time.sleep(0.05)
        time.sleep(0.05)  # the ready file is written whole, but give the writer its close
        with open(ready) as f:
            self.port = json.load(f)["grpc_port"]
        self.address = f"127.0.0.1:{self.port}"

    def log(self):
        with open(os.path.join(self.dir, "quarkd.log"), errors="replace") as f:
            return f.read()

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
