/**
 * Muster's live dashboard (/ui/): the held leases under a selector, driven by
 * the SDK's observer, with its state (bootstrapping, ready, recovering with
 * the reason, stopped with the error), an event log, counters and a fleet's
 * gap. Built with @muster/client's browser bundle (served beside it as
 * muster.js); talks only to the broker that served it, at the directory above
 * the page (apiBase), so that it works under a prefix a reverse proxy strips.
 */
import { ClosedError, MusterClient, MusterError, type Observer, type View } from "@muster/client";
import { byId, clock, el, setAlert } from "./dom.js";
import { FleetPanel, describe } from "./fleet.js";
import { reasonOf } from "./reason.js";
import { LeaseTable, diff, type Diff } from "./leases.js";

/** sessionStorage keys: the token lives only as long as the tab. */
const keys = { token: "muster.ui.token", selector: "muster.ui.selector", root: "muster.ui.fleet-root", live: "muster.ui.fleet-live" };
const maxEvents = 200;
/**
 * The broker's base URL: the page is served at <base>/ui/, so the API is its
 * parent directory, "http://host:port/" directly or "https://host/muster/"
 * behind a proxy that serves the broker under /muster/ (never location.origin,
 * which would leave the prefix out).
 */
const apiBase = new URL("..", location.href).href;
const rateWindowMs = 10_000;

type State = "idle" | "bootstrapping" | "ready" | "recovering" | "stopped";

const ui = {
  form: byId<HTMLFormElement>("watch-form"),
  selector: byId<HTMLInputElement>("selector"),
  token: byId<HTMLInputElement>("token"),
  stop: byId<HTMLButtonElement>("stop"),
  state: byId("state"),
  error: byId("error"),
  table: byId("leases"),
  scroll: byId("leases").parentElement!,
  empty: byId("empty"),
  events: byId("events"),
  fleetForm: byId<HTMLFormElement>("fleet-form"),
  fleetRoot: byId<HTMLInputElement>("fleet-root"),
  fleetLive: byId<HTMLInputElement>("fleet-live"),
};

const table = new LeaseTable(byId("rows"));
const fleet = new FleetPanel();
let client: MusterClient | null = null;
let observer: Observer | null = null;
let everReady = false;
let lastEpoch = "";
/** The first reason of the current recovery (a restart is told by the stream's end, before the connection errors). */
let episode = "";
const changeTimes: number[] = [];

function setState(s: State, text: string): void {
  ui.state.dataset["state"] = s;
  ui.state.textContent = text;
}

function log(cls: string, text: string, revision?: number): void {
  const li = el("li", cls);
  li.append(el("span", "time", clock(new Date()) + " "));
  if (revision !== undefined) li.append(el("span", "rev", `r${revision} `));
  li.append(document.createTextNode(text));
  ui.events.prepend(li);
  while (ui.events.childElementCount > maxEvents) ui.events.lastElementChild!.remove();
}

function render(o: Observer, v: View): void {
  if (o !== observer) return;
  if (o.stopped) {
    if (o.error instanceof ClosedError) return;
    setState("stopped", `stopped: ${o.error instanceof MusterError ? o.error.code : "error"}`);
    setAlert(ui.error, `The broker refused to watch ${o.selector}: ${describe(o.error)}`);
    table.show([]);
    ui.scroll.hidden = true;
    ui.empty.hidden = true;
    log("ev-state", `stopped: ${describe(o.error)}`);
    return;
  }
  if (v.ready) {
    if (!everReady || episode !== "") void showPlacement(o);
    if (lastEpoch !== "" && v.epoch !== lastEpoch) log("ev-state", `broker restarted: new epoch ${v.epoch}`);
    if (episode !== "") log("ev-state", `ready again after ${episode}`);
    else if (!everReady) log("ev-state", `ready: epoch ${v.epoch}`);
    episode = "";
    everReady = true;
    lastEpoch = v.epoch;
    for (const d of diff(table.items, v.items)) logDiff(d, v.revision);
    table.show(v.items);
    ui.table.classList.remove("stale");
    setState("ready", `ready · epoch ${v.epoch} · r${v.revision}`);
    setAlert(ui.error, "");
    fleet.changed();
  } else {
    const why = reasonOf(o.error);
    if (everReady) {
      if (episode === "") {
        episode = why;
        log("ev-state", `recovering: ${why}`);
      }
      ui.table.classList.add("stale");
      setState("recovering", `recovering · ${episode}${why !== episode && why !== "" ? ` · last attempt: ${why}` : ""}`);
    } else {
      setState("bootstrapping", why === "" ? "bootstrapping" : `bootstrapping · last attempt: ${why}`);
    }
  }
  ui.empty.hidden = !v.ready || v.items.length > 0;
  counters(v);
}

/** The placement of the token's family (GET /v1/placement), shown when a watch becomes ready. */
interface Placement {
  placed: boolean;
  broker?: string;
  owner?: { broker: string; epoch: number };
}

async function showPlacement(o: Observer): Promise<void> {
  const out = byId("placement");
  const token = ui.token.value;
  try {
    const r = await fetch(new URL("v1/placement", apiBase), { headers: token === "" ? {} : { Authorization: `Bearer ${token}` } });
    if (o !== observer) return;
    if (!r.ok) {
      out.textContent = "–";
      return;
    }
    const p = (await r.json()) as Placement;
    if (!p.placed) out.textContent = "single broker";
    else if (p.owner === undefined) out.textContent = "no broker now (a failover is in progress)";
    else out.textContent = `${p.owner.broker} (placement epoch ${p.owner.epoch}) · answered by ${p.broker ?? "?"}`;
  } catch {
    out.textContent = "–";
  }
}

function logDiff(d: Diff, revision: number): void {
  changeTimes.push(performance.now());
  if (d.kind === "acquired") log("acquired", `+ ${d.route} · ${d.item!.ownerId}`, revision);
  else if (d.kind === "changed") log("changed", `~ ${d.route} · ${d.item!.ownerId} (renewals ${d.item!.renewals})`, revision);
  else log("left", `− ${d.route}`, revision);
}

function counters(v: View | null): void {
  const now = performance.now();
  while (changeTimes.length > 0 && changeTimes[0]! < now - rateWindowMs) changeTimes.shift();
  byId("rate").textContent = (changeTimes.length / (rateWindowMs / 1000)).toFixed(1);
  if (v === null) return;
  byId("held").textContent = String(v.items.length);
  byId("revision").textContent = v.revision === 0 && !v.ready ? "–" : String(v.revision);
  byId("epoch").textContent = v.epoch === "" ? "–" : v.epoch;
  byId("recoveries").textContent = String(observer?.stats.recoveries ?? 0);
}

function start(selector: string, token: string): void {
  void stop();
  sessionStorage.setItem(keys.selector, selector);
  if (token === "") sessionStorage.removeItem(keys.token);
  else sessionStorage.setItem(keys.token, token);
  everReady = false;
  lastEpoch = "";
  episode = "";
  setAlert(ui.error, "");
  table.show([]); // a new selector starts from an empty table
  ui.scroll.hidden = false;
  try {
    client = new MusterClient(apiBase, { token });
    const o = client.observe(selector);
    observer = o;
    o.onChange((v) => render(o, v));
    o.ready.catch(() => {}); // the stop is shown through onChange
  } catch (e) {
    setState("stopped", "stopped");
    setAlert(ui.error, describe(e));
    return;
  }
  ui.stop.disabled = false;
  setState("bootstrapping", "bootstrapping");
  log("ev-state", `watching ${selector}`);
  if (ui.fleetRoot.value.trim() !== "") showFleet();
}

async function stop(): Promise<void> {
  const o = observer;
  observer = null;
  fleet.stop();
  ui.stop.disabled = true;
  if (o !== null) {
    await o.close();
    if (observer === null) setState("idle", "idle: stopped"); // not when a new watch started meanwhile
  }
}

function showFleet(): void {
  const root = ui.fleetRoot.value.trim();
  const live = ui.fleetLive.value.trim() || ui.selector.value.trim();
  sessionStorage.setItem(keys.root, root);
  sessionStorage.setItem(keys.live, ui.fleetLive.value.trim());
  client ??= new MusterClient(apiBase, { token: ui.token.value });
  fleet.show(client, root, live);
}

ui.form.addEventListener("submit", (e) => {
  e.preventDefault();
  const selector = ui.selector.value.trim();
  if (selector !== "") start(selector, ui.token.value);
});
ui.stop.addEventListener("click", () => void stop());
ui.fleetForm.addEventListener("submit", (e) => {
  e.preventDefault();
  showFleet();
});
setInterval(() => {
  table.tick();
  counters(null);
}, 250);

// A selector may come in the query string (?selector=…), to link to a view;
// the token never does. A reload of the tab watches again.
const fromURL = new URLSearchParams(location.search).get("selector");
ui.token.value = sessionStorage.getItem(keys.token) ?? "";
ui.fleetRoot.value = sessionStorage.getItem(keys.root) ?? "";
ui.fleetLive.value = sessionStorage.getItem(keys.live) ?? "";
const remembered = sessionStorage.getItem(keys.selector);
if (fromURL !== null && fromURL !== "") ui.selector.value = fromURL;
else if (remembered !== null) ui.selector.value = remembered;
if (fromURL || remembered) start(ui.selector.value.trim(), ui.token.value);
