"""Starting and stopping the Triton server of the pinned nvidia-pytriton wheel, on 127.0.0.1 and
free ports, for the backend's tests and benchmark."""
import os
import shutil
import socket
import subprocess
import time
import urllib.request


def tritonserver_binary():
    import pytriton

    path = os.path.join(os.path.dirname(pytriton.__file__), "tritonserver", "bin", "tritonserver")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no tritonserver in the pytriton wheel ({path})")
    return path


def free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def backend_dir(root, backend_library):
    """A backend directory holding tvmrt/libtriton_tvmrt.so, as Triton's layout asks."""
    d = os.path.join(root, "backends", "tvmrt")
    os.makedirs(d, exist_ok=True)
    shutil.copy(backend_library, os.path.join(d, "libtriton_tvmrt.so"))
    return os.path.dirname(d)


def add_model(repo, name, library, config):
    """repo/name/config.pbtxt and repo/name/1/model.so (copied from `library`)."""
    d = os.path.join(repo, name, "1")
    os.makedirs(d, exist_ok=True)
    if library is not None:
        shutil.copy(library, os.path.join(d, "model.so"))
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(config)


class Server:
    """A tritonserver process; stopped by its pid (`stop`)."""

    def __init__(self, repo, backends, log_path, ready_models, extra=(), timeout=60):
        self.http, self.grpc, self.metrics = free_ports(3)
        self.log = open(log_path, "w")
        args = [
            tritonserver_binary(),
            f"--model-repository={repo}",
            f"--backend-directory={backends}",
            "--http-address=127.0.0.1", f"--http-port={self.http}",
            "--grpc-address=127.0.0.1", f"--grpc-port={self.grpc}",
            "--metrics-address=127.0.0.1", f"--metrics-port={self.metrics}",
            "--exit-on-error=false",
            "--strict-readiness=false",
            # Clients that keep a connection open must not hold the shutdown for 30 s.
            "--exit-timeout-secs=10",
            *extra,
        ]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self.log_path = log_path
        self.wait_ready(ready_models, timeout)

    def wait_ready(self, ready_models, timeout):
        """Waits until every model of `ready_models` is ready (stops the server on a timeout)."""
        deadline = time.time() + timeout
        pending = list(ready_models)
        while pending:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}:\n{self.log_text()}")
            if time.time() > deadline:
                log = self.log_text()
                self.stop()
                raise RuntimeError(f"models {pending} not ready after {timeout} s:\n{log}")
            pending = [m for m in pending if not self.model_ready(m)]
            time.sleep(0.1)

    def url(self, path):
        return f"http://127.0.0.1:{self.http}{path}"

    def get(self, path):
        """(status, body) of GET path."""
        try:
            with urllib.request.urlopen(self.url(path), timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return None, ""

    def model_ready(self, name):
        return self.get(f"/v2/models/{name}/ready")[0] == 200

    def log_text(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def log_text_after_stop(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        """SIGTERM to our pid, SIGKILL after 20 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()
        return self.proc.returncode
