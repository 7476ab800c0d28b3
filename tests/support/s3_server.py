"""A real S3-compatible server on 127.0.0.1: moto's standalone server, one per session.

Started as a subprocess on a free port, stopped (by its pid) when the session ends and
never left running longer than ``LIFETIME_S``. Tests that use it get fake credentials and
``AWS_ENDPOINT_URL`` pointing at it, the way a user would point any AWS tool at MinIO.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

LIFETIME_S = 900


@dataclass
class S3Server:
    endpoint: str
    bucket_counter: int = 0

    def new_bucket(self) -> str:
        """A fresh bucket, created on the server."""
        import fsspec

        self.bucket_counter += 1
        name = f"ctx-test-{os.getpid()}-{secrets.token_hex(4)}"
        fsspec.filesystem("s3", skip_instance_cache=True).mkdir(name)
        return name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def _moto() -> Iterator[str]:
    if importlib.util.find_spec("moto") is None or importlib.util.find_spec("s3fs") is None:
        pytest.skip("moto[server] and s3fs are not installed (pip install -e '.[s3test]')")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # A bounded lifetime even if the session is killed before its teardown.
    timer = threading.Timer(LIFETIME_S, lambda: proc.poll() is None and proc.kill())
    timer.daemon = True
    timer.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail("moto server exited at start-up")
                time.sleep(0.05)
        yield endpoint
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def s3(_moto: str, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The loopback S3 server, with this test's environment pointing at it."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", _moto)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    return S3Server(_moto)
