// The React side of the patterns web/app shows in plain DOM: a call's state with a Retry
// (useCall), "still trying…" while any call is slow (StillTrying), and an error in the words of
// the message table with its Retry and reference (Problem). Copy this file with bff.ts.
import { useCallback, useEffect, useRef, useState, useSyncExternalStore } from "react";
import { isBffError, type PaymentRecord } from "../../client/src/index.ts";
import { isNewer } from "../../app/src/records.ts";
import { errorMessages, fill, offersRetry, say, ui } from "../../app/src/messages.ts";
import { bff, slowCount, subscribeSlow } from "./bff.ts";

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

/** A page of a list the upstream pages with `nextPage`. */
export interface ListPage<T> {
  items: T[];
  nextPage?: string | null;
}

/** A paged list: the items read so far, and more() to read the next page. */
export interface Paged<T> {
  items: T[];
  /** Pages read so far. */
  pages: number;
  /** The last page is in: there is nothing more to read. */
  ended: boolean;
  loading: boolean;
  /** The last read's failure; more() reads the same page again. */
  error: unknown;
  more: () => void;
}

/**
 * Reads the first page of a list when deps change, and the next one on each more(), until the
 * last page: after it more() reads nothing (show no "Load more" once ended), and an item already
 * read (by key) is not added again, so no page and no item is listed twice. A read answered after
 * deps changed or the unmount is dropped.
 */
export function usePaged<T>(read: (nextPage: string | undefined) => Promise<ListPage<T>>,
  key: (item: T) => string | undefined, deps: unknown[]): Paged<T> {
  type Run = { next?: string; ended: boolean; busy: boolean; pages: number; items: T[]; listed: Set<string> };
  const fresh = (): Run => ({ ended: false, busy: false, pages: 0, items: [], listed: new Set() });
  const [view, setView] = useState<Omit<Paged<T>, "more">>({ items: [], pages: 0, ended: false, loading: true, error: undefined });
  const run = useRef<Run>(fresh());
  // The latest read and key, for a more() made once.
  const calls = useRef({ read, key });
  calls.current = { read, key };
  const more = useCallback(() => {
    const r = run.current;
    if (r.ended || r.busy) return;
    r.busy = true;
    setView((v) => ({ ...v, loading: true, error: undefined }));
    calls.current.read(r.next).then((page) => {
      if (run.current !== r) return;
      const added = page.items.filter((item) => {
        const k = calls.current.key(item);
        if (k === undefined) return true;
        if (r.listed.has(k)) return false;
        r.listed.add(k);
        return true;
      });
      r.items = [...r.items, ...added];
      r.pages++;
      // A cursor that does not move would read the same page for ever: that is the end too.
      const next = page.nextPage || undefined;
      r.ended = next === undefined || next === r.next;
      r.next = next;
      r.busy = false;
      setView({ items: r.items, pages: r.pages, ended: r.ended, loading: false, error: undefined });
    }, (error: unknown) => {
      if (run.current !== r) return;
      r.busy = false;
      setView({ items: r.items, pages: r.pages, ended: r.ended, loading: false, error });
    });
  }, []);
  useEffect(() => {
    run.current = fresh();
    setView({ items: [], pages: 0, ended: false, loading: true, error: undefined });
    more();
    return () => { run.current = fresh(); };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
  return { ...view, more };
}

/** One payment, live: its latest record, or the error that ended the watch. */
export interface Watched {
  record: PaymentRecord | undefined;
  error: unknown;
}

/**
 * Follows the payment with this Idempotency-Key (the client's watchPayment: its record once the
 * event stream is open, then each newer state) until key changes or the unmount, which end the
 * stream. No key: nothing is read.
 */
export function useWatchedPayment(key: string | undefined): Watched {
  const [state, setState] = useState<Watched>({ record: undefined, error: undefined });
  useEffect(() => {
    setState({ record: undefined, error: undefined });
    if (!key) return;
    const stop = new AbortController();
    void (async () => {
      try {
        for await (const record of bff.watchPayment(key, { signal: stop.signal })) setState({ record, error: undefined });
      } catch (error) {
        if (!stop.signal.aborted) setState((s) => ({ ...s, error }));
      }
    })();
    return () => stop.abort();
  }, [key]);
  return state;
}

/**
 * The page's one stream of payment changes (GET /bff/events, web/app's live()): opened() runs
 * each time it (re)opens, where the page reads what it shows again (a stream sends changes from
 * when it opens, so a change made before is in no event), and changed(rec) for each event. The
 * client reconnects by itself; the unmount ends it. Returns the error that ended it (a refusal,
 * such as an ended session), undefined while it runs.
 */
export function usePaymentEvents(opened: () => void, changed: (rec: PaymentRecord) => void): unknown {
  const [ended, setEnded] = useState<unknown>();
  // The latest handlers, for a stream opened once.
  const on = useRef({ opened, changed });
  on.current = { opened, changed };
  useEffect(() => {
    const stop = new AbortController();
    void (async () => {
      try {
        for await (const ev of bff.events({ signal: stop.signal, onOpen: () => on.current.opened() })) on.current.changed(ev.data);
      } catch (error) {
        if (!stop.signal.aborted) setEnded(error);
      }
    })();
    return () => stop.abort();
  }, []);
  return ended;
}

/** The newest payment records, kept current by the page's events. */
export interface Recent {
  /** Undefined until the first read is in. */
  records: PaymentRecord[] | undefined;
  error: unknown;
  /** (Re)reads the newest records (GET /bff/payments), keeping what events said since. */
  load: () => void;
  /** Shows a payment's latest state (an event's data). */
  update: (rec: PaymentRecord) => void;
}

/**
 * The user's newest payment records as the BFF keeps them, limit of them newest first: each
 * payment once, its later state winning (isNewer; an event wins a tie with a read). Read at once;
 * load() and update() are for the page's usePaymentEvents.
 */
export function useRecentRecords(limit: number): Recent {
  const byKey = useRef(new Map<string, PaymentRecord>());
  const [view, setView] = useState<{ records?: PaymentRecord[]; error?: unknown }>({});
  const keep = useCallback((rec: PaymentRecord, overTie: boolean) => {
    const had = byKey.current.get(rec.key);
    if (!had || isNewer(rec, had) || (overTie && rec.updatedAt === had.updatedAt)) byKey.current.set(rec.key, rec);
  }, []);
  const newest = useCallback(() => [...byKey.current.values()]
    .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0)).slice(0, limit), [limit]);
  const load = useCallback(() => {
    bff.paymentRecords({ limit }).then((page) => {
      for (const rec of page.items) keep(rec, false);
      setView({ records: newest() });
    }, (error: unknown) => setView((v) => ({ ...v, error })));
  }, [limit, keep, newest]);
  const update = useCallback((rec: PaymentRecord) => {
    keep(rec, true);
    setView((v) => ({ ...v, records: newest() }));
  }, [keep, newest]);
  useEffect(load, [load]);
  return { records: view.records, error: view.error, load, update };
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
