// A demosvc webhook receiver in TypeScript on Node: verifies
// X-Service-Signature and, with the standardwebhooks package, the Standard
// Webhooks headers over the raw body, and processes each event id once.
// Run: WEBHOOK_SECRET=whsec_... node receiver.js [PORT]
// During a secret's rotation, give both: WEBHOOK_SECRET="whsec_new whsec_old".
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";

const secrets = process.env.WEBHOOK_SECRET!.split(/\s+/).filter(Boolean); // the whsec_... strings in force
const standards = secrets.map((s) => new Webhook(s));
const done = new Set<string>(); // event ids processed; in production, a unique key in your database

function processEvent(eventId: string, event: { event: string }): void {
  console.log(JSON.stringify({ processed: eventId, event: event.event }));
}

function valid(req: IncomingMessage, body: Buffer): boolean {
  // X-Service-Signature: "sha256=" + hex HMAC-SHA256 of the raw body, keyed
  // with the whole secret string; compared in constant time.
  const got = Buffer.from(String(req.headers["x-service-signature"] ?? ""));
  const signed = secrets.some((s) => {
    const want = Buffer.from("sha256=" + createHmac("sha256", s).update(body).digest("hex"));
    return got.length === want.length && timingSafeEqual(got, want);
  });
  if (!signed) return false;
  // Standard Webhooks: webhook-signature over webhook-id, a webhook-timestamp
  // within 5 minutes (against replays) and the body.
  return standards.some((standard) => {
    try {
      standard.verify(body.toString("utf8"), req.headers as Record<string, string>);
      return true;
    } catch {
      return false;
    }
  });
}

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks); // the raw bytes, before any parsing
    if (!valid(req, body)) {
      res.writeHead(401).end();
      return;
    }
    // The event id, covered by the signature; X-Service-Event-Id, the same id, is sent in either mode.
    const eventId = String(req.headers["webhook-id"] ?? req.headers["x-service-event-id"]);
    if (!done.has(eventId)) { // else a duplicate: already processed
      processEvent(eventId, JSON.parse(body.toString("utf8")));
      done.add(eventId); // Node runs one handler at a time: two tries of one event never race
    }
    res.writeHead(200).end();
  });
});
server.listen(Number(process.argv[2] ?? 0), "127.0.0.1", () => {
  console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`);
});
