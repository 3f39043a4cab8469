#!/usr/bin/env python3
"""An HTTPS round-robin on 127.0.0.1 (tests/e2e/pod_budgets.sh): two replicas of ours behind one URL.

    round_robin.py LISTEN-PORT CERT KEY CA UPSTREAM-PORT...

Serves HTTPS with CERT/KEY (the replicas' own serving certificate, so the webhook configuration's
caBundle verifies it) over HTTP/1.1 only, and sends each request to the next upstream in turn, over
TLS verified with CA for `localhost`. Per request, not per connection: the API server would carry
every call over one HTTP/2 connection, and a connection-level balancer would give it all to one
replica. An upstream that cannot be reached is a 502.
"""

import http.client
import http.server
import itertools
import ssl
import sys
import threading

listen_port, cert, key, ca = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
upstreams = itertools.cycle([int(p) for p in sys.argv[5:]])
turn = threading.Lock()
client_context = ssl.create_default_context(cafile=ca)


class Forward(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with turn:
            port = next(upstreams)
        try:
            upstream = http.client.HTTPSConnection("localhost", port, context=client_context, timeout=30)
            upstream.request("POST", self.path, body=body, headers={"Content-Type": self.headers.get("Content-Type", "")})
            response = upstream.getresponse()
            data, status = response.read(), response.status
            content_type = response.getheader("Content-Type", "application/json")
            upstream.close()
        except (OSError, http.client.HTTPException) as err:
            data, status, content_type = f"upstream {port}: {err}".encode(), 502, "text/plain"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", listen_port), Forward)
server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
server_context.load_cert_chain(cert, key)
server_context.set_alpn_protocols(["http/1.1"])
server.socket = server_context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
