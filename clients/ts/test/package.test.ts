// The package as a user gets it: `npm pack` writes the tarball, and `npm
// install <tarball>` puts it into two fresh projects outside the repository,
// one ESM ("type": "module") and one CommonJS, each with TypeScript and
// @types/node at the lockfile's versions and the tsconfig.json of `tsc
// --init` changed only as README.md's "Install" says. Into each go the
// README's code blocks of that kind (test/readme.ts) and a few checks of our
// own; `tsc` type-checks and compiles each project, and node runs every
// compiled README block against the real broker (the first example of each
// kind first), and the checks: `import` and `require` at run time, the
// internal modules unreachable, the browser bundle's types.
import assert from "node:assert/strict";
import { execFile, spawnSync, type SpawnSyncReturns } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { startBroker, tokens, type Broker } from "./broker.js";
import { readmeBlocks, type Block, type Project } from "./readme.js";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const readme = readFileSync(join(pkg, "README.md"), "utf8");
const lock = JSON.parse(readFileSync(join(pkg, "package-lock.json"), "utf8")) as { packages: Record<string, { version: string }> };
const version = (name: string): string => lock.packages[`node_modules/${name}`]!.version;

/** Our own checks, beside the README's blocks, per project. */
const checks: Record<Project, Record<string, string>> = {
  esm: {
    "types.ts": `import { MusterClient, MusterError, isCode, type ObserveOptions, type View } from "@muster/client";
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
    "browser.ts": `import { MusterClient, type Lease } from "@muster/client/browser";
export const c: MusterClient = new MusterClient("http://127.0.0.1:1");
export type L = Lease;
`,
    "internal.ts": `// @ts-expect-error the conformance tests' faults are not exported
import { Broken } from "@muster/client/internal/faults.js";
// @ts-expect-error nor reachable through dist
import { breakClient } from "@muster/client/dist/internal/faults.js";
import * as sdk from "@muster/client";
// @ts-expect-error no test hook on the client
new sdk.MusterClient("http://127.0.0.1:1").stickyOwner = true;
export { Broken, breakClient };
`,
    "loads.ts": `import * as m from "@muster/client";
if (typeof m.MusterClient !== "function") throw new Error("import: no MusterClient");
if ("Broken" in m || "breakClient" in m) throw new Error("import: test hooks exported");
for (const p of ["@muster/client/internal/faults.js", "@muster/client/dist/internal/faults.js"]) {
  const err = await import(p).then(() => new Error("reached " + p), (e: unknown) => e as { code?: string });
  if ((err as { code?: string }).code !== "ERR_PACKAGE_PATH_NOT_EXPORTED") throw err;
}
console.log("esm ok", import.meta.resolve("@muster/client").endsWith("/node_modules/@muster/client/dist/index.js"));
`,
  },
  commonjs: {
    "types.ts": `import m = require("@muster/client");
const c = new m.MusterClient("http://127.0.0.1:1", { token: process.env.MUSTER_TOKEN });
const e: unknown = new m.MusterError("lease_held");
if (m.isCode(e, "lease_held")) console.log(e.code, c.baseUrl);
`,
    "loads.ts": `import m = require("@muster/client");
if (typeof m.MusterClient !== "function" || typeof m.isCode !== "function") throw new Error("require: no MusterClient");
const c = new m.MusterClient("http://127.0.0.1:1");
if (typeof c[Symbol.asyncDispose] !== "function") throw new Error("require: no asyncDispose");
for (const p of ["@muster/client/internal/faults.js", "@muster/client/dist/internal/faults.js", "@muster/client/dist/cjs/internal/faults.js"]) {
  try {
    require(p);
    throw new Error("reached " + p);
  } catch (e) {
    if ((e as { code?: string }).code !== "ERR_PACKAGE_PATH_NOT_EXPORTED") throw e;
  }
}
console.log("cjs ok", require.resolve("@muster/client").endsWith("/node_modules/@muster/client/dist/cjs/index.js"));
`,
  },
};

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): SpawnSyncReturns<string> {
  // A bound for a hung child only: the machine may be loaded, nothing here is timed.
  return spawnSync(cmd, args, { cwd, encoding: "utf8", timeout: 300_000, env });
}

function ok(r: SpawnSyncReturns<string>, what: string): string {
  assert.equal(r.status, 0, `${what}: exit ${r.status} ${r.signal ?? ""}\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

/** A fresh project of kind p with the tarball installed, its tsconfig from tsc --init as the README says. */
async function project(root: string, p: Project, tarball: string): Promise<string> {
  const dir = join(root, p);
  mkdirSync(dir);
  const devDependencies = { typescript: version("typescript"), "@types/node": version("@types/node") };
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: `consumer-${p}`, private: true, type: p === "esm" ? "module" : "commonjs", devDependencies }));
  // Both projects install at once: npm waits mostly on the disk and the cache.
  await promisify(execFile)("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error", tarball], { cwd: dir, timeout: 300_000 });
  ok(run(process.execPath, [join(dir, "node_modules", "typescript", "bin", "tsc"), "--init"], dir), `${p}: tsc --init`);
  // README.md, "Install": "types": ["node"], and "target": "es2022" on Node 20 and 22.
  let cfg = readFileSync(join(dir, "tsconfig.json"), "utf8");
  for (const [from, to] of [
    ['"types": [],', '"types": ["node"],'],
    ['"target": "esnext",', '"target": "es2022",'],
  ] as const) {
    assert.ok(cfg.includes(from), `tsc --init wrote no ${from}:\n${cfg}`);
    cfg = cfg.replace(from, to);
  }
  writeFileSync(join(dir, "tsconfig.json"), cfg);
  return dir;
}

describe("the packed package in fresh ESM and CommonJS projects", () => {
  let root: string;
  let b: Broker | undefined;
  const blocks = readmeBlocks(readme);
  const dirs = {} as Record<Project, string>;
  const files = new Map<Block, string>();
  let tarball = "";
  before(async () => {
    root = mkdtempSync(join(tmpdir(), "muster-ts-consumer-"));
    const packed = JSON.parse(ok(run("npm", ["pack", "--json", "--pack-destination", root], pkg), "npm pack")) as { filename: string }[];
    tarball = join(root, packed[0]!.filename);
    const made = await Promise.all((["esm", "commonjs"] as const).map((p) => project(root, p, tarball)));
    for (const [i, p] of (["esm", "commonjs"] as const).entries()) {
      dirs[p] = made[i]!;
      for (const [f, text] of Object.entries(checks[p])) writeFileSync(join(dirs[p], f), text);
    }
    blocks.forEach((bl, i) => {
      const f = `readme-${String(i).padStart(2, "0")}.${bl.lang}`;
      writeFileSync(join(dirs[bl.project], f), bl.code);
      files.set(bl, f);
    });
    b = await startBroker();
  });
  after(async () => {
    await b?.kill();
    rmSync(root, { recursive: true, force: true });
  });

  test("README.md's install lines name the tarball npm pack writes and the lockfile's TypeScript", () => {
    assert.match(readme, new RegExp(`npm install \\S+/${tarball.split("/").pop()!.replace(/\./g, "\\.")}\\n`));
    const [maj, min] = version("typescript").split(".");
    assert.match(readme, new RegExp(`typescript@${maj}\\.${min} @types/node@${version("@types/node").split(".")[0]} `));
  });

  test("README.md has examples of both kinds, and marks only the TLS block not-run", () => {
    assert.ok(blocks.length >= 6, `README ts blocks: ${blocks.length}`);
    for (const h of ["Install", "Five minutes", "Batches", "Idioms"]) assert.ok(blocks.some((bl) => bl.heading === h && bl.run), `a run block under ${h}`);
    assert.equal(blocks.filter((bl) => bl.project === "commonjs").length, 1);
    assert.deepEqual(
      blocks.filter((bl) => !bl.run).map((bl) => bl.heading),
      ["TLS: a private CA"],
    );
  });

  for (const p of ["esm", "commonjs"] as const) {
    test(`${p}: tsc type-checks and compiles the project, every README block of its kind included`, () => {
      const legend = blocks.filter((bl) => bl.project === p).map((bl) => `${files.get(bl)!} is README.md:${bl.line} (${bl.heading})`);
      ok(run(process.execPath, [join(dirs[p], "node_modules", "typescript", "bin", "tsc"), "-p", ".", "--outDir", "out", "--allowJs", "--checkJs"], dirs[p]), `${p}: tsc (${legend.join("; ")})`);
    });

    test(`${p}: the package loads its own build; its internal modules are not exported`, () => {
      assert.match(ok(run(process.execPath, ["out/loads.js"], dirs[p]), `${p}: loads.js`), / ok true$/m);
    });

    test(`${p}: every README block runs against the broker`, () => {
      const env = { ...process.env, MUSTER_ADDR: b!.url, MUSTER_TOKEN: tokens.a.secret };
      for (const bl of blocks.filter((x) => x.project === p && x.run)) {
        const out = ok(run(process.execPath, [`out/${files.get(bl)!.replace(/\.ts$/, ".js")}`], dirs[p], env), `README.md:${bl.line} (${bl.heading})`);
        if (bl.heading === "Install") assert.match(out, /^lease:\/\/acme\/renderers\/doc-1 \d+$/m, `README.md:${bl.line}`);
        if (bl.heading === "Five minutes") {
          assert.match(out, /^lease_held retry-backoff$/m);
          assert.match(out, /^rendering doc-124 with fencing token \d+$/m);
          assert.doesNotMatch(out, /lost:/);
        }
        if (bl.heading === "Batches") assert.match(out, /^2 leases renewed$/m);
      }
    });
  }
});
