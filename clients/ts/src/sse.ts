/**
 * An event-stream parser by the WHATWG "event stream interpretation" rules,
 * fed with decoded text in chunks of any size (a chunk may end anywhere,
 * even between the CR and LF of one line ending):
 *
 * - a leading byte-order mark is dropped;
 * - lines end with CR LF, LF or CR;
 * - a line starting with a colon is a comment;
 * - "field: value" loses one space after the colon, a line without a colon is
 *   a field with an empty value;
 * - data lines are joined with LF; a blank line dispatches the event unless
 *   it had no data field;
 * - `retry` with only ASCII digits sets {@link SSEParser.retry}; an `id`
 *   containing NUL is ignored; unknown fields are ignored;
 * - an event not ended by a blank line before the end of the stream is
 *   discarded (the caller simply stops feeding).
 */

/** One dispatched Server-Sent Event. */
export interface SSEEvent {
  /** The event type; "message" when the event had no event field. */
  readonly name: string;
  /** The stream's last event ID as of this event. */
  readonly id: string;
  /** The data lines joined by LF. */
  readonly data: string;
}

/** The parser refused a line or an event larger than its limit. */
export class EventTooLargeError extends Error {
  override name = "EventTooLargeError";
  constructor() {
    super("muster: event-stream event too large");
  }
}

/** The default bound of the characters buffered for one event. */
export const maxEventSize = 8 << 20;

/** An incremental event-stream parser; see the file comment for the rules. */
export class SSEParser {
  /** The last valid `retry` value in ms, null when none was sent. */
  retry: number | null = null;
  readonly #max: number;
  #line = "";
  #started = false;
  #skipLF = false;
  #data = "";
  #hasData = false;
  #name = "";
  #lastId = "";
  #failed = false;

  constructor(max = maxEventSize) {
    this.#max = max;
  }

  /**
   * Feeds the next chunk of text and returns the events it completed. After
   * an EventTooLargeError every call throws again.
   */
  feed(chunk: string): SSEEvent[] {
    if (this.#failed) throw new EventTooLargeError();
    const out: SSEEvent[] = [];
    let i = 0;
    if (chunk.length > 0 && this.#skipLF) {
      this.#skipLF = false;
      if (chunk.charCodeAt(0) === 10) i = 1;
    }
    while (i < chunk.length) {
      let j = i;
      while (j < chunk.length) {
        const c = chunk.charCodeAt(j);
        if (c === 10 || c === 13) break;
        j++;
      }
      if (this.#line.length + (j - i) > this.#max) return this.#fail();
      this.#line += chunk.slice(i, j);
      if (j === chunk.length) break;
      if (chunk.charCodeAt(j) === 13) {
        if (j + 1 === chunk.length) this.#skipLF = true;
        else if (chunk.charCodeAt(j + 1) === 10) j++;
      }
      i = j + 1;
      const line = this.#takeLine();
      if (line === "") {
        const ev = this.#dispatch();
        if (ev !== null) out.push(ev);
      } else if (!this.#field(line)) {
        return this.#fail();
      }
    }
    return out;
  }

  #fail(): never {
    this.#failed = true;
    throw new EventTooLargeError();
  }

  #takeLine(): string {
    let line = this.#line;
    this.#line = "";
    if (!this.#started) {
      this.#started = true;
      if (line.charCodeAt(0) === 0xfeff) line = line.slice(1);
    }
    return line;
  }

  /** Applies one field line; false when the event grew past the limit. */
  #field(line: string): boolean {
    if (line.charCodeAt(0) === 58) return true; // ':' comment
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    switch (name) {
      case "data":
        if (this.#data.length + value.length + 1 > this.#max) return false;
        this.#data += value + "\n";
        this.#hasData = true;
        break;
      case "event":
        this.#name = value;
        break;
      case "id":
        if (!value.includes("\0")) this.#lastId = value;
        break;
      case "retry":
        if (/^[0-9]+$/.test(value)) this.retry = Number(value);
        break;
    }
    return true;
  }

  #dispatch(): SSEEvent | null {
    const ev = this.#hasData
      ? { name: this.#name === "" ? "message" : this.#name, id: this.#lastId, data: this.#data.slice(0, -1) }
      : null;
    this.#data = "";
    this.#hasData = false;
    this.#name = "";
    return ev;
  }
}
