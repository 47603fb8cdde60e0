// An outside client of Sylk written with the official nats.js client and
// nothing of Sylk's: it connects with an observer's .creds file, reads one
// session's events from the SYLK stream (an ordered consumer filtered to
// sylk.v1.<session>.>, each body decoded as msgpack), then tries to publish
// into the session, which the server must refuse.
//
//	node observer.mjs URL CREDS SESSION
//
// It prints one line per event ("event SEQ TYPE SOURCE PAYLOAD"), then
// "publish refused: WHY" or "publish accepted", and exits 0 only when it
// read the session and the publish was refused.
import { readFileSync } from "node:fs";
import { connect, credsAuthenticator } from "nats";
import { decode, encode } from "@msgpack/msgpack";

const [url, credsPath, session] = process.argv.slice(2);
if (!url || !credsPath || !session) {
  console.error("usage: node observer.mjs URL CREDS SESSION");
  process.exit(2);
}

const nc = await connect({
  servers: url,
  authenticator: credsAuthenticator(readFileSync(credsPath)),
  timeout: 10_000,
});
// Errors the server reports on the connection (a refused publish).
const refusals = [];
(async () => {
  for await (const s of nc.status()) {
    if (s.type === "error") refusals.push(String(s.data));
  }
})();

// Read the session: every event stored under its subjects, in order.
const js = nc.jetstream();
const consumer = await js.consumers.get("SYLK", { filterSubjects: [`sylk.v1.${session}.>`] });
let read = 0;
const messages = await consumer.consume({ expires: 5_000 });
const deadline = setTimeout(() => messages.stop(), 20_000);
for await (const m of messages) {
  const env = decode(m.data);
  if (m.headers?.get("Sylk-Session") !== session || env.session_id !== session) {
    throw new Error(`seq ${m.seq}: an event of session ${env.session_id} in session ${session}'s read`);
  }
  console.log(`event ${m.seq} ${m.headers.get("Sylk-Type")} ${env.source} ${JSON.stringify(env.payload)}`);
  read++;
  if (m.info.pending === 0) break;
}
clearTimeout(deadline);
console.log(`read ${read} events of session ${session}`);

// Publish into the session: a JetStream publish that waits for the stream's
// ack, as any writer would.
const subject = `sylk.v1.${session}.user.guide.user_input`;
let refused = "";
try {
  await js.publish(subject, encode({ type: "user_input", session_id: session, source: "user", payload: { text: "from nats.js" } }), {
    msgID: `natsjs-${Date.now()}`,
    timeout: 5_000,
  });
} catch (err) {
  refused = err.message;
}
await nc.flush(); // the server's -ERR for the publish comes before this answer
const why = refused || refusals.join("; ");
console.log(why ? `publish refused: ${why}` : "publish accepted");

await nc.close();
process.exit(read > 0 && why ? 0 : 1);
