#!/usr/bin/env python3
"""A stand-in Kubernetes API server for KubernetesProvider's unit test.

Serves plain HTTP on 127.0.0.1 (port 0), writes its port to argv[1], and
appends one JSON line per request (method, path, authorization, content
type, body) to argv[2]. Answers 404 for deployments named "missing" and 200
with an empty object otherwise.
"""
import http.server
import json
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    def do_PATCH(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        with open(sys.argv[2], "a") as log:
            log.write(json.dumps({
                "method": "PATCH",
                "path": self.path,
                "authorization": self.headers.get("Authorization", ""),
                "content_type": self.headers.get("Content-Type", ""),
                "body": json.loads(body) if body else None,
            }) + "\n")
        missing = "/deployments/missing/" in self.path
        self.send_response(404 if missing else 200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"kind":"Status","reason":"NotFound"}' if missing else b"{}")

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1], "w") as port_file:
    port_file.write(str(server.server_address[1]))
server.serve_forever()
