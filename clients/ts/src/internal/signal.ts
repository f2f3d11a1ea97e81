/**
 * `{ signal }` when signal is set, else `{}`: spread into the options of
 * openapi-fetch, whose `signal?: AbortSignal` does not take undefined under
 * exactOptionalPropertyTypes (the SDK's own options do take it).
 */
export function signalOf(signal: AbortSignal | undefined): { signal?: AbortSignal } {
  return signal === undefined ? {} : { signal };
}
