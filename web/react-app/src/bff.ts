// The app's one client of the BFF, and the calls still waiting for their answer (for "still
// trying…"), as a store React reads with useSyncExternalStore.
import { createClient } from "../../client/src/index.ts";

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
