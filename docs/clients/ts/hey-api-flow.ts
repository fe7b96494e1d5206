// The whole flow through the SDK @hey-api/openapi-ts generates from
// openapi.yaml, unmodified and with default options.
import { client } from "../gen/hey-api/client.gen";
import {
  abandonSession, completeSession, createAgent, listDeliveries, listSessions, registerWebhook, startSession,
  type Delivery,
} from "../gen/hey-api";
import { randomUUID } from "node:crypto";
import { allEvents, check, env, main, nextCursor, sameList, sleep, startReceiver, unknownAgent, unknownContact } from "./support";

main("hey-api flow", async () => {
  const { base, key } = env();
  client.setConfig({ baseUrl: base, auth: () => key });
  const rcv = await startReceiver();
  try {
    const wh = await registerWebhook({ body: { url: rcv.url, events: [...allEvents] } });
    check(wh.data?.secret.startsWith("whsec_") === true, "register webhook", wh.error);
    const webhookId = wh.data.id;

    // No status: the agent is active.
    const agent = await createAgent({ body: { name: "Ava", sandbox_url: "https://sandbox.example.com/ava" } });
    check(agent.data?.status === "active", "create agent", agent.error);

    const sessions: string[] = [];
    const run = randomUUID().slice(0, 8); // e-mails new to the account, so each captures a contact
    for (const name of ["pat", "sam", "alex"]) {
      const email = `${name}+${run}@example.com`;
      const s = await startSession({ body: { agent_id: agent.data.id, contact: { name: `Prospect ${name}`, email } } });
      check(s.data?.status === "in_progress" && s.data.ended_at === null, "start session", s.error);
      sessions.push(s.data.id);
    }
    const signals = { interest: 80, objections: 10, buying_signals: 90 };
    for (const [i, score] of [91, 40].entries()) {
      const done = await completeSession({
        path: { sessionId: sessions[i] },
        body: { intent_score: score, signals, duration_seconds: 600, replay_url: `https://replay.example.com/${i}` },
      });
      check(done.data?.status === "completed" && done.data.ended_at !== null && done.data.intent_score === score, "complete session", done.error);
    }
    const ab = await abandonSession({ path: { sessionId: sessions[2] }, body: {} });
    check(ab.data?.status === "abandoned", "abandon session", ab.error);

    // Page through the sessions one at a time by the Link header.
    const listed: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; ; page++) {
      check(page <= 10, "list sessions: more pages than sessions");
      const l = await listSessions({ query: { agent_id: agent.data.id, limit: 1, starting_after: cursor } });
      check(l.data?.data.length === 1, "list sessions", l.error);
      listed.push(l.data.data[0].id);
      cursor = nextCursor(l.response.headers.get("Link"));
      if (!cursor) break;
    }
    check(sameList(listed, [...sessions].reverse()), "paged sessions", { listed, sessions });

    // 3 contact.created, 2 demo.completed, 1 lead.hot, 1 demo.abandoned.
    const deadline = Date.now() + 30_000;
    let deliveries: Delivery[] = [];
    for (;;) {
      deliveries = [];
      let after: string | undefined;
      for (let page = 0; page < 10; page++) {
        const l = await listDeliveries({ path: { webhookId }, query: { limit: 3, starting_after: after } });
        check(l.data, "list deliveries", l.error);
        deliveries.push(...l.data.data);
        after = nextCursor(l.response.headers.get("Link"));
        if (!after) break;
      }
      if (deliveries.length === 7 && deliveries.every((d) => d.status === "succeeded" && d.attempts === 1)) break;
      check(Date.now() < deadline, "deliveries after 30s", deliveries);
      await sleep(100); // polling interval
    }
    const delivered = deliveries.map((d) => d.event_id).sort();
    check(sameList(rcv.ids(), delivered), "the receiver's events against the deliveries", { got: rcv.ids(), delivered });

    // A 404 and a 400, read through the generated error types.
    const nf = await startSession({ body: { agent_id: unknownAgent, contact_id: unknownContact } });
    check(nf.response.status === 404 && nf.error?.error.code === "not_found", "unknown agent", nf.error);
    check(nf.error.error.message !== "" && nf.error.error.param === "agent_id", "unknown agent's message and param", nf.error);
    const bad = await createAgent({ body: { name: "", sandbox_url: "https://sandbox.example.com/x" } });
    check(bad.response.status === 400 && bad.error?.error.code === "invalid_request", "empty name", bad.error);
    check(bad.error.error.message !== "" && bad.error.error.param === "name", "empty name's message and param", bad.error);
    console.log(`404: ${nf.error.error.message} (param ${nf.error.error.param}); 400: ${bad.error.error.message} (param ${bad.error.error.param})`);
  } finally {
    rcv.close();
  }
});
