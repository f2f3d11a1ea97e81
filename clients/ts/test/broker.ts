/**
 * The real broker binary for tests: `muster serve` on a loopback port with a
 * fresh data dir and the conformance tokens. test.sh builds the binary and
 * passes its path in MUSTER_BIN.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

/** The tokens every test broker knows: two families, a narrow reader and a writer of lease://acme/renderers/* only. */
export const tokens = {
  a: { secret: "secret-a", family: "fam-a", grants: ["lease://**#*", "fleet://**#*"] },
  b: { secret: "secret-b", family: "fam-b", grants: ["lease://**#*", "fleet://**#*"] },
  narrow: { secret: "secret-narrow", family: "fam-a", grants: ["lease://acme/renderers/*#read"] },
  renderers: { secret: "secret-renderers", family: "fam-a", grants: ["lease://acme/renderers/*#*"] },
} as const;

export interface Broker {
  url: string;
  kill(): Promise<void>;
  restart(): Promise<void>;
  logs: string[];
}

export function brokerBin(): string {
  const bin = process.env["MUSTER_BIN"];
  if (!bin) throw new Error("MUSTER_BIN is not set: run the tests through clients/ts/test.sh");
  return bin;
}

/**
 * Starts a broker; kill() stops it and removes its directory. extraConfig is
 * appended to the configuration file after the tokens (e.g. a `limits:`
 * section); options.config replaces the whole file (the tokens too). A
 * broker serving TLS (a `tls:` section) gets an https:// url.
 */
export async function startBroker(extraConfig = "", options: { config?: string } = {}): Promise<Broker> {
  const dir = mkdtempSync(join(tmpdir(), "muster-ts-"));
  const config = join(dir, "muster.yaml");
  let y = "tokens:\n";
  for (const [name, t] of Object.entries(tokens)) {
    const sum = createHash("sha256").update(t.secret).digest("hex");
    y += `  - name: ${name}\n    sha256: ${sum}\n    family: ${t.family}\n    grants:\n`;
    for (const g of t.grants) y += `      - ${JSON.stringify(g)}\n`;
  }
  writeFileSync(config, options.config ?? y + extraConfig, { mode: 0o600 });
  let scheme = "http";
  const logs: string[] = [];
  let proc: ChildProcess | null = null;
  let addr = "127.0.0.1:0";
  const start = (): Promise<string> =>
    new Promise((resolve, reject) => {
      const p = spawn(brokerBin(), ["serve", "--addr", addr, "--data-dir", join(dir, "data"), "--config", config], {
        stdio: ["ignore", "ignore", "pipe"],
      });
      proc = p;
      const rl = createInterface({ input: p.stderr });
      const timer = setTimeout(() => reject(new Error(`the broker did not start: ${logs.slice(-5).join("\n")}`)), 30_000);
      rl.on("line", (line) => {
        logs.push(line);
        try {
          const l = JSON.parse(line) as { msg?: string; addr?: string; tls?: boolean };
          if (l.msg === "muster serving" && l.addr) {
            scheme = l.tls === true ? "https" : "http";
            clearTimeout(timer);
            resolve(l.addr);
          }
        } catch {
          // not a JSON log line
        }
      });
      p.on("exit", () => {
        clearTimeout(timer);
        reject(new Error(`the broker exited before serving: ${logs.slice(-5).join("\n")}`));
      });
    });
  const stop = async (): Promise<void> => {
    const p = proc;
    proc = null;
    if (p === null || p.exitCode !== null) return;
    const exited = new Promise((r) => p.once("exit", r));
    p.kill("SIGKILL");
    await exited;
  };
  addr = await start();
  return {
    url: `${scheme}://${addr}`,
    logs,
    async kill() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
    async restart() {
      await stop();
      const deadline = Date.now() + 10_000;
      for (;;) {
        try {
          await start();
          return;
        } catch (e) {
          if (Date.now() > deadline) throw e;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    },
  };
}

/** Polls cond every 10 ms until it holds or ms pass. */
export async function eventually(cond: () => boolean | Promise<boolean>, ms = 5_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
