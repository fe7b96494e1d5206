// What both TypeScript flows share: a webhook receiver on 127.0.0.1, the
// Link header's cursor, and failing loudly.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/** Receiver records the X-Service-Event-Id of every POST it answers. */
export interface Receiver {
  url: string;
  ids(): string[];
  close(): void;
}

export function startReceiver(): Promise<Receiver> {
  const got = new Set<string>();
  const server = createServer((req, res) => {
    got.add(String(req.headers["x-service-event-id"]));
    req.resume();
    req.on("end", () => {
      res.statusCode = 204;
      res.end();
    });
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}/hook`,
        ids: () => [...got].sort(),
        close: () => server.close(),
      });
    });
  });
}

/** nextCursor returns starting_after of a `Link: <…>; rel="next"` header, or undefined. */
export function nextCursor(link: string | null): string | undefined {
  if (!link) return undefined;
  const m = /^<([^<>]+)>; rel="next"$/.exec(link);
  if (!m) throw new Error(`Link header ${JSON.stringify(link)}`);
  const cursor = new URL(m[1], "http://base.invalid").searchParams.get("starting_after");
  if (!cursor) throw new Error(`Link header ${JSON.stringify(link)} has no starting_after`);
  return cursor;
}

export function check(ok: unknown, what: string, detail?: unknown): asserts ok {
  if (!ok) throw new Error(`${what}: ${JSON.stringify(detail)}`);
}

export function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** env returns DEMO_API_URL and DEMO_API_KEY, which the flows need. */
export function env(): { base: string; key: string } {
  const base = process.env.DEMO_API_URL;
  const key = process.env.DEMO_API_KEY;
  if (!base || !key) throw new Error("set DEMO_API_URL and DEMO_API_KEY");
  return { base, key };
}

/** main runs a flow, prints its verdict and sets the exit status. */
export function main(name: string, flow: () => Promise<void>): void {
  flow().then(
    () => console.log(`${name}: ok`),
    (err) => {
      console.error(`${name}: FAIL:`, err);
      process.exitCode = 1;
    },
  );
}

export const allEvents = ["contact.created", "demo.completed", "demo.abandoned", "lead.hot", "meeting.booked"] as const;
export const unknownAgent = "agt_" + "0".repeat(26);
export const unknownContact = "cnt_" + "0".repeat(26);
