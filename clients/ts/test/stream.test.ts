// Watch streams from a hand-written event-stream server: the real broker
// never sends malformed or unknown events, so these cases need a fake.
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import { after, before, describe, test } from "node:test";
import { MusterClient, StreamEndError, StreamEndedError, isCode } from "../src/index.js";

const marker = JSON.stringify({ epoch: "E1", revision: 5, subscriptions: [{ id: "s1", selector: "lease://a/b/*", items: [], next_cursor: null }] });

/** Per test, the body the fake answers (written in chunks of 3 bytes, CRLF endings). */
let body = "";
let status = 200;
let contentType = "text/event-stream";

describe("watch against a fake event stream", () => {
  let srv: Server;
  let c: MusterClient;
  before(async () => {
    srv = createServer((_req, res) => {
      res.writeHead(status, { "Content-Type": contentType, "Muster-Epoch": "E1" });
      const bytes = Buffer.from(body.replace(/\n/g, "\r\n"));
      let i = 0;
      const push = (): void => {
        if (i >= bytes.length) {
          res.end();
          return;
        }
        res.write(bytes.subarray(i, i + 3));
        i += 3;
        setImmediate(push);
      };
      push();
    });
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    c = new MusterClient(`http://127.0.0.1:${(srv.address() as { port: number }).port}`);
  });
  after(() => {
    srv.closeAllConnections();
    srv.close();
  });

  test("unknown events are skipped; a terminal event ends the stream with its reason and revision", async () => {
    status = 200;
    contentType = "text/event-stream";
    body = `retry: 1000\n: hello\nevent: snapshot\ndata: ${marker}\n\nevent: future\ndata: {}\n\nevent: change\nid: 6\ndata: {"subscription_id":"s1","route":"lease://a/b/c","kind":"released","revision":6}\n\nevent: overflow\ndata: {"reason":"overflow","revision":9}\n\n`;
    const sub = await c.watch("lease://a/b/*");
    assert.equal(sub.marker.revision, 5);
    assert.equal(c.epoch, "E1");
    const ch = await sub.next();
    assert.deepEqual(ch, { selector: "lease://a/b/*", route: "lease://a/b/c", kind: "released", revision: 6, item: null });
    assert.equal(await sub.next(), null);
    assert.ok(sub.err instanceof StreamEndError);
    assert.equal(sub.err.reason, "overflow");
    assert.equal(sub.err.revision, 9);
  });

  test("an undecodable change ends the stream, never a crash", async () => {
    for (const data of ["null", "{not json", "[]", '{"route":1}']) {
      body = `event: snapshot\ndata: ${marker}\n\nevent: change\ndata: ${data}\n\n`;
      const sub = await c.watch("lease://a/b/*");
      assert.equal(await sub.next(), null, data);
      assert.ok(sub.err instanceof StreamEndedError && /undecodable change/.test(sub.err.message), String(sub.err));
    }
  });

  test("a connection that closes is a stream end; no marker is an error", async () => {
    body = `event: snapshot\ndata: ${marker}\n\nevent: change\ndata: {"partial`;
    const sub = await c.watch("lease://a/b/*");
    assert.equal(await sub.next(), null);
    assert.ok(sub.err instanceof StreamEndedError && !(sub.err instanceof StreamEndError));
    body = ": nothing\n\n";
    await assert.rejects(c.watch("lease://a/b/*"), /before its marker/);
    body = `event: shutdown\ndata: {"reason":"shutdown"}\n\n`;
    await assert.rejects(c.watch("lease://a/b/*"), (e: unknown) => e instanceof StreamEndError && e.reason === "shutdown");
    body = `event: change\ndata: {}\n\n`;
    await assert.rejects(c.watch("lease://a/b/*"), /not snapshot/);
  });

  test("a non-stream answer is an error, a problem body a MusterError", async () => {
    contentType = "application/json";
    body = "{}";
    await assert.rejects(c.watch("lease://a/b/*"), /not an event stream/);
    status = 429;
    contentType = "application/problem+json";
    body = JSON.stringify({ type: "about:blank", title: "Too Many Requests", status: 429, code: "subscription_limit" });
    await assert.rejects(c.watch("lease://a/b/*"), (e: unknown) => isCode(e, "subscription_limit"));
    status = 200;
    contentType = "text/event-stream";
  });
});
