/**
 * The shared conformance harness (clients/conformance/harness), as the
 * TypeScript runner drives it: the scenario files, and a running harness
 * with its control API (the broker, the gating proxy and the actors).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** The clients/conformance directory (this file runs from clients/ts/.build/test). */
export const conformanceDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "conformance");

export interface Scenario {
  name: string;
  file: string;
  raw: string;
  steps: Record<string, unknown>[];
  /** Whether it runs on a placed deployment (several brokers). */
  placed: boolean;
}

/** Every scenario file, in name order. */
export function loadScenarios(): Scenario[] {
  const files = readdirSync(conformanceDir).filter((f) => f.endsWith(".json")).sort();
  if (files.length === 0) throw new Error(`no scenarios in ${conformanceDir}`);
  return files.map((f) => {
    const raw = readFileSync(join(conformanceDir, f), "utf8");
    const sc = JSON.parse(raw) as { name: string; steps: Record<string, unknown>[]; placement?: unknown };
    return { name: sc.name, file: f, raw, steps: sc.steps, placed: sc.placement !== undefined };
  });
}

/**
 * The harness's refusal to run a scenario it cannot run here (409
 * scenario_skipped: a placed scenario with MUSTER_TEST_PG=off): the test
 * skips it, saying why.
 */
export class ScenarioSkipped extends Error {}

/** A running harness. */
export class Harness {
  control = "";
  proxy = "";
  tokens: Record<string, string> = {};
  readonly logs: string[] = [];
  #proc: ChildProcess | null = null;

  static async start(): Promise<Harness> {
    const h = new Harness();
    const p = spawn(join(conformanceDir, "run-harness.sh"), [], { stdio: ["pipe", "pipe", "pipe"] });
    h.#proc = p;
    createInterface({ input: p.stderr }).on("line", (l) => {
      h.logs.push(l);
      if (h.logs.length > 200) h.logs.shift();
    });
    const line = await new Promise<string>((resolve, reject) => {
      const rl = createInterface({ input: p.stdout });
      rl.once("line", (l) => {
        rl.close();
        resolve(l);
      });
      p.once("exit", (code) => reject(new Error(`the harness exited (${code}) before its line: ${h.logs.slice(-10).join("\n")}`)));
    });
    const j = JSON.parse(line) as { control: string; proxy: string };
    h.control = j.control;
    h.proxy = j.proxy;
    h.tokens = (await h.#json("GET", "/tokens")) as Record<string, string>;
    return h;
  }

  /** Closes the harness's stdin and waits for it to exit. */
  async stop(): Promise<void> {
    const p = this.#proc;
    this.#proc = null;
    if (p === null || p.exitCode !== null) return;
    const exited = new Promise((r) => p.once("exit", r));
    p.stdin!.end();
    await exited;
  }

  async #json(method: string, path: string, body?: string): Promise<unknown> {
    const r = await fetch(this.control + path, { method, body: body ?? null, headers: body ? { "Content-Type": "application/json" } : {} });
    const text = await r.text();
    if (r.status >= 300) {
      const p = (text.startsWith("{") ? JSON.parse(text) : {}) as { code?: string; detail?: string };
      if (p.code === "scenario_skipped") throw new ScenarioSkipped(p.detail ?? text);
      throw new Error(`${method} ${path}: ${r.status} ${text}`);
    }
    return text === "" ? null : JSON.parse(text);
  }

  load(raw: string): Promise<unknown> {
    return this.#json("POST", "/scenario", raw);
  }

  step(step: Record<string, unknown>): Promise<unknown> {
    return this.#json("POST", "/step", JSON.stringify(step));
  }

  /**
   * The base URLs of a step's brokers (a list of names, resolved with GET
   * /brokers, in that order); the proxy's alone when the step has none. An
   * unknown name fails the step.
   */
  async bases(brokers: unknown): Promise<string[]> {
    if (brokers === undefined || (Array.isArray(brokers) && brokers.length === 0)) return [this.proxy];
    if (!Array.isArray(brokers) || !brokers.every((b) => typeof b === "string")) throw new Error(`brokers ${JSON.stringify(brokers)}: want a list of broker names`);
    const urls = (await this.#json("GET", "/brokers")) as Record<string, string>;
    return brokers.map((b: string) => {
      const u = urls[b];
      if (typeof u !== "string" || u === "") throw new Error(`no broker ${JSON.stringify(b)} in GET /brokers`);
      return u;
    });
  }

  async holder(actor: string): Promise<string> {
    return ((await this.#json("GET", `/holder/${encodeURIComponent(actor)}`)) as { holder_incarnation: string }).holder_incarnation;
  }

  async list(selector: string, token: string): Promise<{ epoch: string; items: { route: string; holder_incarnation: string }[] }> {
    const q = new URLSearchParams({ selector, token });
    return (await this.#json("GET", `/list?${q.toString()}`)) as { epoch: string; items: { route: string; holder_incarnation: string }[] };
  }
}
