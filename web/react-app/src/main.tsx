// The BFF's example app in React: sign-in, accounts, a payment through the bank (one
// Idempotency-Key per payment), and the payments list, with the same message table, formatters
// and stylesheet as web/app (../app/src). Served by the BFF from static_dir, like web/app.
import "../../app/src/app.css";
import { Fragment, StrictMode, useCallback, useEffect, useRef, useState, type FormEvent, type ReactNode } from "react";
import { createRoot } from "react-dom/client";
import {
  isBffError, isStepUpRequired, startStepUp, stepUpReturn,
  type Payment, type PaymentCreate, type PaymentRecord, type StepUpRequired, type StepUpTarget,
} from "../../client/src/index.ts";
import { formatDateTime, formatMoney, providerName } from "../../app/src/format.ts";
import { approvalWords, fieldMessages, fill, paymentStatus, receiptWords, statusWords, ui } from "../../app/src/messages.ts";
import { approvalReturn, dropHeld, heldBody, keepHeld } from "../../app/src/held.ts";
import { describeApproval, describeRecord, statusMoves } from "../../app/src/records.ts";
import { downloadReceipt, hasReceipt, receiptFacts, receiptProblem, type SavedReceipt } from "../../app/src/receipt.ts";
import { authMethods, bff, session } from "./bff.ts";
import {
  Problem, StillTrying, useCall, usePaged, usePaymentEvents, useRecentRecords, useWatchedPayment, type Recent,
} from "./hooks.tsx";

// ---- Routing: plain paths with history.pushState (the BFF answers any path with index.html).

/** Goes to a path: a new history entry, or in place of this one (replace). */
type Go = (to: string, opts?: { replace?: boolean }) => void;

function usePath(): [string, Go] {
  const [path, setPath] = useState(location.pathname + location.search);
  useEffect(() => {
    const back = () => setPath(location.pathname + location.search);
    addEventListener("popstate", back);
    return () => removeEventListener("popstate", back);
  }, []);
  const go: Go = (to, opts = {}) => {
    if (opts.replace) history.replaceState(null, "", to);
    else history.pushState(null, "", to);
    setPath(to);
  };
  return [path, go];
}

function Link({ to, go, children }: { to: string; go: Go; children: ReactNode }) {
  const current = location.pathname === to ? "page" : undefined;
  return <a href={to} aria-current={current} onClick={(e) => { e.preventDefault(); go(to); }}>{children}</a>;
}

function App() {
  const [path, go] = usePath();
  const pathname = path.split("?")[0]!;
  session.required = (returnTo) => go("/login?returnTo=" + encodeURIComponent(returnTo));
  // The sign-in and the session (GET /auth/methods), asked again on every page (after a logout
  // elsewhere, no data shows) and after this page signs in or out (signedInOrOut), also when the
  // path stays the same: a sign-in at / stays at /.
  const [signings, setSignings] = useState(0);
  const signedInOrOut = () => setSignings((n) => n + 1);
  const me = useCall(authMethods, [path, signings]);
  const who = me.data?.session?.userId;
  const [leaving, setLeaving] = useState<"idp" | undefined>();
  const [signOutError, setSignOutError] = useState<unknown>();
  async function signOut() {
    setSignOutError(undefined);
    try {
      // After an OpenID sign-in the client goes on to the provider's logout page: leave nothing
      // of the user's on screen behind it.
      const { logoutUrl } = await bff.logout();
      if (logoutUrl) {
        setLeaving("idp");
        return;
      }
      go("/login", { replace: true });
      signedInOrOut();
    } catch (err) {
      setSignOutError(err);
    }
  }
  let page: ReactNode;
  if (leaving) page = <p id="signing-out">Signing you out at your identity provider…</p>;
  else if (me.loading && me.data === undefined) page = <p>{ui.loading}</p>;
  else if (me.error) page = <Problem error={me.error} retry={me.retry} />;
  else if (!who || pathname === "/login") {
    page = <SignIn method={me.data!.login} signedIn={(to) => { go(to, { replace: true }); signedInOrOut(); }} />;
  } else if (pathname === "/pay") page = <Pay />;
  else if (pathname === "/payment-done") page = <PaymentDone go={go} />;
  else if (pathname === "/step-up-done") page = <StepUpDone go={go} />;
  else if (pathname === "/payments") page = <Payments />;
  else page = <Accounts />;
  return (
    <>
      <header className="top">
        <strong className="brand"><img src="/favicon.svg" alt="" />Example bank app</strong>
        <nav id="nav" aria-label="Main">
          {who ? (
            <>
              <Link to="/" go={go}>Accounts</Link>
              <Link to="/pay" go={go}>Pay</Link>
              <Link to="/payments" go={go}>Payments</Link>
            </>
          ) : <Link to="/login" go={go}>Sign in</Link>}
        </nav>
        <span id="who" title={who && !leaving ? "Signed in as " + who : undefined}>{leaving ? "" : who ?? ""}</span>
        {who && !leaving && <button id="sign-out" className="quiet" type="button" onClick={() => void signOut()}>Sign out</button>}
      </header>
      <StillTrying />
      <main data-app="react">
        {signOutError !== undefined && <Problem error={signOutError} />}
        {page}
      </main>
    </>
  );
}

// ---- Sign in: the dev form where the BFF has POST /auth/dev/login, else the OpenID link
// (GET /auth/methods says which).

function safeReturnTo(): string {
  const r = new URLSearchParams(location.search).get("returnTo") ?? "/";
  return r.startsWith("/") && !r.startsWith("//") && !r.startsWith("/login") ? r : "/";
}

/** The sign-in page; signedIn(to) runs after a dev sign-in, to show to (the page asked for). */
function SignIn({ method, signedIn }: { method: "dev" | "oidc"; signedIn: (to: string) => void }) {
  const [userId, setUserId] = useState("alice");
  const [error, setError] = useState<unknown>();
  const returnTo = safeReturnTo();
  async function submit(e: FormEvent) {
    e.preventDefault();
    setError(undefined);
    try {
      await bff.devLogin(userId.trim());
      signedIn(returnTo);
    } catch (err) {
      setError(err);
    }
  }
  return (
    <section id="sign-in">
      <h1>Sign in</h1>
      {method === "oidc" && (
        <p><a className="button" id="oidc-login" href={bff.loginUrl(returnTo)}>Sign in</a></p>
      )}
      {method === "dev" && (
        <form id="login-form" noValidate onSubmit={submit}>
          <div className="field">
            <label htmlFor="userId">User id</label>
            <input id="userId" value={userId} autoComplete="username" onChange={(e) => setUserId(e.target.value)} />
          </div>
          <button type="submit">Sign in</button>
          {error !== undefined && <Problem error={error} />}
        </form>
      )}
    </section>
  );
}

// ---- Accounts

function Accounts() {
  const accounts = useCall(() => bff.accounts({ limit: 50 }), []);
  return (
    <>
      <h1>Accounts</h1>
      <div id="accounts">
        {accounts.loading && <p>{ui.loading}</p>}
        {accounts.error !== undefined && <Problem error={accounts.error} retry={accounts.retry} />}
        {accounts.data && (accounts.data.items.length === 0 ? <p>No accounts yet.</p> : (
          <table id="accounts-table" className="cards">
            <thead><tr><th>Account</th><th>Bank</th><th>Number</th><th className="num">Balance</th></tr></thead>
            <tbody>
              {accounts.data.items.map((a, i) => (
                <tr key={a.id ?? i}>
                  <td data-label="Account"><bdi>{a.product ?? a.accountType ?? ""}</bdi></td>
                  <td data-label="Bank">{providerName(a.providerId)}</td>
                  <td data-label="Number" className="mono">{a.accountNumber ?? ""}</td>
                  <td data-label="Balance" className="num">{formatMoney(a.balances?.[0]?.balanceAmount)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ))}
      </div>
    </>
  );
}

// ---- A payment: one Idempotency-Key per payment the user means to make.

const payFields = {
  amount: "paymentInformation.amount",
  payee: "paymentInformation.creditorName",
  iban: "paymentInformation.creditorAccount.iban",
  remittance: "paymentInformation.remittanceInformation",
} as const;
type PayField = keyof typeof payFields;

function Pay() {
  const [values, setValues] = useState<Record<PayField, string>>({
    amount: "12.50", payee: "Dana Levi", iban: "IL620108000000099999999", remittance: "Example payment",
  });
  // Kept across a second submit of the same payment: a payment whose answer was lost is never
  // made twice. A refused one made nothing, so its corrected form gets a new key.
  const [key, setKey] = useState(() => crypto.randomUUID());
  const [error, setError] = useState<unknown>();
  const [sending, setSending] = useState(false);
  // A payment the BFF holds for the user's approval: not sent; the form stays disabled (this
  // payment, this key) until the user approves it or starts a new one.
  const [held, setHeld] = useState<{ err: StepUpRequired; body: PaymentCreate }>();
  function startOver() {
    setHeld(undefined);
    setError(undefined);
    setSending(false);
    setKey(crypto.randomUUID());
  }
  const invalid = new Set<PayField>();
  if (isBffError(error)) {
    for (const f of error.fields) {
      for (const [name, path] of Object.entries(payFields) as [PayField, string][]) {
        if (f.field !== "" && (path === f.field || path.endsWith("." + f.field))) invalid.add(name);
      }
    }
  }
  async function submit(e: FormEvent) {
    e.preventDefault();
    setError(undefined);
    setSending(true);
    const body: PaymentCreate = {
      paymentInformation: {
        amount: values.amount.trim(),
        currency: "ILS",
        creditorName: values.payee.trim(),
        creditorAccount: { iban: values.iban.replace(/\s+/g, "") },
        remittanceInformation: values.remittance,
      },
      providerIds: ["demobank-sandbox"],
      includeFakeProviders: true,
      redirectUrl: location.origin + "/payment-done",
    };
    try {
      const res = await bff.createPayment(body, { idempotencyKey: key });
      location.assign(res.data.payUrl);
    } catch (err) {
      if (isStepUpRequired(err)) {
        setHeld({ err, body });
        return;
      }
      if (isBffError(err) && err.action === "fix_request") setKey(crypto.randomUUID());
      setError(err);
      setSending(false);
    }
  }
  const field = (name: PayField, label: string, extra: { className?: string; inputMode?: "decimal" } = {}) => (
    <div className="field">
      <label htmlFor={name}>{label}</label>
      <input id={name} name={name} {...extra} value={values[name]} aria-invalid={invalid.has(name) || undefined}
        aria-describedby={name + "-error"} onChange={(e) => setValues({ ...values, [name]: e.target.value })} />
      <div className="field-error" id={name + "-error"}>{invalid.has(name) ? fieldMessages[name] : ""}</div>
    </div>
  );
  return (
    <>
      <h1>New payment</h1>
      <p className="muted">You approve the payment at your bank and come back here.</p>
      <form id="pay-form" noValidate onSubmit={submit}>
        {field("amount", "Amount", { inputMode: "decimal" })}
        {field("payee", "Payee name")}
        {field("iban", "Payee IBAN", { className: "mono" })}
        {field("remittance", "Description")}
        <button type="submit" disabled={sending}>Pay</button>
      </form>
      {error !== undefined && <Problem error={error} />}
      {held && <ApprovalNeeded err={held.err} body={held.body} startOver={startOver} />}
    </>
  );
}

// ---- Payments the user approves (payments.step_up)

/** Sends the browser to approve a held payment (a full-page navigation); the error when it cannot. */
function approve(target: StepUpTarget, key: string): unknown {
  try {
    startStepUp(target, { returnTo: approvalReturn(key) });
    return undefined;
  } catch (err) {
    return err;
  }
}

/** "This payment needs your approval": what it means, until when, and the button to approve it. */
function ApprovalNeeded({ err, body, startOver }: { err: StepUpRequired; body: PaymentCreate; startOver: () => void }) {
  const key = err.idempotencyKey ?? "";
  const [failed, setFailed] = useState<unknown>();
  return (
    <div id="step-up" className="pending" role="status" data-key={key}>
      <strong>{approvalWords.needed}</strong>
      <p>{approvalWords.explain}</p>
      {err.expiresAt && <p className="muted">{fill(approvalWords.until, { time: formatDateTime(err.expiresAt) })}</p>}
      <div className="row">
        <button id="step-up-approve" type="button" onClick={() => { keepHeld(key, body); setFailed(approve(err, key)); }}>
          {approvalWords.approve}
        </button>
        <a href="/pay" onClick={(e) => { e.preventDefault(); startOver(); }}>{approvalWords.startOver}</a>
      </div>
      {failed !== undefined && <Problem error={failed} />}
    </div>
  );
}

/**
 * Back from an approval (`/step-up-done?key=…&stepUp=…`): the payment's record, live
 * (useWatchedPayment), as web/app shows it: `#step-up-approved`, `#step-up-declined` or
 * `#step-up-failed` inside `#step-up-outcome`.
 */
function StepUpDone({ go }: { go: Go }) {
  const back = stepUpReturn(location.search);
  const key = back?.idempotencyKey ?? new URLSearchParams(location.search).get("key") ?? undefined;
  const { record: rec, error } = useWatchedPayment(key);
  const [failed, setFailed] = useState<unknown>();
  const [continuing, setContinuing] = useState(false);
  const v = describeApproval(back?.outcome, rec);
  useEffect(() => {
    if (rec?.state === "declined") dropHeld(rec.key);
  }, [rec]);
  const body = key && v.canContinue ? heldBody(key) : undefined;
  async function continueAtBank() {
    if (!body || !key) return;
    setContinuing(true);
    setFailed(undefined);
    try {
      // The same request and key: the stored answer, not a second payment.
      const res = await bff.createPayment(body, { idempotencyKey: key });
      dropHeld(key);
      location.assign(res.data.payUrl);
    } catch (err) {
      setContinuing(false);
      setFailed(err);
    }
  }
  return (
    <>
      <h1>Payment approval</h1>
      <div id="step-up-outcome">
        {error !== undefined && rec === undefined ? <Problem error={error} /> : (
          <div id={"step-up-" + v.view} className={v.tone} data-state={rec?.state ?? ""} data-status={rec?.status ?? ""}
            data-payment-status={rec?.paymentStatus ?? ""} data-declined={rec?.declined ?? ""}>
            <strong>{v.title}</strong>
            {v.detail && <p>{v.detail}</p>}
            {rec?.paymentId && <p className="reference">Payment id: {rec.paymentId}</p>}
            {v.canApprove && rec && key && (
              <button id="step-up-approve" type="button" onClick={() => setFailed(approve(rec, key))}>{approvalWords.tryAgain}</button>
            )}
            {body && (
              <>
                <p>{approvalWords.continueHint}</p>
                <button id="step-up-continue" type="button" disabled={continuing} onClick={() => void continueAtBank()}>
                  {approvalWords.continueAtBank}
                </button>
              </>
            )}
          </div>
        )}
      </div>
      {failed !== undefined && <Problem error={failed} />}
      <p className="links"><Link to="/pay" go={go}>Make another payment</Link> · <Link to="/payments" go={go}>All payments</Link></p>
    </>
  );
}

const finalOk = new Set(["ACCC", "ACSC", "ACSP", "ACTC", "ACWC", "ACFC", "PATC"]);
const finalBad = new Set(["RJCT", "CANC", "ERROR"]);

/**
 * A payment at the bank by its id, live as web/app's /payment-done: read at once and again each
 * time the page's event stream opens (reread), and moved by its events (moved); a final status
 * is not undone by an older state arriving late.
 */
function useBankPayment(id: string | null) {
  const [state, setState] = useState<{ pay?: Payment; error?: unknown; loading: boolean }>({ loading: !!id });
  const shown = useRef<Payment | undefined>(undefined);
  const show = useCallback((pay: Payment) => {
    shown.current = pay;
    setState({ pay, loading: false });
  }, []);
  const load = useCallback(() => {
    if (!id) return;
    setState((s) => ({ ...s, error: undefined, loading: s.pay === undefined }));
    // The bank's redirect says what it says; the BFF's answer is what counts.
    bff.payment(id).then((pay) => {
      if (!shown.current || statusMoves(shown.current.status, pay.status)) show(pay);
    }, (error: unknown) => {
      // Once a status is shown it stays, and the stream goes on; before, the error with a Retry.
      if (!shown.current) setState({ error, loading: false });
    });
  }, [id, show]);
  useEffect(load, [load]);
  const moved = useCallback((rec: PaymentRecord) => {
    const was = shown.current;
    if (was && rec.paymentId === id && rec.paymentStatus && statusMoves(was.status, rec.paymentStatus)) {
      show({ ...was, status: rec.paymentStatus });
    }
  }, [id, show]);
  return { ...state, retry: load, reread: load, moved };
}

function PaymentDone({ go }: { go: Go }) {
  const id = new URLSearchParams(location.search).get("paymentId");
  const p = useBankPayment(id);
  const recent = useRecentRecords(10);
  // The bank may still be deciding: the outcome and the list follow the payment's changes.
  const ended = usePaymentEvents(() => {
    recent.load();
    p.reread();
  }, (rec) => {
    recent.update(rec);
    p.moved(rec);
  });
  const pay = p.pay;
  const cls = pay && (finalOk.has(pay.status) ? "ok" : finalBad.has(pay.status) ? "error" : "pending");
  // Download receipt, once the payment's record (among the recent ones) says its outcome is known.
  const rec = id ? recent.records?.find((r) => r.paymentId === id) : undefined;
  const receipt = useReceipt();
  return (
    <>
      <h1>Payment</h1>
      <div id="payment-outcome">
        {!id && <div className="error">This page was opened without a payment.</div>}
        {p.loading && <p>Checking the payment…</p>}
        {p.error !== undefined && <Problem error={p.error} retry={p.retry} />}
        {pay && (
          <div className={cls} data-status={pay.status}>
            <strong>{statusWords(paymentStatus, pay.status)}</strong>
            <div>{formatMoney({ amount: pay.paymentInformation?.amount, currency: pay.paymentInformation?.currency })}</div>
            <p className="reference">Payment id: {pay.id}</p>
          </div>
        )}
      </div>
      <div id="receipt">
        {rec && hasReceipt(rec) && (
          <>
            <div className="row">
              <button id="receipt-download" className="receipt-download" type="button" data-key={rec.key}
                disabled={receipt.state?.busy === rec.key} onClick={() => receipt.download(rec.key)}>{receiptWords.download}</button>
            </div>
            <div id="receipt-result" aria-live="polite"><ReceiptOutcome state={receipt.state} prefix="receipt" /></div>
          </>
        )}
      </div>
      <p className="links"><Link to="/pay" go={go}>Make another payment</Link> · <Link to="/payments" go={go}>All payments</Link></p>
      <RecentPayments recent={recent} ended={ended} />
    </>
  );
}

// ---- Receipts

/** The last Download receipt of a page: under way (busy, the payment's key), saved, or failed. */
type ReceiptState = { busy?: string; saved?: SavedReceipt; error?: unknown } | undefined;

/** A page's Download receipt: download(key) and its state; a download started later wins. */
interface Receipts {
  state: ReceiptState;
  download: (key: string) => void;
}

/**
 * Downloads a payment's receipt, verifies it here against the BFF's published keys and saves it as
 * a file (../app/src/receipt.ts, as web/app does); an answer after a newer download is dropped.
 */
function useReceipt(): Receipts {
  const [state, setState] = useState<ReceiptState>();
  const latest = useRef(0);
  const download = useCallback((key: string) => {
    const run = ++latest.current;
    setState({ busy: key });
    downloadReceipt(bff, key).then(
      (saved) => { if (latest.current === run) setState({ saved }); },
      (error: unknown) => { if (latest.current === run) setState({ error }); });
  }, []);
  return { state, download };
}

/**
 * What a Download receipt came to: the verified receipt (`[data-receipt-verified]`, its facts in
 * `#<prefix>-facts`), "not known yet" for a 409 (`[data-receipt-not-yet]`), a receipt that did not
 * verify, or the error in the table's words.
 */
function ReceiptOutcome({ state, prefix }: { state: ReceiptState; prefix: string }) {
  if (!state) return null;
  if (state.busy !== undefined) return <p className="muted">{receiptWords.downloading}</p>;
  if (state.saved) {
    const { receipt, kid, file } = state.saved;
    return (
      <div className="ok" data-receipt-verified={kid} data-key={receipt.key}>
        <strong>{fill(receiptWords.verified, { iss: receipt.iss, kid })}</strong>
        <dl id={prefix + "-facts"} className="facts">
          {receiptFacts(receipt).map((f) => <Fragment key={f.label}><dt>{f.label}</dt><dd><bdi>{f.value}</bdi></dd></Fragment>)}
        </dl>
        <p className="reference">{fill(receiptWords.saved, { file })}</p>
      </div>
    );
  }
  const why = receiptProblem(state.error);
  if (why === "not_yet") return <div className="pending" role="status" data-receipt-not-yet="">{receiptWords.notYet}</div>;
  if (why === "not_verified") return <div className="error" role="alert" data-receipt-refused="">{receiptWords.notVerified}</div>;
  return <Problem error={state.error} />;
}

// ---- Payments

function PaymentRow({ p }: { p: Payment }) {
  const pi = p.paymentInformation;
  return (
    <tr data-payment-id={p.id} data-status={p.status}>
      <td data-label="Created">{formatDateTime(p.createdAt)}</td>
      <td data-label="Amount" className="num">{formatMoney({ amount: pi?.amount, currency: pi?.currency })}</td>
      <td data-label="Description"><bdi>{pi?.remittanceInformation ?? ""}</bdi></td>
      <td data-label="Status">{statusWords(paymentStatus, p.status)}</td>
    </tr>
  );
}

/**
 * A payment request as the BFF recorded it: a refused one reads "Not accepted", never "Sent"; a
 * finished one has its Download receipt.
 */
function RecordRow({ rec, receipt }: { rec: PaymentRecord; receipt: Receipts }) {
  const words = describeRecord(rec);
  return (
    <tr data-key={rec.key} data-state={rec.state} data-status={rec.status ?? ""}
      data-payment-id={rec.paymentId ?? ""} data-payment-status={rec.paymentStatus ?? ""}>
      <td data-label="Created">{formatDateTime(rec.createdAt)}</td>
      <td data-label="Payment">
        <span>
          <span className="mono">{rec.paymentId ?? ""}</span>
          {hasReceipt(rec) && (
            <button className="receipt-download" type="button" data-key={rec.key} disabled={receipt.state?.busy === rec.key}
              onClick={() => receipt.download(rec.key)}>{receiptWords.download}</button>
          )}
        </span>
      </td>
      <td data-label="Request" className="request-state">{words.request}</td>
      <td data-label="Status" className="payment-status">{words.status}</td>
    </tr>
  );
}

/**
 * The newest payment requests the BFF recorded (GET /bff/payments), live from the page's events
 * (useRecentRecords, usePaymentEvents); ended: the error that ended the stream.
 */
function RecentPayments({ recent, ended }: { recent: Recent; ended: unknown }) {
  const records = recent.records;
  const receipt = useReceipt();
  return (
    <section id="recent-payments">
      <h2>Recent payments</h2>
      <p className="muted">Their status at the bank, kept up to date on this page.</p>
      {records === undefined && recent.error === undefined && <p>{ui.loading}</p>}
      {recent.error !== undefined && <Problem error={recent.error} retry={recent.load} />}
      {records && (records.length === 0 ? <p id="recent-payments-empty">No payments yet.</p> : (
        <table id="recent-payments-table" className="cards">
          <thead><tr><th>Created</th><th>Payment</th><th>Request</th><th>Status</th></tr></thead>
          <tbody>{records.map((rec) => <RecordRow key={rec.key} rec={rec} receipt={receipt} />)}</tbody>
        </table>
      ))}
      <div id="recent-receipt" aria-live="polite"><ReceiptOutcome state={receipt.state} prefix="recent-receipt" /></div>
      {ended !== undefined && <p className="muted" id="recent-payments-stopped">{ui.notLive}</p>}
    </section>
  );
}

function Payments() {
  // Newest first, 20 a page: Load more reads the next page until the last, each payment once.
  const list = usePaged(
    (nextPage) => bff.payments({ limit: 20, sort: -1, ...(nextPage ? { nextPage } : {}) }),
    (p: Payment) => p.id, []);
  const recent = useRecentRecords(10);
  // The statuses the events brought since the list was read, by payment id: each row shows its own.
  const [moved, setMoved] = useState<ReadonlyMap<string, Payment["status"]>>(new Map());
  const ended = usePaymentEvents(recent.load, (rec) => {
    recent.update(rec);
    const { paymentId, paymentStatus } = rec;
    if (paymentId && paymentStatus) setMoved((m) => new Map(m).set(paymentId, paymentStatus));
  });
  const n = list.items.length;
  return (
    <>
      <h1>Payments</h1>
      <RecentPayments recent={recent} ended={ended} />
      <h2>All payments at the bank</h2>
      <p className="muted">Newest first.</p>
      {n > 0 && (
        <table id="payments-table" className="cards">
          <thead><tr><th>Created</th><th className="num">Amount</th><th>Description</th><th>Status</th></tr></thead>
          <tbody>{list.items.map((p) => <PaymentRow key={p.id} p={moved.has(p.id) ? { ...p, status: moved.get(p.id)! } : p} />)}</tbody>
        </table>
      )}
      <div id="payments-msg">
        {list.loading ? ui.loading
          : list.error !== undefined ? <Problem error={list.error} retry={list.more} />
          : n === 0 && list.ended ? <p id="payments-empty">No payments yet.</p>
          : `${n} shown` + (list.ended ? " (all)" : "")}
      </div>
      {list.pages > 0 && !list.ended && (
        <button id="payments-more" type="button" disabled={list.loading} onClick={list.more}>Load more</button>
      )}
    </>
  );
}

createRoot(document.getElementById("root")!).render(<StrictMode><App /></StrictMode>);
