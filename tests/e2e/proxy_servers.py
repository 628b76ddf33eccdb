"""Backends that read the PROXY protocol, for the Full-NAT end-to-end test: nginx (`listen ...
proxy_protocol`), HAProxy (`bind ... accept-proxy`) and a server that speaks first, each in a
backend's namespace, each logging the client address the header names.

  nginx    GET /who answers the header's client address; GET /files/big is a 100 MB file of
           the tests' pattern; GET /healthz 200. Access log: "ADDRESS PORT URI STATUS".
  HAProxy  every request answered with the client address it read; log "ADDRESS PORT URI
           STATUS" on its standard output.
  greeter  reads the header, then greets first: "220 greeter sees ADDRESS:PORT", and answers
           "QUIT" with "221 bye". A connection without a header (a TCP probe) is closed.

Everything runs in the test's temporary directory and stops with the test.
"""
import os
import subprocess
import time

import e2e_support
from e2e_support import run

NGINX_CONFIG = """
daemon off;
master_process off;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log;
events {{ worker_connections 1024; }}
http {{
  log_format addresses '$proxy_protocol_addr $proxy_protocol_port $request_uri $status';
  access_log {dir}/nginx-access.log addresses;
  client_body_temp_path {dir}/nginx-body;
  proxy_temp_path {dir}/nginx-proxy;
  fastcgi_temp_path {dir}/nginx-fastcgi;
  uwsgi_temp_path {dir}/nginx-uwsgi;
  scgi_temp_path {dir}/nginx-scgi;
  server {{
    listen {port} proxy_protocol;
    listen [::]:{port} proxy_protocol;
    keepalive_requests 100000;
    location = /healthz {{ return 200 "ok\\n"; }}
    location = /who {{ return 200 "$proxy_protocol_addr\\n"; }}
    location /files/ {{ root {dir}/www; }}
  }}
}}
"""

# One thread: HAProxy's threads take turns at the log's descriptor, and a thread that finds it
# busy for too long drops its line rather than wait; on a loaded 2-CPU machine that lost 3 of a
# wrk run's 80,147 lines.
HAPROXY_CONFIG = """
global
  log stdout format raw local0
  nbthread 1
defaults
  mode http
  log global
  log-format "%ci %cp %HU %ST"
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend who
  bind :{port} accept-proxy
  http-request return status 200 content-type text/plain lf-string "%[src]\\n"
"""

GREETER = r"""
import socket, struct, sys, threading
SIGNATURE = b"\r\n\r\n\0\r\nQUIT\n"

def serve(connection):
    with connection:
        connection.settimeout(10)
        try:
            head = b""
            while len(head) < 16:
                more = connection.recv(16 - len(head))
                if not more:
                    return
                head += more
            if head[:12] != SIGNATURE:
                return
            length = struct.unpack("!H", head[14:16])[0]
            body = b""
            while len(body) < length:
                more = connection.recv(length - len(body))
                if not more:
                    return
                body += more
            if head[13] == 0x11:
                client = socket.inet_ntop(socket.AF_INET, body[0:4])
                port = struct.unpack("!H", body[8:10])[0]
            else:
                client = socket.inet_ntop(socket.AF_INET6, body[0:16])
                port = struct.unpack("!H", body[32:34])[0]
            connection.sendall(("220 greeter sees %s:%d\r\n" % (client, port)).encode())
            if connection.recv(100).startswith(b"QUIT"):
                connection.sendall(b"221 bye\r\n")
        except OSError:
            pass

listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("0.0.0.0", int(sys.argv[1])))
listener.listen(128)
while True:
    connection, _ = listener.accept()
    threading.Thread(target=serve, args=(connection,), daemon=True).start()
"""


def pattern_file(path, length):
    """`length` bytes as backend_server.py's /bytes sends them: its BIG_BYTES of the pattern
    (bytes 0..250 repeated), repeated."""
    big = (bytes(range(251)) * (e2e_support.BIG_BYTES // 251 + 1))[:e2e_support.BIG_BYTES]
    with open(path, "wb") as out:
        left = length
        while left > 0:
            out.write(big[:min(left, len(big))])
            left -= min(left, len(big))


class ProxyServers:
    def __init__(self, directory):
        self.directory = directory
        self.processes = []

    def _start(self, namespace, command, output=subprocess.DEVNULL):
        process = subprocess.Popen(["ip", "netns", "exec", namespace] + command,
                                   stdout=output, stderr=subprocess.STDOUT)
        self.processes.append(process)
        return process

    def _wait_listening(self, namespace, port):
        deadline = time.monotonic() + 10
        while ":%d " % port not in run("ip", "netns", "exec", namespace, "ss", "-ltnH").stdout:
            if time.monotonic() > deadline:
                raise RuntimeError("nothing listens on port %d in %s" % (port, namespace))
            time.sleep(0.1)

    def start_nginx(self, namespace, port, file_bytes):
        os.makedirs(os.path.join(self.directory, "www", "files"), exist_ok=True)
        pattern_file(os.path.join(self.directory, "www", "files", "big"), file_bytes)
        config = os.path.join(self.directory, "nginx.conf")
        with open(config, "w") as out:
            out.write(NGINX_CONFIG.format(dir=self.directory, port=port))
        self._start(namespace, ["nginx", "-c", config])
        self._wait_listening(namespace, port)

    def nginx_log(self):
        """The access log's lines, split: [address, port, uri, status]."""
        with open(os.path.join(self.directory, "nginx-access.log")) as log:
            return [line.split() for line in log if line.strip()]

    def start_haproxy(self, namespace, port):
        config = os.path.join(self.directory, "haproxy.cfg")
        with open(config, "w") as out:
            out.write(HAPROXY_CONFIG.format(port=port))
        self.haproxy_output = os.path.join(self.directory, "haproxy.log")
        with open(self.haproxy_output, "w") as output:
            self._start(namespace, ["haproxy", "-f", config, "-db"], output=output)
        self._wait_listening(namespace, port)

    def haproxy_log(self):
        with open(self.haproxy_output) as log:
            return [line.split() for line in log if line.count(" ") == 3]

    def start_greeter(self, namespace, port):
        script = os.path.join(self.directory, "greeter.py")
        with open(script, "w") as out:
            out.write(GREETER)
        self._start(namespace, ["/usr/bin/python3", script, str(port)])
        self._wait_listening(namespace, port)

    def stop_all(self):
        for process in self.processes:
            e2e_support.stop_process(process, timeout=10)
        self.processes = []
