#!/usr/bin/python3
"""A backend for the end-to-end tests, run inside its network namespace: an HTTP/1.0 server on
0.0.0.0:PORT (so it answers on its own address for health checks and on the VIP, which sits on
its loopback, for direct-server-return traffic) that names itself in every answer.

  GET /          its name and a newline
  GET /healthz   200
  GET /big       BIG_BYTES of a fixed pattern (tests check the SHA-256)
  GET /slow?s=S  the same bytes, spread over about S seconds: a long-lived connection

Every answer carries "X-Backend: NAME" and no Content-Length: the server ends each body by
closing, so it is the side that closes first and keeps the TIME_WAIT, and a client can reuse
its source port at once (the tests ask from one source port twice). Usage: backend_server.py
NAME PORT
"""
import http.server
import sys
import time
import urllib.parse

NAME, PORT = sys.argv[1], int(sys.argv[2])
BIG_BYTES = 5 * 1024 * 1024
BIG = (bytes(range(251)) * (BIG_BYTES // 251 + 1))[:BIG_BYTES]
CHUNKS = 100


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def answer(self):
        self.send_response(200)
        self.send_header("X-Backend", NAME)
        self.end_headers()

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        if url.path in ("/", "/healthz"):
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
        else:
            self.send_error(404)

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True


if __name__ == "__main__":
    Server(("0.0.0.0", PORT), Handler).serve_forever()
