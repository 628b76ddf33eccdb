"""A berth fleet on this machine, for tests and benchmarks: a three-member etcd cluster on loopback
ports (TLS with client certificates from a CA made by openssl, or plain HTTP), and berthd
instances on net_null ports that receive nothing, with idle workers, so that several share two
cores. Every process is started here, killed by PID and its files removed by close()."""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

from control_load import interrupt_and_wait, wait_for_line


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def version_text(backends, extra="", weight_of=None):
    """A fleet version: one service, `web`, with `backends` backends (weights from `weight_of`)."""
    text = ("services:\n  - name: web\n    vip: 198.18.100.1\n    port: 80\n    protocol: tcp\n"
            + extra + "    backends:\n")
    for i in range(backends):
        weight = ", weight: %d" % weight_of(i) if weight_of else ""
        text += "      - { name: web-%d, address: 198.18.%d.%d%s }\n" % (
            i, 1 + i // 250, 1 + i % 250, weight)
    return text


class FleetCluster:
    def __init__(self, berthd, berthctl, tls=True, members=3, lease_ttl_s=4, host="127.0.0.1",
                 namespaces=None, extra_fleet="", extra_local=""):
        """`host`: the address etcd listens on; `namespaces`: per berthd, the network namespace
        it runs in (none: this one); `extra_fleet`: more lines for every fleet section;
        `extra_local`: more top-level sections for every instance's own file."""
        self.extra_local = extra_local
        self.host = host
        self.namespaces = namespaces
        self.extra_fleet = extra_fleet
        self.berthd = berthd
        self.berthctl_path = berthctl
        self.tls = tls
        self.lease_ttl_s = lease_ttl_s
        self.prefix = "berth-fleet-%d" % os.getpid()
        self.dir = tempfile.mkdtemp(prefix="berth-fleet-")
        self.ca = self.cert = self.key = None
        if tls:
            self.make_certificates()
        self.client_ports = [free_port() for _ in range(members)]
        self.peer_ports = [free_port() for _ in range(members)]
        self.cluster = ",".join("e%d=http://%s:%d" % (i, host, p)
                                for i, p in enumerate(self.peer_ports))
        self.members = [None] * members
        self.berthds = {}
        scheme = "https" if tls else "http"
        self.endpoints = ["%s://%s:%d" % (scheme, host, p) for p in self.client_ports]
        for i in range(members):
            self.start_member(i)
        self.wait_members_healthy(range(members))
        self.admin = self.write_config("admin", local=False)

    def close(self):
        for process, _ in self.berthds.values():
            interrupt_and_wait(process)
            process.stderr.close()
        for i in range(len(self.members)):
            self.stop_member(i)
        for i in self.berthds:
            shutil.rmtree("/var/run/dpdk/%s-%d" % (self.prefix, i), ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- etcd -----------------------------------------------------------------------------------
    def make_certificates(self):
        def openssl(*args):
            subprocess.run(["openssl", *args], cwd=self.dir, check=True, capture_output=True)
        key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
                "-subj", "/CN=berth test CA")
        with open(os.path.join(self.dir, "server.ext"), "w") as ext:
            ext.write("subjectAltName=IP:%s\n" % self.host)
        for name, subject in (("server", "/CN=" + self.host), ("client", "/CN=berth")):
            openssl("req", *key, "-keyout", name + ".key", "-out", name + ".csr", "-subj", subject)
            extra = ["-extfile", "server.ext"] if name == "server" else []
            openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                    "-CAcreateserial", "-out", name + ".crt", "-days", "2", *extra)
        self.ca = os.path.join(self.dir, "ca.crt")
        self.cert = os.path.join(self.dir, "client.crt")
        self.key = os.path.join(self.dir, "client.key")

    def start_member(self, i):
        scheme = "https" if self.tls else "http"
        url = "%s://%s:%d" % (scheme, self.host, self.client_ports[i])
        peer = "http://%s:%d" % (self.host, self.peer_ports[i])
        tls = []
        if self.tls:
            tls = ["--cert-file", os.path.join(self.dir, "server.crt"), "--key-file",
                   os.path.join(self.dir, "server.key"), "--client-cert-auth",
                   "--trusted-ca-file", self.ca]
        with open(os.path.join(self.dir, "etcd%d.log" % i), "a") as log:
            self.members[i] = subprocess.Popen(
                ["etcd", "--name", "e%d" % i, "--data-dir", os.path.join(self.dir, "d%d" % i),
                 "--listen-client-urls", url, "--advertise-client-urls", url,
                 "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                 "--initial-cluster", self.cluster, "--initial-cluster-state", "new",
                 "--initial-cluster-token", self.prefix, "--logger", "zap", *tls],
                stdout=log, stderr=log)

    def stop_member(self, i):
        if self.members[i] is not None:
            self.members[i].kill()
            self.members[i].wait()
            self.members[i] = None

    def wait_members_healthy(self, indices):
        endpoints = ",".join("%s:%d" % (self.host, self.client_ports[i]) for i in indices)
        tls = ["--cacert", self.ca, "--cert", self.cert, "--key", self.key] if self.tls else []
        deadline = time.monotonic() + 30
        while True:
            result = subprocess.run(["etcdctl", "--endpoints", endpoints, *tls, "endpoint",
                                     "health"], env=dict(os.environ, ETCDCTL_API="3"),
                                    capture_output=True, text=True)
            if result.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError("etcd members %s not healthy: %s" % (list(indices),
                                                                           result.stderr))
            time.sleep(0.2)

    # --- berthd ---------------------------------------------------------------------------------
    def write_config(self, name, local=True, index=0):
        text = ""
        if local:
            text += ("dataplane:\n"
                     "  eal: [\"--no-huge\", \"-m\", \"256\", \"--no-pci\", \"--file-prefix\", "
                     "\"%s-%d\", \"--lcores\", \"0@0,1@1\", \"--vdev\", \"net_null0,no-rx=1\", "
                     "\"--log-level\", \"lib.eal:error\"]\n"
                     "  idle: {}\n"
                     "  ports:\n"
                     "    - { name: p0, device: net_null0, ipv4: 198.18.0.%d, "
                     "gateway_mac: \"02:00:00:00:00:fe\" }\n") % (self.prefix, index, 10 + index)
            text += self.extra_local
        text += "fleet:\n  endpoints: [%s]\n  name: %s\n" % (", ".join(self.endpoints), name)
        if self.tls:
            text += "  ca: %s\n  cert: %s\n  key: %s\n" % (self.ca, self.cert, self.key)
        text += "  lease_ttl_s: %d\n  keep_versions: 5\n  cache: %s\n%s" % (
            self.lease_ttl_s, os.path.join(self.dir, name + "-cache.yaml"), self.extra_fleet)
        path = os.path.join(self.dir, name + ".yaml")
        with open(path, "w") as out:
            out.write(text)
        return path

    def start_berthd(self, i):
        config = self.write_config("lb-%d" % i, index=i)
        netns = ["ip", "netns", "exec", self.namespaces[i]] if self.namespaces else []
        process = subprocess.Popen([*netns, self.berthd, "--", "--config", config,
                                    "--control-socket", self.socket(i), "--drain-state", "off"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines = []
        threading.Thread(target=lambda: lines.extend(process.stderr), daemon=True).start()
        self.berthds[i] = (process, lines)
        wait_for_line(lines, process, "forwarding:")

    def stop_berthd(self, i):
        process, _ = self.berthds.pop(i)
        interrupt_and_wait(process)
        process.stderr.close()

    def kill_berthd(self, i):
        """SIGKILL: the instance dies without leaving; its lease runs out on its own."""
        process, _ = self.berthds.pop(i)
        process.kill()
        process.wait()
        process.stderr.close()

    def log(self, i):
        return "".join(self.berthds[i][1])

    def socket(self, i):
        return os.path.join(self.dir, "lb-%d.sock" % i)

    # --- berthctl -------------------------------------------------------------------------------
    def berthctl(self, *args):
        return subprocess.run([self.berthctl_path, *args], capture_output=True, text=True,
                              timeout=90)

    def push(self, text, name="fleet.yaml"):
        path = os.path.join(self.dir, name)
        with open(path, "w") as out:
            out.write(text)
        return self.berthctl("fleet", "push", path, "--config", self.admin)

    def status(self, i):
        result = self.berthctl("status", "--json", "--socket", self.socket(i))
        if result.returncode != 0:
            raise AssertionError(result.stderr)
        return json.loads(result.stdout)

    def fleet_status(self):
        result = self.berthctl("fleet", "status", "--json", "--config", self.admin)
        if result.returncode not in (0, 3):
            raise AssertionError(result.stderr)
        return json.loads(result.stdout)
