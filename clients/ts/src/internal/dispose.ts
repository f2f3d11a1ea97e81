/**
 * The key of `await using` (explicit resource management): the runtime's
 * Symbol.asyncDispose (Node >= 20.4, recent browsers, or a polyfill loaded
 * before this package), else a registered stand-in, so that the SDK loads
 * everywhere; on such a runtime `await using` is unavailable anyway and
 * close() is the way.
 */
export const asyncDispose: typeof Symbol.asyncDispose =
  (Symbol as { asyncDispose?: typeof Symbol.asyncDispose }).asyncDispose ?? (Symbol.for("Symbol.asyncDispose") as typeof Symbol.asyncDispose);
