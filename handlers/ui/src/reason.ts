/** Why an observer's view is not ready, in the words the state badge shows. */
import { MusterError, StreamEndError, StreamEndedError, isCode } from "@muster/client";
import { describe } from "./describe.js";

/**
 * The reason of a recovery: overflow, a broker restart (the stream's
 * shutdown event, or a new epoch met during the bootstrap), the network
 * (a dropped stream, a failed fetch), or the broker's error. "" for null.
 */
export function reasonOf(err: Error | null): string {
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
  if (isCode(err, "epoch_changed")) return "broker restart: new epoch during the bootstrap";
  if (err instanceof StreamEndedError) return "network: the stream dropped";
  if (err instanceof MusterError) return describe(err);
  return `network: ${err.message}`;
}

