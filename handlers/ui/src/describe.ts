/** Errors in words, for the page. */
import { MusterError } from "@muster/client";

/** An error in a sentence: the contract's code first when there is one. */
export function describe(e: unknown): string {
  if (e instanceof MusterError) return e.detail === "" ? e.code : `${e.code}: ${e.detail}`;
  if (e instanceof Error) return e.message;
  return String(e);
}
