/**
 * ClientOptions.ca: the certificate authorities a client trusts for an
 * https:// broker, in Node (docs/operations.md, "TLS"). Node's fetch takes
 * them only through an undici dispatcher; a dispatcher of one undici major
 * handed to a fetch of another can fail (Node's own fetch is whichever undici
 * the Node release bundles), so the client sends through the fetch of the same
 * `undici` package that makes the Agent. undici is loaded on the first request
 * (a dynamic import); package.json's "browser" field maps it to nothing, so
 * that no browser build contains it, and a browser refuses the option.
 */
import { MusterError } from "../errors.js";

/** PEM text of one or more CA certificates (a Buffer is a Uint8Array), or a list of them. */
export type CA = string | Uint8Array | readonly (string | Uint8Array)[];

/** What requests go through when a client has a CA: undici's fetch and an Agent that trusts it. */
export interface TLS {
  fetch: typeof globalThis.fetch;
  dispatcher: { close(): Promise<void> };
}

const pemCert = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/;

/**
 * Checks ca (ClientOptions.ca) and returns it as PEM strings. Throws a
 * MusterError invalid_request outside Node (a browser uses the system's
 * trust store and cannot be given one) or for an entry without a PEM
 * certificate in it (a file path given as the PEM text, say).
 */
export function checkCA(ca: CA): string[] {
  const node = (globalThis as { process?: { versions?: { node?: unknown } } }).process?.versions?.node;
  if (typeof node !== "string") {
    throw new MusterError("invalid_request", "ca: only Node takes a CA of its own; a browser trusts the certificates of the system's store");
  }
  const list = typeof ca === "string" || ca instanceof Uint8Array ? [ca] : [...(ca as readonly (string | Uint8Array)[])];
  if (list.length === 0) throw new MusterError("invalid_request", "ca: no certificate: want PEM text (e.g. readFileSync of the CA file)");
  return list.map((x, i) => {
    const s = typeof x === "string" ? x : x instanceof Uint8Array ? new TextDecoder().decode(x) : "";
    if (!pemCert.test(s)) {
      const which = list.length > 1 ? ` entry ${i}` : "";
      throw new MusterError("invalid_request", `ca${which}: no PEM certificate in it: want the PEM text (e.g. readFileSync of the CA file), not a path`);
    }
    return s;
  });
}

/** Loads undici and makes the Agent that trusts pems (from checkCA). */
export async function loadTLS(pems: string[]): Promise<TLS> {
  const undici = await import("undici");
  const dispatcher = new undici.Agent({ connect: { ca: pems } });
  return { fetch: undici.fetch as unknown as typeof globalThis.fetch, dispatcher };
}
