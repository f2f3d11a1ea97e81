// The shape of the SDK's code, as test.sh checks it: no import cycle among
// the modules of each directory tree given (type-only imports count: a
// cycle of types is still a knot to read), and no file over maxLines lines
// (the generated src/api/schema.ts excepted).
//
//   node scripts/shape.mjs DIR...   exit 1 with one line per cycle or oversized file
//
// Imports are read with a regular expression over the TypeScript source:
// `import ... from "./x.js"`, `export ... from "./x.js"`, `import "./x.js"`
// and `import("./x.js")`, relative specifiers only, each resolved to the .ts
// file beside the .js it names.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

export const maxLines = 500;
const generated = new Set(["src/api/schema.ts"]);
const importRe = /(?:\bimport|\bexport)\s*(?:type\s+)?(?:[\w*{}\s,$]*?\bfrom\s*)?["'](\.{1,2}\/[^"']+)["']|\bimport\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g;

/** The .ts files under dir, recursively. */
function sources(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return e.name === "node_modules" ? [] : sources(p);
    return /\.(ts|mts|cts)$/.test(e.name) && !e.name.endsWith(".d.ts") ? [p] : [];
  });
}

/** The files a source imports, as absolute paths. */
export function importsOf(file, text) {
  const out = new Set();
  for (const m of text.matchAll(importRe)) {
    const spec = m[1] ?? m[2];
    out.add(resolve(dirname(file), spec.replace(/\.(m|c)?js$/, ".$1ts")));
  }
  return [...out];
}

/** The cycles of graph (file -> files): its strongly connected components of more than one file, or a file importing itself. */
export function cycles(graph) {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const out = [];
  let n = 0;
  const visit = (v) => {
    index.set(v, n);
    low.set(v, n);
    n++;
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) {
        low.set(v, Math.min(low.get(v), index.get(w)));
      }
    }
    if (low.get(v) === index.get(v)) {
      const scc = [];
      let w;
      do {
        w = stack.pop();
        on.delete(w);
        scc.push(w);
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(scc.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return out;
}

/** The problems of the trees under dirs (relative to base), one line each. */
export function problems(base, dirs) {
  const out = [];
  for (const dir of dirs) {
    const graph = new Map();
    for (const f of sources(resolve(base, dir))) {
      const text = readFileSync(f, "utf8");
      const name = relative(base, f);
      const lines = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
      if (lines > maxLines && !generated.has(name)) out.push(`${name}: ${lines} lines, over ${maxLines}: split it`);
      graph.set(f, importsOf(f, text));
    }
    for (const c of cycles(graph)) out.push(`import cycle: ${c.map((f) => relative(base, f)).join(" <-> ")}`);
  }
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const dirs = process.argv.slice(2);
  if (dirs.length === 0) {
    console.error("usage: node scripts/shape.mjs DIR...");
    process.exit(2);
  }
  const p = problems(process.cwd(), dirs);
  for (const line of p) console.error(`shape: ${line}`);
  process.exit(p.length === 0 ? 0 : 1);
}
