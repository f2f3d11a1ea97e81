// Bundles src/main.ts into OUTDIR/app.js with the SDK's pinned esbuild
// (clients/ts/node_modules). Imports of "@muster/client" are left as
// imports of "./muster.js": the page loads the SDK's own browser bundle
// beside app.js. Usage: node build.mjs OUTDIR (build.sh runs it).
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import path from "node:path";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../clients/ts/package.json"));
const esbuild = require("esbuild");
const out = process.argv[2];
if (!out) {
  console.error("usage: node build.mjs OUTDIR");
  process.exit(2);
}

await esbuild.build({
  entryPoints: [path.join(here, "src/main.ts")],
  absWorkingDir: here,
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  outfile: path.join(out, "app.js"),
  banner: { js: "// Built by handlers/ui/build.sh from handlers/ui/src: do not edit." },
  logLevel: "warning",
  plugins: [
    {
      name: "muster-client-beside",
      setup(b) {
        b.onResolve({ filter: /^@muster\/client$/ }, () => ({ path: "./muster.js", external: true }));
      },
    },
  ],
});
