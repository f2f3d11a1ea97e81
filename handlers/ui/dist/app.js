// Built by handlers/ui/build.sh from handlers/ui/src: do not edit.

// src/main.ts
import { ClosedError, MusterClient, MusterError as MusterError4 } from "./muster.js";

// src/dom.ts
function byId(id) {
  const el2 = document.getElementById(id);
  if (el2 === null) throw new Error(`muster ui: #${id} missing from the page`);
  return el2;
}
function el(tag, cls = "", text = "") {
  const e = document.createElement(tag);
  if (cls !== "") e.className = cls;
  if (text !== "") e.textContent = text;
  return e;
}
function setAlert(e, msg) {
  e.textContent = msg;
  e.hidden = msg === "";
}
function fillList(ul, texts, max = 200) {
  const items = texts.slice(0, max).map((t) => el("li", "", t));
  if (texts.length > max) items.push(el("li", "note", `\u2026 and ${texts.length - max} more`));
  ul.replaceChildren(...items);
}
function clock(d) {
  return d.toLocaleTimeString([], { hour12: false });
}

// src/fleet.ts
import { isCode, MusterError as MusterError2 } from "./muster.js";

// src/describe.ts
import { MusterError } from "./muster.js";
function describe(e) {
  if (e instanceof MusterError) return e.detail === "" ? e.code : `${e.code}: ${e.detail}`;
  if (e instanceof Error) return e.message;
  return String(e);
}

// src/fleet.ts
var minGapMs = 1e3;
var everyMs = 1e4;
var FleetPanel = class {
  #client = null;
  #root = "";
  #live = "";
  #busy = false;
  #again = false;
  #last = 0;
  #timer;
  #ac = new AbortController();
  /** Shows the fleet at root against the leases held under live ("" hides the panel). */
  show(client2, root, live) {
    this.stop();
    this.#client = client2;
    this.#root = root;
    this.#live = live;
    this.#ac = new AbortController();
    if (root !== "" && live !== "") this.changed();
  }
  /** Stops refreshing. */
  stop() {
    this.#ac.abort();
    clearTimeout(this.#timer);
    this.#client = null;
  }
  /** The observed leases changed: refresh soon. */
  changed() {
    if (this.#client === null || this.#root === "") return;
    if (this.#busy) {
      this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    const wait = Math.max(0, this.#last + minGapMs - Date.now());
    this.#timer = setTimeout(() => void this.#refresh(), wait);
  }
  async #refresh() {
    const c = this.#client;
    if (c === null) return;
    const signal = this.#ac.signal;
    this.#busy = true;
    this.#last = Date.now();
    try {
      const f = c.fleet(this.#root);
      const desired = [];
      for await (const s of f.desired({ signal })) desired.push(s.name);
      const gap = await f.gap(this.#live, { signal });
      if (signal.aborted) return;
      fillList(byId("desired"), desired);
      fillList(byId("missing"), gap.missing);
      fillList(byId("orphans"), gap.orphans);
      byId("desired-n").textContent = `(${desired.length})`;
      byId("missing-n").textContent = `(${gap.missing.length})`;
      byId("orphans-n").textContent = `(${gap.orphans.length})`;
      byId("fleet-at").textContent = `fleet://${this.#root} against ${this.#live} at revision ${gap.revision}, read ${(/* @__PURE__ */ new Date()).toLocaleTimeString([], { hour12: false })}`;
      byId("fleet").hidden = false;
      setAlert(byId("fleet-error"), "");
    } catch (e) {
      if (signal.aborted) return;
      byId("fleet").hidden = true;
      setAlert(byId("fleet-error"), describe(e));
      if (e instanceof MusterError2 && (isCode(e, "forbidden") || isCode(e, "unauthenticated") || e.advice === "retry-no")) return;
    } finally {
      this.#busy = false;
    }
    if (signal.aborted) return;
    if (this.#again) {
      this.#again = false;
      this.changed();
    } else {
      this.#timer = setTimeout(() => void this.#refresh(), everyMs);
    }
  }
};

// src/reason.ts
import { MusterError as MusterError3, StreamEndError, StreamEndedError, isCode as isCode2 } from "./muster.js";
function reasonOf(err) {
  if (err === null) return "";
  if (err instanceof StreamEndError) {
    switch (err.reason) {
      case "overflow":
        return "overflow: changes were lost, rebuilding the view";
      case "shutdown":
        return "broker restart: the broker shut down";
      default:
        return `the stream ended: ${err.reason}`;
    }
  }
  if (isCode2(err, "epoch_changed")) return "broker restart: new epoch during the bootstrap";
  if (err instanceof StreamEndedError) return "network: the stream dropped";
  if (err instanceof MusterError3) return describe(err);
  return `network: ${err.message}`;
}

// src/leases.ts
function diff(prev, next) {
  const out = [];
  const seen = /* @__PURE__ */ new Set();
  for (const it of next) {
    seen.add(it.route);
    const old = prev.get(it.route);
    if (old === void 0) out.push({ kind: "acquired", route: it.route, item: it });
    else if (!same(old, it)) {
      out.push({ kind: "changed", route: it.route, item: it });
    }
  }
  for (const route of prev.keys()) if (!seen.has(route)) out.push({ kind: "left", route, item: null });
  return out.sort((a, b) => a.route < b.route ? -1 : a.route > b.route ? 1 : 0);
}
function same(a, b) {
  return a.holderIncarnation === b.holderIncarnation && a.ownerId === b.ownerId && a.renewals === b.renewals && +a.acquiredAt === +b.acquiredAt;
}
var LeaseTable = class {
  #body;
  #rows = /* @__PURE__ */ new Map();
  constructor(body) {
    this.#body = body;
  }
  /** The items shown, by route. */
  get items() {
    return new Map([...this.#rows].map(([k, r]) => [k, r.item]));
  }
  /** Makes the rows those of items (sorted by route): new rows are highlighted, gone ones removed. */
  show(items) {
    const keep = /* @__PURE__ */ new Set();
    let before = this.#body.firstElementChild;
    for (const it of items) {
      keep.add(it.route);
      let r = this.#rows.get(it.route);
      if (r !== void 0 && r.item !== it && same(r.item, it)) {
        r.item = it;
        r.deadline = performance.now() + it.remainingMs;
      } else if (r === void 0 || r.item !== it) {
        const fresh = this.#row(it);
        if (r !== void 0) r.tr.replaceWith(fresh.tr);
        r = fresh;
        this.#rows.set(it.route, r);
      }
      if (r.tr !== before) this.#body.insertBefore(r.tr, before);
      before = r.tr.nextElementSibling;
    }
    for (const [route, r] of this.#rows) {
      if (!keep.has(route)) {
        r.tr.remove();
        this.#rows.delete(route);
      }
    }
    this.tick();
  }
  /** Updates every "expires in" cell. */
  tick() {
    const now = performance.now();
    for (const r of this.#rows.values()) {
      const ms = r.deadline - now;
      if (ms > 0) {
        r.expires.textContent = `${(ms / 1e3).toFixed(1)} s`;
        r.expires.classList.remove("late");
      } else {
        r.expires.textContent = "renewed?";
        r.expires.title = "past the expiry seen last; extends send no event, the next reconciliation refreshes the row";
        r.expires.classList.add("late");
      }
    }
  }
  #row(it) {
    const tr = el("tr", "fresh");
    tr.dataset["route"] = it.route;
    const td = (cls, text) => {
      const c = el("td", cls, text);
      tr.append(c);
      return c;
    };
    td("route", it.route);
    td("owner", it.ownerId);
    td("inc opt", it.holderIncarnation).title = it.holderIncarnation;
    td("opt", clock(it.acquiredAt)).title = it.acquiredAt.toISOString();
    const expires = td("num expires", "");
    td("num renewals", String(it.renewals));
    return { tr, item: it, expires, deadline: performance.now() + it.remainingMs };
  }
};

// src/main.ts
var keys = { token: "muster.ui.token", selector: "muster.ui.selector", root: "muster.ui.fleet-root", live: "muster.ui.fleet-live" };
var maxEvents = 200;
var apiBase = new URL("..", location.href).href;
var rateWindowMs = 1e4;
var ui = {
  form: byId("watch-form"),
  selector: byId("selector"),
  token: byId("token"),
  stop: byId("stop"),
  state: byId("state"),
  error: byId("error"),
  table: byId("leases"),
  scroll: byId("leases").parentElement,
  empty: byId("empty"),
  events: byId("events"),
  fleetForm: byId("fleet-form"),
  fleetRoot: byId("fleet-root"),
  fleetLive: byId("fleet-live")
};
var table = new LeaseTable(byId("rows"));
var fleet = new FleetPanel();
var client = null;
var observer = null;
var everReady = false;
var lastEpoch = "";
var episode = "";
var changeTimes = [];
function setState(s, text) {
  ui.state.dataset["state"] = s;
  ui.state.textContent = text;
}
function log(cls, text, revision) {
  const li = el("li", cls);
  li.append(el("span", "time", clock(/* @__PURE__ */ new Date()) + " "));
  if (revision !== void 0) li.append(el("span", "rev", `r${revision} `));
  li.append(document.createTextNode(text));
  ui.events.prepend(li);
  while (ui.events.childElementCount > maxEvents) ui.events.lastElementChild.remove();
}
function render(o, v) {
  if (o !== observer) return;
  if (o.stopped) {
    if (o.error instanceof ClosedError) return;
    setState("stopped", `stopped: ${o.error instanceof MusterError4 ? o.error.code : "error"}`);
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
    setState("ready", `ready \xB7 epoch ${v.epoch} \xB7 r${v.revision}`);
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
      setState("recovering", `recovering \xB7 ${episode}${why !== episode && why !== "" ? ` \xB7 last attempt: ${why}` : ""}`);
    } else {
      setState("bootstrapping", why === "" ? "bootstrapping" : `bootstrapping \xB7 last attempt: ${why}`);
    }
  }
  ui.empty.hidden = !v.ready || v.items.length > 0;
  counters(v);
}
async function showPlacement(o) {
  const out = byId("placement");
  const token = ui.token.value;
  try {
    const r = await fetch(new URL("v1/placement", apiBase), { headers: token === "" ? {} : { Authorization: `Bearer ${token}` } });
    if (o !== observer) return;
    if (!r.ok) {
      out.textContent = "\u2013";
      return;
    }
    const p = await r.json();
    if (!p.placed) out.textContent = "single broker";
    else if (p.owner === void 0) out.textContent = "no broker now (a failover is in progress)";
    else out.textContent = `${p.owner.broker} (placement epoch ${p.owner.epoch}) \xB7 answered by ${p.broker ?? "?"}`;
  } catch {
    out.textContent = "\u2013";
  }
}
function logDiff(d, revision) {
  changeTimes.push(performance.now());
  if (d.kind === "acquired") log("acquired", `+ ${d.route} \xB7 ${d.item.ownerId}`, revision);
  else if (d.kind === "changed") log("changed", `~ ${d.route} \xB7 ${d.item.ownerId} (renewals ${d.item.renewals})`, revision);
  else log("left", `\u2212 ${d.route}`, revision);
}
function counters(v) {
  const now = performance.now();
  while (changeTimes.length > 0 && changeTimes[0] < now - rateWindowMs) changeTimes.shift();
  byId("rate").textContent = (changeTimes.length / (rateWindowMs / 1e3)).toFixed(1);
  if (v === null) return;
  byId("held").textContent = String(v.items.length);
  byId("revision").textContent = v.revision === 0 && !v.ready ? "\u2013" : String(v.revision);
  byId("epoch").textContent = v.epoch === "" ? "\u2013" : v.epoch;
  byId("recoveries").textContent = String(observer?.stats.recoveries ?? 0);
}
function start(selector, token) {
  void stop();
  sessionStorage.setItem(keys.selector, selector);
  if (token === "") sessionStorage.removeItem(keys.token);
  else sessionStorage.setItem(keys.token, token);
  everReady = false;
  lastEpoch = "";
  episode = "";
  setAlert(ui.error, "");
  table.show([]);
  ui.scroll.hidden = false;
  try {
    client = new MusterClient(apiBase, { token });
    const o = client.observe(selector);
    observer = o;
    o.onChange((v) => render(o, v));
    o.ready.catch(() => {
    });
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
async function stop() {
  const o = observer;
  observer = null;
  fleet.stop();
  ui.stop.disabled = true;
  if (o !== null) {
    await o.close();
    if (observer === null) setState("idle", "idle: stopped");
  }
}
function showFleet() {
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
var fromURL = new URLSearchParams(location.search).get("selector");
ui.token.value = sessionStorage.getItem(keys.token) ?? "";
ui.fleetRoot.value = sessionStorage.getItem(keys.root) ?? "";
ui.fleetLive.value = sessionStorage.getItem(keys.live) ?? "";
var remembered = sessionStorage.getItem(keys.selector);
if (fromURL !== null && fromURL !== "") ui.selector.value = fromURL;
else if (remembered !== null) ui.selector.value = remembered;
if (fromURL || remembered) start(ui.selector.value.trim(), ui.token.value);
