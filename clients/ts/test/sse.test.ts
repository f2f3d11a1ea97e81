// Unit and property tests of the SSE parser (no broker needed).
import assert from "node:assert/strict";
import { test } from "node:test";
import { EventTooLargeError, SSEParser, type SSEEvent } from "../src/sse.js";

/** A small seeded PRNG (mulberry32), so a failure is reproducible from its seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function feedAll(chunks: string[]): { events: SSEEvent[]; retry: number | null } {
  const p = new SSEParser();
  const events: SSEEvent[] = [];
  for (const c of chunks) events.push(...p.feed(c));
  return { events, retry: p.retry };
}

test("basic fields, comments, defaults", () => {
  const { events, retry } = feedAll([
    "\uFEFFretry: 1500\n: keepalive\nevent: snapshot\ndata: {\"a\":1}\n\n",
    "id: 7\nevent: change\ndata:x\ndata: y\n\n",
    "data\n\n",
    "event: nodata\n\n",
    "data: last",
  ]);
  assert.equal(retry, 1500);
  assert.deepEqual(events, [
    { name: "snapshot", id: "", data: '{"a":1}' },
    { name: "change", id: "7", data: "x\ny" },
    { name: "message", id: "7", data: "" },
  ]);
});

test("retry must be digits; id with NUL ignored; one space stripped", () => {
  const { events, retry } = feedAll(["retry: 1x\nretry: 20\nretry: -5\nid: 1\nid: a\0b\ndata:  two spaces\n\n"]);
  assert.equal(retry, 20);
  assert.deepEqual(events, [{ name: "message", id: "1", data: " two spaces" }]);
});

test("CR, LF and CRLF line endings, CRLF split across chunks", () => {
  const want = [
    { name: "a", id: "", data: "1\n2" },
    { name: "b", id: "", data: "3" },
  ];
  for (const eol of ["\n", "\r", "\r\n"]) {
    const s = `event: a${eol}data: 1${eol}data: 2${eol}${eol}event: b${eol}data: 3${eol}${eol}`;
    assert.deepEqual(feedAll([s]).events, want, JSON.stringify(eol));
    for (let i = 0; i <= s.length; i++) {
      assert.deepEqual(feedAll([s.slice(0, i), s.slice(i)]).events, want, `eol ${JSON.stringify(eol)} split at ${i}`);
    }
  }
  // A CR at the end of one chunk and an LF at the start of the next are one line ending.
  assert.deepEqual(feedAll(["data: x\r", "\n", "\r", "\n"]).events, [{ name: "message", id: "", data: "x" }]);
  // CR CR is two line endings.
  assert.deepEqual(feedAll(["data: x\r", "\r"]).events, [{ name: "message", id: "", data: "x" }]);
});

test("a line longer than the limit fails, and keeps failing", () => {
  const p = new SSEParser(16);
  assert.throws(() => p.feed("data: 0123456789abcdef"), EventTooLargeError);
  assert.throws(() => p.feed("\n\n"), EventTooLargeError);
  const q = new SSEParser(16);
  assert.throws(() => q.feed("data: 0123456789\ndata: 0123456789\n"), EventTooLargeError);
});

/** Random events, serialized with random line endings, comments and retry fields. */
function randomStream(r: () => number): { text: string; want: SSEEvent[]; retry: number | null } {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const eols = ["\n", "\r", "\r\n"];
  const alphabet = ["a", "b", "{", "}", ":", " ", "é", "😀", "\"", "x"];
  const word = (): string => Array.from({ length: Math.floor(r() * 6) }, () => pick(alphabet)).join("");
  let text = r() < 0.3 ? "\uFEFF" : "";
  const want: SSEEvent[] = [];
  let retry: number | null = null;
  let id = "";
  const n = 1 + Math.floor(r() * 6);
  // A CR followed by an LF is one line ending: after a CR, an LF-ending is written as CR LF.
  let prev = "";
  const eol = (): string => {
    let e = pick(eols);
    if (prev === "\r" && e === "\n") e = "\r\n";
    prev = e;
    return e;
  };
  for (let e = 0; e < n; e++) {
    if (r() < 0.4) text += `:${word()}${eol()}`;
    if (r() < 0.3) {
      retry = Math.floor(r() * 10_000);
      text += `retry: ${retry}${eol()}`;
    }
    const name = r() < 0.7 ? pick(["change", "snapshot", "overflow"]) : "";
    if (name !== "") text += `event: ${name}${eol()}`;
    if (r() < 0.3) {
      id = String(Math.floor(r() * 1000));
      text += `id: ${id}${eol()}`;
    }
    const lines = Array.from({ length: 1 + Math.floor(r() * 3) }, () => word().replace(/^ /, "_"));
    for (const l of lines) text += (r() < 0.5 ? `data: ${l}` : `data:${l}`) + eol();
    text += eol();
    want.push({ name: name === "" ? "message" : name, id, data: lines.join("\n") });
  }
  return { text, want, retry };
}

test("property: any split of a random stream parses like the whole", () => {
  for (let seed = 1; seed <= 300; seed++) {
    const r = rng(seed);
    const { text, want, retry } = randomStream(r);
    const whole = feedAll([text]);
    assert.deepEqual(whole.events, want, `seed ${seed}`);
    assert.equal(whole.retry, retry, `seed ${seed}`);
    // Split at every position (in two), and into random pieces.
    for (let i = 0; i <= text.length; i++) {
      assert.deepEqual(feedAll([text.slice(0, i), text.slice(i)]).events, want, `seed ${seed} split ${i}`);
    }
    const pieces: string[] = [];
    for (let i = 0; i < text.length; ) {
      const k = 1 + Math.floor(r() * 4);
      pieces.push(text.slice(i, i + k));
      i += k;
    }
    assert.deepEqual(feedAll(pieces).events, want, `seed ${seed} pieces`);
  }
});

test("property: split at every byte through a streaming UTF-8 decoder", () => {
  for (let seed = 1000; seed < 1100; seed++) {
    const { text, want } = randomStream(rng(seed));
    const bytes = new TextEncoder().encode(text);
    for (let i = 0; i <= bytes.length; i++) {
      const d = new TextDecoder();
      const p = new SSEParser();
      const got = [...p.feed(d.decode(bytes.subarray(0, i), { stream: true })), ...p.feed(d.decode(bytes.subarray(i), { stream: true }))];
      assert.deepEqual(got, want, `seed ${seed} byte ${i}`);
    }
  }
});

test("fuzz: arbitrary input never throws anything but EventTooLargeError", () => {
  const r = rng(42);
  const chars = ["\n", "\r", ":", " ", "d", "a", "t", "data", "event", "id", "retry", "\0", "\uFEFF", "9"];
  for (let i = 0; i < 2000; i++) {
    const p = new SSEParser(64);
    try {
      for (let k = 0; k < 20; k++) {
        const s = Array.from({ length: Math.floor(r() * 12) }, () => chars[Math.floor(r() * chars.length)]).join("");
        for (const ev of p.feed(s)) {
          assert.equal(typeof ev.data, "string");
          assert.ok(ev.name.length > 0);
        }
      }
    } catch (e) {
      assert.ok(e instanceof EventTooLargeError, String(e));
    }
  }
});
