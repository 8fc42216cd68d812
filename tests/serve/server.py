"""`tvmrt serve` on the MLC-LLM fixture for the end-to-end tests (test_serve.py, test_lm_eval.py):
started on 127.0.0.1 on a free port, stopped by its process id. Standard library only, so that
each test's own venv can import it.
"""

import http.client
import json
import os
import re
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "fixtures", "mlc", "model")
LIB = os.path.join(MODEL, "lib.so")
KEY = "test-key"


class Server:
    def __init__(self, binary, *extra, model=MODEL):
        self.proc = subprocess.Popen(
            [binary, "serve", model, "--model-lib", os.path.join(model, "lib.so"),
             "--host", "127.0.0.1", "--port", "0", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.match(r"listening on http://([\d.]+):(\d+)", line)
        if not m:
            self.proc.kill()
            raise SystemExit(f"the server did not start: {line!r} {self.proc.stderr.read()}")
        self.host, self.port = m.group(1), int(m.group(2))
        self.url = f"http://{self.host}:{self.port}"

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        assert self.proc.returncode == 0, f"the server exited with {self.proc.returncode}"

    def request(self, method, path, body=None, key=KEY, raw=None, headers=None):
        c = http.client.HTTPConnection(self.host, self.port, timeout=60)
        h = {"Content-Type": "application/json", **(headers or {})}
        if key is not None:
            h["Authorization"] = f"Bearer {key}"
        data = raw if raw is not None else (None if body is None else json.dumps(body))
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        text = r.read().decode()
        c.close()
        return r.status, dict(r.getheaders()), text
