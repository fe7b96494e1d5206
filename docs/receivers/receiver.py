"""A demosvc webhook receiver in Python, with the standard library only.

Verifies X-Service-Signature and the Standard Webhooks headers over the raw
body (the PyPI `standardwebhooks` package does the second check too; this
uses hmac so that it runs anywhere), and processes each event id once.
Run: WEBHOOK_SECRET=whsec_... python3 receiver.py [PORT]
During a secret's rotation, give both: WEBHOOK_SECRET="whsec_new whsec_old".
"""
import base64, hashlib, hmac, json, os, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

SECRETS = os.environ["WEBHOOK_SECRET"].split()  # the whsec_... strings in force
TOLERANCE = 5 * 60  # seconds a webhook-timestamp may be off: refuses old replays
done = set()  # event ids processed; in production, a unique key in your database


def process(event_id, event):
    print(json.dumps({"processed": event_id, "event": event["event"]}), flush=True)


def valid(headers, body):
    # X-Service-Signature: "sha256=" + hex HMAC-SHA256 of the raw body,
    # keyed with the whole secret string; compared in constant time.
    got = headers.get("X-Service-Signature", "")
    if not any(hmac.compare_digest(got, "sha256=" + hmac.new(s.encode(), body, hashlib.sha256).hexdigest())
               for s in SECRETS):
        return False
    # Standard Webhooks: "v1," + base64 HMAC-SHA256 of "id.timestamp.body",
    # keyed with the bytes the base64 after "whsec_" decodes to.
    msg_id = headers.get("webhook-id", "")
    stamp = headers.get("webhook-timestamp", "")
    if not stamp.isdigit() or abs(time.time() - int(stamp)) > TOLERANCE:
        return False
    sigs = headers.get("webhook-signature", "").split()
    for s in SECRETS:
        key = base64.b64decode(s.removeprefix("whsec_"))
        mac = hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256)
        expected = "v1," + base64.b64encode(mac.digest()).decode()
        if any(hmac.compare_digest(sig, expected) for sig in sigs):
            return True
    return False


class Receiver(BaseHTTPRequestHandler):  # one request at a time: two tries of one event never race
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))  # the raw bytes
        if not valid(self.headers, body):
            return self.answer(401)
        # the event id, covered by the signature; X-Service-Event-Id, the same id, is sent in either mode
        event_id = self.headers.get("webhook-id") or self.headers["X-Service-Event-Id"]
        if event_id not in done:  # else a duplicate: already processed
            process(event_id, json.loads(body))
            done.add(event_id)
        self.answer(200)

    def answer(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0), Receiver)
print(f"listening on http://127.0.0.1:{server.server_port}", flush=True)
server.serve_forever()
