#!/usr/bin/python3
"""A backend for the end-to-end tests, run inside its network namespace: an HTTP/1.0 server on
0.0.0.0:PORT (so it answers on its own address for health checks and on the VIP, which sits on
its loopback, for direct-server-return traffic) that names itself in every answer.

  GET /          its name and a newline
  GET /healthz   200
  GET /big       BIG_BYTES of a fixed pattern (tests check the SHA-256)
  GET /slow?s=S  the same bytes, spread over about S seconds: a long-lived connection
  GET /bytes?n=N N bytes of the same pattern, repeated (a download of any size)
  GET /keep      its name, as HTTP/1.1 with a Content-Length, and the connection kept open for
                 the client's next request (what a load generator such as wrk expects)

and on UDP port PORT answers each datagram with its name and the datagram's own bytes.

Every answer carries "X-Backend: NAME" and no Content-Length: the server ends each body by
closing, so it is the side that closes first and keeps the TIME_WAIT, and a client can reuse
its source port at once (the tests ask from one source port twice). Usage: backend_server.py
NAME PORT [dual]; with "dual" it listens on IPv6 and IPv4 alike ([::]).
"""
import http.server
import socket
import sys
import threading
import time
import urllib.parse

NAME, PORT = sys.argv[1], int(sys.argv[2])
DUAL = len(sys.argv) > 3 and sys.argv[3] == "dual"
BIG_BYTES = 5 * 1024 * 1024
BIG = (bytes(range(251)) * (BIG_BYTES // 251 + 1))[:BIG_BYTES]
CHUNKS = 100


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    # Headers and body go out as separate writes: with Nagle's algorithm, a kept-open
    # connection's body would wait for the client's delayed ACK of the headers (40 ms).
    disable_nagle_algorithm = True

    def answer(self):
        self.send_response(200)
        self.send_header("X-Backend", NAME)
        self.end_headers()

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        if url.path == "/keep":
            body = (NAME + "\n").encode()
            self.protocol_version = "HTTP/1.1"
            self.close_connection = False
            self.send_response(200)
            self.send_header("X-Backend", NAME)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif url.path in ("/", "/healthz"):
            body = (NAME + "\n").encode()
            self.answer()
            self.wfile.write(body)
        elif url.path == "/big":
            self.answer()
            self.wfile.write(BIG)
        elif url.path == "/slow":
            seconds = float(urllib.parse.parse_qs(url.query).get("s", ["5"])[0])
            self.answer()
            step = len(BIG) // CHUNKS
            for offset in range(0, len(BIG), step):
                self.wfile.write(BIG[offset:offset + step])
                self.wfile.flush()
                time.sleep(seconds / CHUNKS)
        elif url.path == "/bytes":
            left = int(urllib.parse.parse_qs(url.query).get("n", ["0"])[0])
            self.answer()
            while left > 0:
                chunk = BIG[:min(left, len(BIG))]
                self.wfile.write(chunk)
                left -= len(chunk)
        else:
            self.send_error(404)

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True
    address_family = socket.AF_INET6 if DUAL else socket.AF_INET


def answer_datagrams():
    udp = socket.socket(Server.address_family, socket.SOCK_DGRAM)
    udp.bind(("::" if DUAL else "0.0.0.0", PORT))
    while True:
        data, peer = udp.recvfrom(65535)
        udp.sendto(NAME.encode() + b" " + data, peer)


if __name__ == "__main__":
    threading.Thread(target=answer_datagrams, daemon=True).start()
    Server(("::" if DUAL else "0.0.0.0", PORT), Handler).serve_forever()
