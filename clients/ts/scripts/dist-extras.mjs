// The two files of dist/ that tsc and esbuild do not write (npm run build):
// dist/cjs/package.json makes Node and TypeScript read dist/cjs (the
// CommonJS build, with its own .d.ts) as CommonJS inside this ESM package;
// dist/browser/muster.d.ts gives the browser bundle, built from
// src/index.ts, the entry point's types.
import { mkdirSync, writeFileSync } from "node:fs";

mkdirSync("dist/cjs", { recursive: true });
writeFileSync("dist/cjs/package.json", '{ "type": "commonjs" }\n');
mkdirSync("dist/browser", { recursive: true });
writeFileSync("dist/browser/muster.d.ts", '// The browser bundle exports exactly the package entry point.\nexport * from "../index.js";\n');
