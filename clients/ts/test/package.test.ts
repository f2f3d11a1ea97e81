// The package as a user gets it, in a fresh project: node_modules/@muster/client
// is a symlink to this directory (what `npm install <folder>` makes), so the
// resolution goes through package.json's "exports" exactly as after an
// install. It checks `import` and `require` at run time, the internal modules
// being unreachable, and type-checks with TypeScript 5.9's `tsc --init`
// options (module nodenext, strict, exactOptionalPropertyTypes,
// noUncheckedIndexedAccess, verbatimModuleSyntax) a .mts file, a .cts file,
// the browser bundle's types and every `ts` code block of README.md; then it
// runs the README's "Five minutes" block against the real broker.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { transform } from "esbuild";
import { startBroker, tokens, type Broker } from "./broker.js";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** The README's ts code blocks, each with the heading (## or ###) it is under. */
export function readmeBlocks(md: string): { heading: string; code: string }[] {
  const out: { heading: string; code: string }[] = [];
  let heading = "";
  let code: string[] | null = null;
  for (const line of md.split("\n")) {
    if (code === null) {
      const h = /^#{2,3} (.*)$/.exec(line);
      if (h) heading = h[1]!;
      if (line.trim() === "```ts") code = [];
    } else if (line.trim() === "```") {
      out.push({ heading, code: code.join("\n") });
      code = null;
    } else {
      code.push(line);
    }
  }
  return out;
}

/**
 * What a block needs that the README leaves to the reader, appended after it
 * (function declarations are hoisted; declare const only types).
 */
const preludes: Record<string, string> = {
  "Five minutes": "async function render(_doc: string, _token: number, _signal: AbortSignal): Promise<void> {}",
  Batches: 'import type { Session } from "@muster/client";\ndeclare const s: Session;\ndeclare const myShare: string[];',
  Idioms: "async function render(_doc: string, _token: number, _signal: AbortSignal): Promise<void> {}",
};

/** tsc --init of TypeScript 5.9, for a project with @types/node, checking only. */
const tsconfig = {
  compilerOptions: {
    module: "nodenext",
    target: "esnext",
    types: ["node"],
    typeRoots: [join(pkg, "node_modules", "@types")],
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    strict: true,
    verbatimModuleSyntax: true,
    isolatedModules: true,
    noUncheckedSideEffectImports: true,
    moduleDetection: "force",
    skipLibCheck: true,
    noEmit: true,
  },
};

const files: Record<string, string> = {
  "esm.mts": `import { MusterClient, MusterError, isCode, type ObserveOptions, type View } from "@muster/client";
const c = new MusterClient("http://127.0.0.1:1", { token: process.env.MUSTER_TOKEN });
const opts: ObserveOptions = { shortestTtlMs: Number(process.env.TTL) || undefined, signal: undefined };
export async function f(o = c.observe("lease://a/b/*", opts)): Promise<number> {
  try {
    await using s = await c.session("w", 10_000);
    await using _l = await s.acquire("lease://a/b/c", 10_000, { waitMs: undefined });
  } catch (e) {
    if (isCode(e, "lease_held")) return e.status; // e: MusterError
    const m: MusterError | undefined = e instanceof MusterError ? e : undefined;
    return m?.status ?? 0;
  }
  for await (const v of o) return (v satisfies View).items.length;
  return 0;
}
`,
  "cjs.cts": `import m = require("@muster/client");
const c = new m.MusterClient("http://127.0.0.1:1", { token: process.env.MUSTER_TOKEN });
const e: unknown = new m.MusterError("lease_held");
if (m.isCode(e, "lease_held")) console.log(e.code, c.baseUrl);
`,
  "browser.mts": `import { MusterClient, type Lease } from "@muster/client/browser";
export const c: MusterClient = new MusterClient("http://127.0.0.1:1");
export type L = Lease;
`,
  "internal.mts": `// @ts-expect-error the conformance tests' faults are not exported
import { Broken } from "@muster/client/internal/faults.js";
// @ts-expect-error nor reachable through dist
import { breakClient } from "@muster/client/dist/internal/faults.js";
import * as sdk from "@muster/client";
// @ts-expect-error no test hook on the client
new sdk.MusterClient("http://127.0.0.1:1").stickyOwner = true;
export { Broken, breakClient };
`,
  "run.cjs": `const m = require("@muster/client");
if (typeof m.MusterClient !== "function" || typeof m.isCode !== "function") throw new Error("require: no MusterClient");
const c = new m.MusterClient("http://127.0.0.1:1");
if (typeof c[Symbol.asyncDispose] !== "function") throw new Error("require: no asyncDispose");
for (const p of ["@muster/client/internal/faults.js", "@muster/client/dist/internal/faults.js", "@muster/client/dist/cjs/internal/faults.js"]) {
  try { require(p); throw new Error("reached " + p); } catch (e) { if (e.code !== "ERR_PACKAGE_PATH_NOT_EXPORTED") throw e; }
}
console.log("cjs ok", require.resolve("@muster/client").endsWith("dist/cjs/index.js"));
`,
  "run.mjs": `import * as m from "@muster/client";
if (typeof m.MusterClient !== "function") throw new Error("import: no MusterClient");
if ("Broken" in m || "breakClient" in m) throw new Error("import: test hooks exported");
try { await import("@muster/client/internal/faults.js"); throw new Error("reached"); } catch (e) { if (e.code !== "ERR_PACKAGE_PATH_NOT_EXPORTED") throw e; }
console.log("esm ok", import.meta.resolve("@muster/client").endsWith("dist/index.js"));
`,
};

describe("the package in a fresh project", () => {
  let dir: string;
  let b: Broker;
  const blocks = readmeBlocks(readFileSync(join(pkg, "README.md"), "utf8"));
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "muster-ts-consumer-"));
    mkdirSync(join(dir, "node_modules", "@muster"), { recursive: true });
    symlinkSync(pkg, join(dir, "node_modules", "@muster", "client"), "dir");
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify(tsconfig, null, 2));
    for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
    blocks.forEach((bl, i) => writeFileSync(join(dir, `readme-${i}.mts`), `${bl.code}\n${preludes[bl.heading] ?? ""}\n`));
    b = await startBroker();
  });
  after(async () => {
    await b.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  test("require and import load it; its internal modules are not exported", () => {
    for (const f of ["run.cjs", "run.mjs"]) {
      const r = spawnSync(process.execPath, [f], { cwd: dir, encoding: "utf8" });
      assert.equal(r.status, 0, `${f}: ${r.stderr}`);
      assert.match(r.stdout, / ok true/);
    }
  });

  test("a .mts, a .cts, the browser bundle and every README block type-check with tsc --init's options", () => {
    assert.ok(blocks.length >= 4, `README ts blocks: ${blocks.length}`);
    for (const h of ["Five minutes", "Batches", "Idioms"]) assert.ok(blocks.some((bl) => bl.heading === h), `a ts block under ${h}`);
    const r = spawnSync(process.execPath, [join(pkg, "node_modules", "typescript", "bin", "tsc"), "-p", dir], { cwd: dir, encoding: "utf8" });
    assert.equal(r.status, 0, `tsc in a fresh project:\n${r.stdout}${r.stderr}`);
  });

  test("the README's Five minutes block runs: lease_held is shown, the release is not a loss", async () => {
    const i = blocks.findIndex((bl) => bl.heading === "Five minutes");
    const js = await transform(`${blocks[i]!.code}\n${preludes["Five minutes"]}\n`, { loader: "ts", format: "esm", target: "node20" });
    writeFileSync(join(dir, "five.mjs"), js.code);
    const r = spawnSync(process.execPath, ["five.mjs"], {
      cwd: dir,
      encoding: "utf8",
      timeout: 20_000,
      env: { ...process.env, MUSTER_ADDR: b.url, MUSTER_TOKEN: tokens.a.secret },
    });
    assert.equal(r.status, 0, `five.mjs: ${r.stderr}\n${r.stdout}`);
    assert.match(r.stdout, /^lease_held retry-backoff$/m);
    assert.doesNotMatch(r.stdout, /lost:/);
  });
});
