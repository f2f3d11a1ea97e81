// Type-checked (tsc --strict --noEmit) against types that openapi-typescript
// generates from openapi.yaml into ./gen/schema.d.ts: a problem with a code
// no broker sends yet must be a valid Problem, because the set is open.
import type { components } from "./gen/schema";

type Problem = components["schemas"]["Problem"];

export const future: Problem = {
  type: "about:blank",
  title: "Conflict",
  status: 409,
  detail: "a code added after this client was generated",
  code: "a_code_from_the_future",
};

export const known: Problem = { type: "about:blank", title: "Conflict", status: 409, code: "fenced" };
