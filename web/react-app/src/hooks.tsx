// The React side of the patterns web/app shows in plain DOM: a call's state with a Retry
// (useCall), "still trying…" while any call is slow (StillTrying), and an error in the words of
// the message table with its Retry and reference (Problem). Copy this file with bff.ts.
import { useCallback, useEffect, useState, useSyncExternalStore } from "react";
import { isBffError } from "../../client/src/index.ts";
import { errorMessages, fill, offersRetry, say, ui } from "../../app/src/messages.ts";
import { slowCount, subscribeSlow } from "./bff.ts";

/** The state of one call: loading, its data, or its error; retry runs it again. */
export interface CallState<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  retry: () => void;
}

/**
 * Runs call when deps change or retry is asked for. An answer that comes after the component
 * went away or after a newer run is dropped.
 */
export function useCall<T>(call: () => Promise<T>, deps: unknown[]): CallState<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const [run, setRun] = useState(0);
  useEffect(() => {
    let current = true;
    setState({ loading: true });
    call().then(
      (data) => { if (current) setState({ data, loading: false }); },
      (error: unknown) => { if (current) setState({ error, loading: false }); },
    );
    return () => { current = false; };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, run]);
  const retry = useCallback(() => setRun((n) => n + 1), []);
  return { data: state.data, error: state.error, loading: state.loading, retry };
}

/** "Still trying…" while a call waits longer than the client's slowAfterMs. */
export function StillTrying() {
  const n = useSyncExternalStore(subscribeSlow, slowCount);
  return <div id="still-trying" role="status" hidden={n === 0}>{ui.stillTrying}</div>;
}

/** An error in the table's words, a Retry when the answer says so, and the reference. */
export function Problem({ error, retry }: { error: unknown; retry?: () => void }) {
  if (!isBffError(error)) {
    console.error(error);
    return <div className="error" role="alert"><p className="message">{errorMessages.UNEXPECTED_RESPONSE}</p></div>;
  }
  return (
    <div className="error" role="alert" data-code={error.code} data-action={error.action}>
      <p className="message">{say(error)}</p>
      {retry && offersRetry(error) && <button className="retry" type="button" onClick={retry}>{ui.retry}</button>}
      {error.requestId && <p className="reference">{fill(ui.reference, { requestId: error.requestId })}</p>}
    </div>
  );
}
