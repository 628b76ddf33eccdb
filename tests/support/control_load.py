"""Loads against berthd's control sockets and metrics endpoint, and the probe that times
`announce` and `status` meanwhile: shared by tests/integration/berthd_control_load_test.py and
perf/control_load_benchmark.py. Each load runs as a process of its own
(`python3 control_load.py KIND ARGS...`), so that Python's GIL in the measuring process does not
slow the probe.
"""
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

BIG_TABLE = 655373

CONFIG = """dataplane:
  eal: ["--no-huge", "-m", "256", "--no-pci", "--file-prefix", "%s", "--lcores", "0@0,1@1",
        "--vdev", "net_null0", "--log-level", "lib.eal:error"]
  ports:
    - { name: p0, device: net_null0, ipv4: 198.18.0.10, gateway_mac: "02:00:00:00:00:fe" }
metrics: { listen: "127.0.0.1:0" }
services:
  - name: big
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    table_size: %d
    backends:
      - { name: big-1, address: 198.18.1.2 }
      - { name: big-2, address: 198.18.2.2 }
      - { name: big-3, address: 198.18.3.2 }
"""


def config_with_backends(prefix, count):
    """The same berthd config with `count` backends in the big service."""
    text = CONFIG % (prefix, BIG_TABLE)
    text = text[:text.index("      - { name: big-1")]
    for i in range(count):
        text += "      - { name: big-%d, address: 198.19.%d.%d }\n" % (i + 1, i // 256, i % 256)
    return text


def wait_for_line(lines, process, text, after=0, timeout=20):
    """The first of `lines` (berthd's stderr as a reader thread collects it) from index `after`
    that holds `text`, waiting up to `timeout` s; AssertionError with the log when berthd exits or
    the time is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in list(lines)[after:]:
            if text in line:
                return line
        if process.poll() is not None:
            raise AssertionError("berthd exited: %s" % "".join(lines))
        time.sleep(0.05)
    raise AssertionError("no line with %r in:\n%s" % (text, "".join(lines)))


def interrupt_and_wait(process, timeout=30):
    """SIGINT, as an operator stops berthd, then SIGKILL if it has not stopped in `timeout` s.
    The exit status, or None when it was killed."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            return None
    return process.returncode


def ask(path, command, timeout=5.0, **fields):
    """One request on a control socket; the reply's JSON."""
    request = dict(command=command, **fields)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout)
        client.connect(path)
        client.sendall((json.dumps(request) + "\n").encode())
        # Appended in place: a reply of 65,535 backends is tens of megabytes, and building it by
        # `bytes +=` copied it whole at every piece, so slowly on a loaded machine that berthd cut
        # the client at its reply patience.
        reply = bytearray()
        while not reply.endswith(b"\n"):
            piece = client.recv(1 << 20)
            if not piece:
                break
            reply += piece
    return json.loads(reply)


def scrape(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, response.read()


class Berthd:
    """berthd on a net_null vdev with a 655,373-slot service and a metrics endpoint."""

    def __init__(self, berthd, prefix):
        self.prefix = prefix
        self.directory = tempfile.mkdtemp(prefix="berthd-control-load-")
        os.chmod(self.directory, 0o755)  # another user's load reaches the read-only socket
        self.path = os.path.join(self.directory, "berth.yaml")
        self.write_config(CONFIG % (prefix, BIG_TABLE))
        self.control = os.path.join(self.directory, "berth.sock")
        self.read_only = os.path.join(self.directory, "berth-ro.sock")
        self.process = subprocess.Popen([berthd, "--", "--config", self.path, "--control-socket",
                                         self.control], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.lines = []
        threading.Thread(target=lambda: self.lines.extend(self.process.stderr), daemon=True).start()
        deadline = time.monotonic() + 60
        while not any("forwarding:" in line for line in list(self.lines)):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError("berthd did not start:\n" + "".join(self.lines))
            time.sleep(0.05)
        line = next(l for l in self.lines if "metrics: http://" in l)
        self.url = re.search(r"(http://127\.0\.0\.1:\d+/metrics)", line).group(1)
        self.loads = []

    def write_config(self, text):
        with open(self.path + ".new", "w") as out:
            out.write(text)
        os.replace(self.path + ".new", self.path)

    def start_load(self, *args, user=None):
        """A load of this module's, as a process; `user` runs it as that uid and gid."""
        command = [sys.executable, os.path.abspath(__file__)] + [str(a) for a in args]
        if user is not None:
            command = ["setpriv", "--reuid", str(user), "--regid", str(user),
                       "--clear-groups"] + command
        load = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        self.loads.append(load)
        return load

    def endpoint_count(self, endpoint, outcome):
        """berth_endpoint_connections_total for `endpoint` and `outcome`."""
        _, body = scrape(self.url)
        found = re.search(rb'berth_endpoint_connections_total\{endpoint="%s",outcome="%s"\} (\d+)'
                          % (endpoint.encode(), outcome.encode()), body)
        return int(found.group(1))

    def stop(self):
        for load in self.loads:
            if load.poll() is None:
                load.kill()
                load.wait()
        interrupt_and_wait(self.process)
        shutil.rmtree("/var/run/dpdk/" + self.prefix, ignore_errors=True)
        shutil.rmtree(self.directory, ignore_errors=True)


class Probe(threading.Thread):
    """Every `interval` s: `announce` on the read-only socket and `status` on the control
    socket, each answer's time kept, and every failure."""

    def __init__(self, read_only, control, interval=0.05):
        super().__init__(daemon=True)
        self.targets = [("announce", read_only), ("status", control)]
        self.interval = interval
        self.times = {command: [] for command, _ in self.targets}
        self.failures = []
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            for command, path in self.targets:
                started = time.monotonic()
                try:
                    reply = ask(path, command)
                    if not reply.get("ok"):
                        self.failures.append("%s: %s" % (command, reply.get("error")))
                except (OSError, ValueError) as error:
                    self.failures.append("%s: %r" % (command, error))
                self.times[command].append(time.monotonic() - started)
            time.sleep(self.interval)

    def stop(self):
        self.done.set()
        self.join(timeout=30)

    def summary(self):
        """Per command: requests, p50, p99 and max in milliseconds."""
        result = {}
        for command, times in self.times.items():
            times = sorted(times)
            result[command] = {
                "requests": len(times),
                "p50_ms": 1000 * statistics.median(times) if times else None,
                "p99_ms": 1000 * times[min(len(times) - 1, int(len(times) * 0.99))] if times else None,
                "max_ms": 1000 * times[-1] if times else None,
            }
        return result


# The loads.
def load_idle(kind, target, count, seconds):
    """`count` connections that send nothing, reopened when berthd closes them."""
    def connect():
        if kind == "unix":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(target)
        else:
            host, port = target.rsplit(":", 1)
            s = socket.create_connection((host, int(port)))
        s.setblocking(False)
        return s
    held = [connect() for _ in range(count)]
    print("holding %d" % len(held), flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for i, s in enumerate(held):
            try:
                if s.recv(1) == b"":
                    raise ConnectionError
            except BlockingIOError:
                continue
            except OSError:
                s.close()
                held[i] = connect()
        time.sleep(0.05)


def load_whole_tables(path, service, table_size, seconds):
    """Reads table replies whole, at full speed, checking each; at least one."""
    end = time.monotonic() + seconds
    while True:
        started = time.monotonic()
        whole = ask(path, "table", timeout=30, service=service)
        elapsed = time.monotonic() - started
        assert len(whole["table"]["entries"]) == table_size
        assert sum(b["slots"] for b in whole["table"]["backends"]) == table_size
        assert whole["text"].count("\n") == table_size + 6  # header, heading, 3 backends, heading
        print("a %d-slot table: %.1f MB in %.2f s" % (
            table_size, len(json.dumps(whole)) / 1e6, elapsed), flush=True)
        if time.monotonic() >= end:
            return


def load_slow_reader(path, service, seconds):
    """Asks for a table and reads 4 KiB of it every 0.5 s."""
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect(path)
    slow.sendall(json.dumps({"command": "table", "service": service}).encode() + b"\n")
    slow.settimeout(5)
    received = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        piece = slow.recv(4096)
        if not piece:
            break
        received += len(piece)
        time.sleep(0.5)
    slow.close()
    print("slow reader: %d bytes" % received, flush=True)


def load_scrapes(url, threads, seconds):
    end = time.monotonic() + seconds
    failures = []

    def loop():
        while time.monotonic() < end:
            try:
                scrape(url, timeout=10)
            except OSError as error:
                failures.append(str(error))
    workers = [threading.Thread(target=loop) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print("scrape failures: %d" % len(failures), flush=True)


def load_replies(kind, target, backends, seconds):
    """Asks for per-backend replies in a loop for `seconds`, checking each covers every backend:
    `backends` or `stats` on a control socket, or `scrape` of the metrics URL."""
    end = time.monotonic() + seconds
    replies = 0
    while time.monotonic() < end:
        if kind == "scrape":
            status, body = scrape(target, timeout=30)
            assert status == 200
            assert body.count(b"\nberth_backend_healthy{") == backends, "every backend scraped"
        else:
            reply = ask(target, kind, timeout=30)
            assert reply.get("ok"), reply
            rows = reply["backends"] if kind == "backends" else reply["stats"]["backends"]
            # stats counts every backend berthd has had a counter for, these and earlier ones.
            assert len(rows) == backends or (kind == "stats" and len(rows) > backends), \
                "%s: %d rows" % (kind, len(rows))
        replies += 1
    print("%s: %d replies" % (kind, replies), flush=True)


LOADS = {
    "idle": lambda a: load_idle(a[0], a[1], int(a[2]), float(a[3])),
    "tables": lambda a: load_whole_tables(a[0], a[1], int(a[2]), float(a[3])),
    "slow": lambda a: load_slow_reader(a[0], a[1], float(a[2])),
    "scrapes": lambda a: load_scrapes(a[0], int(a[1]), float(a[2])),
    "replies": lambda a: load_replies(a[0], a[1], int(a[2]), float(a[3])),
}

if __name__ == "__main__":
    LOADS[sys.argv[1]](sys.argv[2:])
