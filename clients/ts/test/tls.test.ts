// ClientOptions.ca against a real broker serving HTTPS (docs/operations.md,
// "TLS"): `go run ./tests/tlsca DIR` makes a throwaway CA and a certificate
// for 127.0.0.1 that it signed; the broker runs in dev mode (no tokens) with
// that `tls:` section. With the CA the client's requests, watch streams and
// observers work over https://127.0.0.1:PORT; without it (or with another
// CA) a request fails with the transport error of Node's fetch (certificate
// not trusted). Also: what the option refuses, and the browser bundle
// carrying no undici.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { MusterClient, MusterError, StreamEndedError, advice, isCode } from "../src/index.js";
import { eventually, startBroker, type Broker } from "./broker.js";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const root = join(pkg, "..", "..");

/** Error codes of Node's TLS for a certificate it does not trust. */
const untrusted = /^(UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_GET_ISSUER_CERT_LOCALLY|CERT_SIGNATURE_FAILURE)$/;

/** The codes along err's cause chain. */
function codes(err: unknown): string[] {
  const out: string[] = [];
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, n = 0; e && typeof e === "object" && n < 10; e = e.cause as typeof e, n++) {
    if (typeof e.code === "string") out.push(e.code);
  }
  return out;
}

/** Asserts err is the transport error of fetch for an untrusted certificate. */
function assertUntrusted(err: unknown): true {
  assert.ok(err instanceof TypeError, `want fetch's TypeError, got ${String(err)}`);
  assert.ok(!(err instanceof MusterError));
  assert.ok(codes(err).some((c) => untrusted.test(c)), `want a certificate error in the cause chain, got ${JSON.stringify(codes(err))}`);
  assert.equal(advice(err), "retry-backoff");
  return true;
}

function tlsca(dir: string): void {
  const r = spawnSync("go", ["run", "./tests/tlsca", dir], { cwd: root, encoding: "utf8" });
  assert.equal(r.status, 0, `go run ./tests/tlsca: ${r.stderr}`);
}

describe("ClientOptions.ca against a broker serving TLS", () => {
  let dir: string;
  let b: Broker;
  let ca: Buffer;
  let otherCa: Buffer;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "muster-ts-tls-"));
    tlsca(join(dir, "pki"));
    tlsca(join(dir, "other")); // another CA, not the broker's
    ca = readFileSync(join(dir, "pki", "ca.pem"));
    otherCa = readFileSync(join(dir, "other", "ca.pem"));
    const tls = readFileSync(join(dir, "pki", "tls.yaml"), "utf8");
    b = await startBroker("", { config: `dev_mode: true\n${tls}` });
  });
  after(async () => {
    await b?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("the broker serves https://127.0.0.1:PORT", () => {
    assert.match(b.url, /^https:\/\/127\.0\.0\.1:\d+$/);
  });

  test("with the CA: a session, a lease acquired and released, a watch stream's marker and its change, an observer", async () => {
    await using c = new MusterClient(b.url, { ca });
    await using w = await c.watch("lease://tls/jobs/*");
    assert.ok(w.marker.epoch !== "", "the marker names the broker lifetime");
    assert.equal(w.marker.selectors.length, 1);
    assert.equal(w.marker.selectors[0]!.selector, "lease://tls/jobs/*");
    await using o = c.observe("lease://tls/jobs/*");
    await o.ready;
    await using s = await c.session("tls-worker", 10_000);
    const l = await s.acquire("lease://tls/jobs/one", 10_000);
    assert.equal(l.route, "lease://tls/jobs/one");
    const st = await c.get("lease://tls/jobs/one");
    assert.equal(st.held, true);
    const ch = await w.next();
    assert.equal(ch?.route, "lease://tls/jobs/one");
    await eventually(() => o.view().items.some((i) => i.route === "lease://tls/jobs/one"), 5_000, "the observer to see the lease");
    await l.release();
    assert.equal((await c.get("lease://tls/jobs/one")).held, false);
    await eventually(() => o.view().items.length === 0, 5_000, "the observer to see the release");
    assert.equal(c.epoch, w.marker.epoch);
  });

  test("ca takes a string, or a list with other CAs in it; close() closes the Agent and the client stays usable", async () => {
    const c = new MusterClient(b.url, { ca: [otherCa.toString("utf8"), ca.toString("utf8")] });
    assert.equal((await c.listPage("lease://tls/**")).items.length, 0);
    await c.close();
    assert.equal((await c.listPage("lease://tls/**")).items.length, 0);
    await c.close();
  });

  test("without the CA: the transport error of fetch, certificate not trusted (requests and watch streams)", async () => {
    const c = new MusterClient(b.url);
    await assert.rejects(c.session("tls-worker", 10_000), assertUntrusted);
    await assert.rejects(c.listPage("lease://tls/**"), assertUntrusted);
    await assert.rejects(c.watch("lease://tls/jobs/*"), assertUntrusted);
  });

  test("with another CA: the same transport error", async () => {
    await using c = new MusterClient(b.url, { ca: otherCa });
    await assert.rejects(c.get("lease://tls/jobs/one"), assertUntrusted);
    await assert.rejects(c.watch("lease://tls/jobs/*"), assertUntrusted);
  });

  test("an observer without the CA never gets ready, and says why", async () => {
    await using o = new MusterClient(b.url).observe("lease://tls/jobs/*", { reconcileIntervalMs: 1_000 });
    await eventually(() => o.error !== null, 5_000, "the observer's error");
    const e = o.error instanceof StreamEndedError ? o.error.cause : o.error;
    assertUntrusted(e);
    assert.equal(o.isReady, false);
  });
});

test("ca refuses what holds no PEM certificate: a path, an empty list, a key", () => {
  const refused = (ca: string | Uint8Array | readonly string[], want: RegExp) =>
    assert.throws(
      () => new MusterClient("https://127.0.0.1:1", { ca }),
      (e: unknown) => isCode(e, "invalid_request") && want.test(e.message),
    );
  refused("/etc/muster/ca.pem", /invalid_request: ca: no PEM certificate in it/);
  refused(new Uint8Array([1, 2, 3]), /invalid_request: ca: no PEM certificate in it/);
  refused([], /invalid_request: ca: no certificate/);
  refused(["-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n", "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n"], /invalid_request: ca entry 1: no PEM certificate/);
  // undefined is no CA at all (exactOptionalPropertyTypes: process.env values)
  assert.equal(new MusterClient("https://127.0.0.1:1", { ca: undefined }).baseUrl, "https://127.0.0.1:1");
});

test("ca outside Node (no process.versions.node) is refused: a browser trusts its system's store", () => {
  const d = Object.getOwnPropertyDescriptor(globalThis, "process")!;
  Object.defineProperty(globalThis, "process", { value: undefined, configurable: true, writable: true });
  let err: unknown;
  try {
    new MusterClient("https://127.0.0.1:1", { ca: "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n" });
  } catch (e) {
    err = e;
  } finally {
    Object.defineProperty(globalThis, "process", d);
  }
  assert.ok(isCode(err, "invalid_request"), String(err));
  assert.match(err.message, /invalid_request: ca: only Node/);
});

test("the browser bundle carries no undici: package.json's browser field maps it to nothing", () => {
  const bundle = readFileSync(join(pkg, "dist", "browser", "muster.js"), "utf8");
  assert.match(bundle, /\(disabled\):node_modules\/undici\/index\.js/);
  assert.doesNotMatch(bundle, /node:(net|tls)|require\("(net|tls)"\)|class Agent\b/);
  const p = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")) as { browser?: Record<string, unknown>; dependencies?: Record<string, string> };
  assert.deepEqual(p.browser, { undici: false });
  assert.match(p.dependencies?.["undici"] ?? "", /^6\.\d+\.\d+$/, "undici pinned to an exact 6.x");
});
