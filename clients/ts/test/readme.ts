/**
 * The code blocks of README.md, so that test/package.test.ts type-checks
 * and runs them as a user would: every fenced block tagged ts, typescript,
 * js or javascript is an example. Each is a whole file of an ESM project
 * unless the line before its fence (blank lines aside) is the marker
 * `<!-- commonjs -->`: then it is a file of a CommonJS project. Every
 * example runs against a broker (MUSTER_ADDR, MUSTER_TOKEN) unless it is
 * marked `<!-- not-run -->` (for a block that cannot run here, which is
 * still type-checked); markers may stand on consecutive lines.
 */

export type Project = "esm" | "commonjs";

export interface Block {
  /** The heading (## or ###) the block is under. */
  heading: string;
  /** The 1-based line of the opening fence. */
  line: number;
  lang: "ts" | "js";
  project: Project;
  run: boolean;
  code: string;
}

const langs: Record<string, "ts" | "js"> = { ts: "ts", typescript: "ts", js: "js", javascript: "js" };
const markers = new Set(["<!-- commonjs -->", "<!-- not-run -->"]);

export function readmeBlocks(md: string): Block[] {
  const out: Block[] = [];
  const lines = md.split("\n");
  let heading = "";
  let marks: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const h = /^#{2,3} (.*)$/.exec(line);
    if (h) heading = h[1]!;
    const fence = /^(`{3,})\s*([\w-]*)/.exec(line);
    if (fence) {
      const close = new RegExp(`^${fence[1]}\\s*$`);
      let j = i + 1;
      while (j < lines.length && !close.test(lines[j]!)) j++;
      if (j === lines.length) throw new Error(`README.md:${i + 1}: the code block is not closed`);
      const lang = langs[fence[2]!.toLowerCase()];
      if (lang !== undefined) {
        const odd = marks.filter((m) => !markers.has(m));
        if (odd.length > 0) throw new Error(`README.md:${i + 1}: unknown marker ${odd.join(" ")} before the block (want ${[...markers].join(" or ")})`);
        out.push({
          heading,
          line: i + 1,
          lang,
          project: marks.includes("<!-- commonjs -->") ? "commonjs" : "esm",
          run: !marks.includes("<!-- not-run -->"),
          code: lines.slice(i + 1, j).join("\n") + "\n",
        });
      }
      i = j;
      marks = [];
      continue;
    }
    const t = line.trim();
    if (/^<!--.*-->$/.test(t)) marks.push(t);
    else if (t !== "") marks = [];
  }
  return out;
}
