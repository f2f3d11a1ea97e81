/** Small DOM helpers. Text only ever goes in through textContent: nothing a broker or a user types is parsed as HTML. */

/** The element with id, or an error naming it (the page and the script ship together). */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (el === null) throw new Error(`muster ui: #${id} missing from the page`);
  return el as T;
}

/** A new element with a class and text. */
export function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls = "", text = ""): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls !== "") e.className = cls;
  if (text !== "") e.textContent = text;
  return e;
}

/** Shows msg in an alert element, or hides it when msg is "". */
export function setAlert(e: HTMLElement, msg: string): void {
  e.textContent = msg;
  e.hidden = msg === "";
}

/** Replaces the items of a list with one <li> per text. */
export function fillList(ul: HTMLElement, texts: readonly string[], max = 200): void {
  const items = texts.slice(0, max).map((t) => el("li", "", t));
  if (texts.length > max) items.push(el("li", "note", `… and ${texts.length - max} more`));
  ul.replaceChildren(...items);
}

/** hh:mm:ss of a date, local time. */
export function clock(d: Date): string {
  return d.toLocaleTimeString([], { hour12: false });
}
