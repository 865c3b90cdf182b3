// The app's one client of the BFF, and the calls still waiting for their answer (for "still
// trying…"), as a store React reads with useSyncExternalStore.
import { createClient } from "../../client/src/index.ts";
import type { components } from "../../client/src/generated/openapi.ts";

// Build-time settings (build.mjs); null: the client's defaults.
declare const __APP_TOTAL_TIMEOUT_MS__: number | null;
declare const __APP_SLOW_AFTER_MS__: number | null;

let slowCalls = 0;
const listeners = new Set<() => void>();
function changed(by: number): void {
  slowCalls += by;
  for (const l of listeners) l();
}

/** Subscribes to the count of slow calls (useSyncExternalStore's subscribe). */
export function subscribeSlow(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** The calls still waiting after slowAfterMs. */
export function slowCount(): number {
  return slowCalls;
}

/** Set by the router: where a SESSION_REQUIRED answer sends the user. */
export const session = { required: (_returnTo: string) => {} };

export const bff = createClient({
  mode: "cookie",
  onSessionRequired: () => session.required(location.pathname + location.search),
  ...(__APP_TOTAL_TIMEOUT_MS__ !== null ? { totalTimeoutMs: __APP_TOTAL_TIMEOUT_MS__ } : {}),
  ...(__APP_SLOW_AFTER_MS__ !== null ? { slowAfterMs: __APP_SLOW_AFTER_MS__ } : {}),
  onSlow: () => {
    changed(1);
    return () => changed(-1);
  },
});

/** GET /auth/methods: the sign-in this BFF has, and the session, null when signed out. */
export type AuthMethods = components["schemas"]["AuthMethods"];

/**
 * How to sign in and who is signed in, in one request that answers 200 either way: a visitor who
 * is not signed in costs no 401, no probe of the dev login and none of the address's /auth budget.
 */
export async function authMethods(): Promise<AuthMethods> {
  return (await bff.request<AuthMethods>("GET", "/auth/methods")).data;
}
