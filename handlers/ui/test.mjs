// Runs the page's Node tests (test/*.test.ts): each is bundled with the
// SDK's source by the SDK's pinned esbuild into a temporary directory and
// run with node --test. check.sh runs this after the staleness check.
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { spawnSync } from "node:child_process";
import os from "node:os";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../clients/ts/package.json"));
const esbuild = require("esbuild");
const out = mkdtempSync(path.join(os.tmpdir(), "muster-ui-test-"));
try {
  const tests = readdirSync(path.join(here, "test")).filter((f) => f.endsWith(".test.ts"));
  await esbuild.build({
    absWorkingDir: here,
    entryPoints: tests.map((f) => path.join(here, "test", f)),
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    outdir: out,
    outExtension: { ".js": ".mjs" },
    logLevel: "warning",
    alias: { "@muster/client": path.join(here, "../../clients/ts/src/index.ts") },
  });
  const files = readdirSync(out).map((f) => path.join(out, f));
  const r = spawnSync(process.execPath, ["--test", ...files], { stdio: "inherit" });
  process.exitCode = r.status ?? 1;
} finally {
  rmSync(out, { recursive: true, force: true });
}
