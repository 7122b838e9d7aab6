"""A real convtuned for the Python tests: a child process on a temporary
socket and database, stopped with SIGTERM."""

import os
import shutil
import signal
import subprocess
import tempfile
import time

import convtune


class Daemon:
    def __init__(self, *extra_args, db_dir=None):
        self.dir = tempfile.mkdtemp(prefix="convtune-py-")
        self.socket = os.path.join(self.dir, "d.sock")
        self.db = db_dir or os.path.join(self.dir, "db")
        self.extra = list(extra_args)
        self.proc = None

    def start(self):
        binary = os.environ["CONVTUNED"]
        self.log = open(os.path.join(self.dir, "log"), "ab")
        self.proc = subprocess.Popen(
            [binary, "--socket", self.socket, "--db", self.db, "--backend",
             "cpu", "--log-rpcs", "off"] + self.extra,
            stdout=self.log, stderr=self.log)
        client = convtune.Client(self.socket, cache=False)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.status()
                break
            except convtune.ConvtuneError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("convtuned did not start:\n" + self.read_log())
                time.sleep(0.05)
        client.close()
        return self

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=20)
        self.proc = None
        if getattr(self, "log", None) is not None:
            self.log.close()
            self.log = None

    def read_log(self):
        with open(os.path.join(self.dir, "log"), errors="replace") as f:
            return f.read()

    def remove(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
