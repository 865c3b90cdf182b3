// The BFF's example web app: plain DOM, served by the BFF from its own origin
// (static_dir), so the session cookie is first-party and the client runs in
// cookie mode. Every piece of data goes into the page through textContent
// (never innerHTML): the BFF's Content-Security-Policy allows no inline script
// or style, and the data (merchant names, Hebrew products) is not trusted.
//
// What a user reads comes from messages.ts (one table, by error code, to
// translate) and format.ts (one way to show dates, amounts and bank names):
// never an error code or the upstream's own text.
import "./app.css";
import { createClient, isBffError, isStepUpRequired, startStepUp, stepUpReturn } from "../../client/src/index.ts";
import type {
  Account, BffError, Connection, Payment, PaymentCreate, PaymentRecord, SessionInfo, StepUpRequired, StepUpTarget, Transaction,
} from "../../client/src/index.ts";
import { formatDate, formatDateTime, formatMoney, providerName, providerNames } from "./format.ts";
import {
  approvalWords, connectionStatus, errorMessages, fieldMessages, fill, offersRetry, paymentStatus, receiptWords, say, sessionMethod,
  statusWords, ui,
} from "./messages.ts";
import { approvalReturn, dropHeld, heldBody, keepHeld } from "./held.ts";
import { describeApproval, describeRecord, isNewer, statusMoves } from "./records.ts";
import { downloadReceipt, hasReceipt, receiptFacts, receiptProblem, type SavedReceipt } from "./receipt.ts";
import type { components } from "../../client/src/generated/openapi.ts";

// Build-time settings (build.mjs, from APP_TOTAL_TIMEOUT_MS and APP_SLOW_AFTER_MS); null: the
// client's defaults (20 s in all for one call, "still trying" after 3 s).
declare const __APP_TOTAL_TIMEOUT_MS__: number | null;
declare const __APP_SLOW_AFTER_MS__: number | null;

// Calls still waiting for their answer after slowAfterMs: while there is one, the page says so.
let slowCalls = 0;
function showSlow(): void {
  const el = document.getElementById("still-trying");
  if (!el) return;
  el.textContent = ui.stillTrying;
  el.hidden = slowCalls === 0;
}

const bff = createClient({
  mode: "cookie",
  // The default sends the browser to /auth/login (OpenID). This app also runs
  // against `auth.mode: dev`, which has no /auth/login, so show our sign-in page.
  onSessionRequired: () => go("/login?returnTo=" + encodeURIComponent(location.pathname + location.search)),
  ...(__APP_TOTAL_TIMEOUT_MS__ !== null ? { totalTimeoutMs: __APP_TOTAL_TIMEOUT_MS__ } : {}),
  ...(__APP_SLOW_AFTER_MS__ !== null ? { slowAfterMs: __APP_SLOW_AFTER_MS__ } : {}),
  onSlow: () => {
    slowCalls++;
    showSlow();
    return () => { slowCalls--; showSlow(); };
  },
});

// ---- DOM helpers -----------------------------------------------------------

type Child = Node | string | null | undefined | false;
type Attrs = Record<string, string | boolean | ((ev: Event) => void)>;

function h(tag: string, attrs: Attrs = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (typeof v === "function") el.addEventListener(k.replace(/^on/, ""), v);
    else if (v === true) el.setAttribute(k, "");
    else if (v !== false) el.setAttribute(k, v);
  }
  for (const c of children) if (c) el.append(typeof c === "string" ? document.createTextNode(c) : c);
  return el;
}

const main = () => document.getElementById("main")!;
function render(...children: Child[]): void {
  main().replaceChildren(...children.filter((c): c is Node | string => !!c));
}

/**
 * An error box: the sentence messages.ts has for the error, a Retry when the answer says to try
 * again and there is something to retry, and the requestId in small print for support.
 */
function errorBox(err: unknown, retry?: () => void): HTMLElement {
  if (!isBffError(err)) {
    // A bug of the app, not an answer of the BFF: the console has the details.
    console.error(err);
    return h("div", { class: "error", role: "alert" }, h("p", { class: "message" }, errorMessages.UNEXPECTED_RESPONSE!));
  }
  const box = h("div", { class: "error", role: "alert", "data-code": err.code, "data-action": err.action },
    h("p", { class: "message" }, say(err)));
  if (retry && offersRetry(err)) {
    box.append(h("button", { class: "retry", type: "button", onclick: () => retry() }, ui.retry));
  }
  if (err.requestId) box.append(h("p", { class: "reference" }, fill(ui.reference, { requestId: err.requestId })));
  return box;
}

/** A table that becomes a list of cards on a phone: each cell carries its column's name. */
function table(id: string, columns: { label: string; num?: boolean }[], rows: HTMLElement[]): HTMLElement {
  const body = h("tbody", {}, ...rows);
  labelCells(body, columns);
  const t = h("table", { id, class: "cards" },
    h("thead", {}, h("tr", {}, ...columns.map((c) => h("th", c.num ? { class: "num" } : {}, c.label)))),
    body);
  return t;
}

/** Sets each cell's data-label (its column's name, shown before it on a phone). */
function labelCells(body: HTMLElement, columns: { label: string }[]): void {
  for (const tr of Array.from(body.children)) {
    Array.from(tr.children).forEach((td, i) => {
      const label = columns[i]?.label;
      if (label) td.setAttribute("data-label", label);
    });
  }
}

/** A page of a list the upstream pages with `nextPage`. */
interface ListPage<T> {
  items: T[];
  nextPage?: string | null;
}

/**
 * The rows of a paged list and its **Load more**: the returned load() reads the first page, and
 * each call after it the next one, appending their rows to body. After the last page the button
 * is hidden and load() reads nothing, so no page is read twice; an item already listed (by key)
 * is not listed again. While a page loads the button is disabled; a failure shows in msg with a
 * Retry that reads the same page again.
 */
function pager<T>(o: {
  body: HTMLElement;
  columns: { label: string }[];
  row: (item: T) => HTMLElement;
  key: (item: T) => string | undefined;
  read: (nextPage: string | undefined) => Promise<ListPage<T>>;
  more: HTMLButtonElement;
  msg: HTMLElement;
  /** What msg says once a page is in: count rows listed, ended after the last page. */
  shown: (count: number, ended: boolean) => Child;
}): () => Promise<void> {
  let nextPage: string | undefined;
  let ended = false;
  let busy = false;
  let count = 0;
  const listed = new Set<string>();
  o.more.hidden = true;
  o.more.addEventListener("click", () => void load());
  async function load(): Promise<void> {
    if (ended || busy) return;
    busy = true;
    o.more.disabled = true;
    o.msg.replaceChildren(ui.loading);
    try {
      const page = await o.read(nextPage);
      const fresh = page.items.filter((item) => {
        const k = o.key(item);
        if (k === undefined) return true;
        if (listed.has(k)) return false;
        listed.add(k);
        return true;
      });
      const added = h("tbody", {}, ...fresh.map(o.row));
      labelCells(added, o.columns);
      o.body.append(...Array.from(added.children));
      count += fresh.length;
      // A cursor that does not move would read the same page for ever: that is the end too.
      const next = page.nextPage || undefined;
      ended = next === undefined || next === nextPage;
      nextPage = next;
      o.more.hidden = ended;
      const words = o.shown(count, ended);
      o.msg.replaceChildren(...(words ? [words] : []));
    } catch (err) {
      o.msg.replaceChildren(errorBox(err, () => void load()));
    } finally {
      busy = false;
      o.more.disabled = false;
    }
  }
  return load;
}

// ---- Router ----------------------------------------------------------------

function go(path: string): void {
  history.pushState(null, "", path);
  void route();
}

function link(path: string, text: string): HTMLElement {
  return h("a", {
    href: path,
    ...(location.pathname === path ? { "aria-current": "page" } : {}),
    onclick: (ev: Event) => {
      ev.preventDefault();
      go(path);
    },
  }, text);
}

/** GET /auth/methods: the sign-in this BFF has, and the session, null when signed out. */
type AuthMethods = components["schemas"]["AuthMethods"];

/**
 * Asks the BFF how to sign in and who is signed in (GET /auth/methods): 200 with or without a
 * session, so a visitor who is not signed in costs no 401, no probe of the dev login and none of
 * the address's /auth budget. Asked on every route, like a session check.
 */
async function authMethods(): Promise<AuthMethods> {
  return (await bff.request<AuthMethods>("GET", "/auth/methods")).data;
}

let who: string | null = null;
// How this BFF signs users in, from the last GET /auth/methods.
let signInMethod: AuthMethods["login"] = "oidc";
// Counts route() calls, so that an older one whose session check answers late
// (a click during a slow check, a back-forward cache restore) renders nothing.
let routing = 0;

function renderNav(): void {
  const nav = document.getElementById("nav")!;
  const whoEl = document.getElementById("who")!;
  if (!who) {
    nav.replaceChildren(link("/login", "Sign in"));
    whoEl.textContent = "";
    return;
  }
  nav.replaceChildren(
    link("/", "Accounts"), link("/connections", "Banks"), link("/pay", "Pay"),
    link("/payments", "Payments"), link("/sessions", "Sessions"),
  );
  whoEl.textContent = who;
  whoEl.title = "Signed in as " + who;
}

async function route(): Promise<void> {
  const seq = ++routing;
  const path = location.pathname;
  // The live payment stream belongs to the page that started it.
  stopLive();
  // The previous page (or one restored from the back-forward cache after a
  // logout) must not stay on screen while the session is checked.
  render(h("p", {}, ui.loading));
  try {
    const auth = await authMethods();
    if (seq !== routing) return;
    who = auth.session?.userId ?? null;
    signInMethod = auth.login;
  } catch (err) {
    if (seq !== routing) return;
    renderNav();
    render(h("h1", {}, "Cannot load this page"), errorBox(err, () => void route()));
    return;
  }
  if (!who && path !== "/login") {
    history.replaceState(null, "", "/login?returnTo=" + encodeURIComponent(path + location.search));
  }
  renderNav();
  switch (who ? location.pathname : "/login") {
    case "/login": return loginPage();
    case "/pay": return payPage();
    case "/payment-done": return paymentDonePage();
    case "/step-up-done": return stepUpDonePage();
    case "/payments": return paymentsPage();
    case "/connections": return connectionsPage();
    case "/connection-done": return connectionDonePage();
    case "/sessions": return sessionsPage();
    default: return homePage();
  }
}

window.addEventListener("popstate", () => void route());
// A page with a stream open is not kept in the back-forward cache: end it on the way out
// (pageshow's route() starts it again when the page comes back).
window.addEventListener("pagehide", () => stopLive());
// A page restored from the back-forward cache runs no script: check the
// session again, so the back button after a logout shows no data.
window.addEventListener("pageshow", (ev) => {
  if ((ev as PageTransitionEvent).persisted) void route();
});
void route();

// ---- Sign in ---------------------------------------------------------------

function safeReturnTo(): string {
  const r = new URLSearchParams(location.search).get("returnTo") ?? "/";
  return r.startsWith("/") && !r.startsWith("//") && r !== "/login" && !r.startsWith("/login?") ? r : "/";
}

/** The sign-in this BFF has (route() asked GET /auth/methods): the dev form or the OpenID link, never both. */
function loginPage(): void {
  const returnTo = safeReturnTo();
  render(h("section", { id: "sign-in" },
    h("h1", {}, "Sign in"), ...(signInMethod === "dev" ? devLogin(returnTo) : oidcLogin(returnTo))));
  document.getElementById("userId")?.focus();
}

function oidcLogin(returnTo: string): Node[] {
  return [
    h("p", {}, "Sign in with your organization's account."),
    h("p", {}, h("a", { class: "button", id: "oidc-login", href: bff.loginUrl(returnTo) }, "Sign in")),
  ];
}

function devLogin(returnTo: string): Node[] {
  const fields: Fields = {};
  const out = h("div");
  const submit = h("button", { type: "submit" }, "Sign in") as HTMLButtonElement;
  const form = h(
    "form",
    {
      id: "login-form",
      novalidate: true,
      onsubmit: submitter(fields, out, submit, async () => {
        const s = await bff.devLogin(fields.userId!.input.value.trim());
        who = s.userId;
        go(returnTo);
      }),
    },
    formField(fields, "userId", "userId", "User id", "alice", { autocomplete: "username" }),
    submit,
  );
  return [
    h("p", {}, "Development sign-in: any user id is accepted."),
    form,
    out,
    h("p", { class: "muted" },
      "Personas of the upstream simulator: a user id persona-<name>[-anything] gets that persona's data, " +
      "e.g. persona-busy (9 accounts, 10,000 transactions), persona-new (no data), persona-troubled " +
      "(expired and failing bank connections), persona-free (the Free plan: data calls refused). " +
      "Any other id is the default persona."),
  ];
}

// ---- Accounts and transactions --------------------------------------------

function balanceOf(a: Account): string {
  const b = a.balances?.[0];
  return b ? formatMoney(b.balanceAmount) : "";
}

/** The charged amount, or the original amount when chargedAmount.amount is "". */
function txAmount(t: Transaction): string {
  const charged = t.amount?.chargedAmount;
  if (charged && charged.amount !== "" && charged.amount !== undefined) return formatMoney(charged);
  return formatMoney(t.amount?.originalAmount);
}

const txColumns = [{ label: "Date" }, { label: "Merchant" }, { label: "Category" }, { label: "Amount", num: true }];
const accountColumns = [{ label: "Account" }, { label: "Bank" }, { label: "Number" }, { label: "Balance", num: true }];

function homePage(): void {
  const status = h("div", { id: "refresh-status" });
  const accountsBox = h("div", { id: "accounts" }, ui.loading);
  const txTable = table("transactions", txColumns, []);
  const txBody = txTable.querySelector("tbody")!;
  const txMsg = h("div", { id: "transactions-msg" });
  const more = h("button", { id: "load-more", type: "button" }, "Load more") as HTMLButtonElement;
  const loadTx = pager<Transaction>({
    body: txBody,
    columns: txColumns,
    row: (t) => h("tr", {},
      h("td", {}, formatDate(t.date?.transactionDate)),
      h("td", {}, h("bdi", {}, t.merchantName || t.description?.description || "")),
      h("td", {}, t.category?.main ?? ""),
      h("td", { class: "num" }, txAmount(t)),
    ),
    key: (t) => t.id,
    read: (nextPage) => bff.transactions({ limit: 20, ...(nextPage ? { nextPage } : {}) }),
    more,
    msg: txMsg,
    shown: (count, ended) => (count === 0 && ended ? "No transactions." : `${count} shown` + (ended ? " (all)" : "")),
  });

  const refreshBtn = h("button", {
    id: "refresh",
    type: "button",
    onclick: async () => {
      status.replaceChildren(ui.loading);
      try {
        const r = await bff.refresh();
        status.replaceChildren(h("div", { class: "ok" }, r.status === "already_running" ? ui.refreshRunning : ui.refreshAccepted));
      } catch (err) {
        // No Retry here: the button is the retry, and REFRESH_TOO_SOON says when.
        status.replaceChildren(errorBox(err));
      }
    },
  }, "Refresh data");

  async function loadAccounts(): Promise<void> {
    accountsBox.replaceChildren(ui.loading);
    try {
      const rows: HTMLElement[] = [];
      for await (const page of bff.accountPages({})) {
        for (const a of page.items) {
          rows.push(h("tr", {},
            h("td", {}, h("bdi", {}, a.product ?? a.accountType ?? "")),
            h("td", {}, providerName(a.providerId)),
            h("td", { class: "mono" }, a.accountNumber ?? ""),
            h("td", { class: "num" }, balanceOf(a)),
          ));
        }
      }
      accountsBox.replaceChildren(rows.length === 0 ? "No accounts yet." : table("accounts-table", accountColumns, rows));
    } catch (err) {
      accountsBox.replaceChildren(errorBox(err, () => void loadAccounts()));
    }
  }

  render(
    h("h1", {}, "Accounts"),
    h("div", { class: "row" }, refreshBtn, status),
    accountsBox,
    h("h2", {}, "Transactions"),
    txTable,
    txMsg,
    more,
  );
  void loadAccounts();
  void loadTx();
}

// ---- New payment -----------------------------------------------------------

function payPage(): void {
  const fields: Fields = {};
  const field = (name: string, path: string, label: string, value: string, extra: Attrs = {}) =>
    formField(fields, name, path, label, value, extra);
  const out = h("div");
  const submit = h("button", { type: "submit" }, "Pay") as HTMLButtonElement;
  // One key per payment the user means to make, kept across a Retry of the same form: a
  // payment whose answer was lost is never made twice. A new form gets a new key.
  let key = crypto.randomUUID();

  const form = h(
    "form",
    {
      id: "pay-form",
      novalidate: true,
      onsubmit: submitter(fields, out, submit, async () => {
        const body: PaymentCreate = {
          paymentInformation: {
            amount: fields.amount!.input.value.trim(),
            currency: fields.currency!.input.value.trim(),
            creditorName: fields.payee!.input.value.trim(),
            creditorAccount: { iban: fields.iban!.input.value.replace(/\s+/g, "") },
            remittanceInformation: fields.remittance!.input.value,
          },
          providerIds: ["demobank-sandbox"],
          includeFakeProviders: true,
          redirectUrl: location.origin + "/payment-done",
        };
        try {
          const res = await bff.createPayment(body, { idempotencyKey: key });
          out.replaceChildren(h("p", {}, "Going to your bank to approve the payment…"));
          location.assign(res.data.payUrl);
        } catch (err) {
          if (isStepUpRequired(err)) {
            // Held for the user's approval, not sent: the form stays disabled (this payment,
            // this key), and the approval is the way on.
            out.replaceChildren(approvalBox(err, body));
            return;
          }
          // A refused request made no payment: the corrected one is a new payment.
          if (isBffError(err) && err.action === "fix_request") key = crypto.randomUUID();
          throw err;
        }
      }),
    },
    field("amount", "paymentInformation.amount", "Amount", "12.50", { inputmode: "decimal" }),
    field("currency", "paymentInformation.currency", "Currency", "ILS", { readonly: true }),
    // The payee's name goes with the IBAN, so the bank's page (and the sign-in provider's, for a
    // payment the user approves there) names who is paid, not only an account number.
    field("payee", "paymentInformation.creditorName", "Payee name", "Dana Levi", { autocomplete: "off" }),
    field("iban", "paymentInformation.creditorAccount.iban", "Payee IBAN", "IL620108000000099999999", { class: "mono", autocomplete: "off" }),
    field("remittance", "paymentInformation.remittanceInformation", "Description", "Example payment"),
    submit,
  );
  render(
    h("h1", {}, "New payment"),
    h("p", { class: "muted" }, "You approve the payment at your bank and come back here."),
    form,
    out,
  );
}

// ---- Payments the user approves (payments.step_up) -------------------------

/** Sends the browser to approve a held payment (a full-page navigation), or shows why it cannot. */
function approve(target: StepUpTarget, key: string, out: HTMLElement): void {
  try {
    startStepUp(target, { returnTo: approvalReturn(key) });
  } catch (err) {
    out.replaceChildren(errorBox(err));
  }
}

/** "This payment needs your approval": what it means, until when, and the button to approve it. */
function approvalBox(err: StepUpRequired, body: PaymentCreate): HTMLElement {
  const key = err.idempotencyKey ?? "";
  const out = h("div");
  return h("div", { id: "step-up", class: "pending", role: "status", "data-key": key },
    h("strong", {}, approvalWords.needed),
    h("p", {}, approvalWords.explain),
    err.expiresAt ? h("p", { class: "muted" }, fill(approvalWords.until, { time: formatDateTime(err.expiresAt) })) : null,
    h("div", { class: "row" },
      h("button", {
        id: "step-up-approve", type: "button",
        onclick: () => {
          keepHeld(key, body);
          approve(err, key, out);
        },
      }, approvalWords.approve),
      link("/pay", approvalWords.startOver)),
    out);
}

/**
 * Back from an approval (`/step-up-done?key=…&stepUp=approved|declined|failed[&payment=…]`):
 * the payment's record, kept live from the event stream as /payment-done keeps its status, in
 * one of `#step-up-approved` (sent: its request and the bank's status, and **Continue to your
 * bank** while the bank waits for the user's consent), `#step-up-declined` (never sent),
 * `#step-up-failed` (the approval did not complete: **Try approving again** while it waits),
 * inside `#step-up-outcome`.
 */
function stepUpDonePage(): void {
  const back = stepUpReturn(location.search);
  const key = back?.idempotencyKey ?? new URLSearchParams(location.search).get("key") ?? undefined;
  const box = h("div", { id: "step-up-outcome" });
  const out = h("div");
  const recent = recentPayments();
  render(
    h("h1", {}, "Payment approval"),
    box,
    out,
    h("p", { class: "links" }, link("/pay", "Make another payment"), " · ", link("/payments", "All payments"), " · ", link("/", "Accounts")),
    recent.el,
  );
  let shown: PaymentRecord | undefined;
  function show(rec: PaymentRecord | undefined): void {
    if (rec) shown = rec;
    const v = describeApproval(back?.outcome, rec);
    if (rec?.state === "declined") dropHeld(rec.key);
    const el = h("div", {
      id: "step-up-" + v.view, class: v.tone,
      "data-state": rec?.state ?? "", "data-status": rec?.status === undefined ? "" : String(rec.status),
      "data-payment-status": rec?.paymentStatus ?? "", "data-declined": rec?.declined ?? "",
    }, h("strong", {}, v.title), v.detail ? h("p", {}, v.detail) : null);
    if (rec?.paymentId) el.append(h("p", { class: "reference" }, "Payment id: " + rec.paymentId));
    if (v.canApprove && rec && key) {
      el.append(h("button", { id: "step-up-approve", type: "button", onclick: () => approve(rec, key, out) }, approvalWords.tryAgain));
    }
    const body = key && v.canContinue ? heldBody(key) : undefined;
    if (body && key) {
      const cont = h("button", {
        id: "step-up-continue", type: "button",
        onclick: async () => {
          cont.disabled = true;
          out.replaceChildren();
          try {
            // The same request and key: the stored answer, not a second payment.
            const res = await bff.createPayment(body, { idempotencyKey: key });
            dropHeld(key);
            location.assign(res.data.payUrl);
          } catch (err) {
            cont.disabled = false;
            out.replaceChildren(errorBox(err));
          }
        },
      }, approvalWords.continueAtBank) as HTMLButtonElement;
      el.append(h("p", {}, approvalWords.continueHint), cont);
    }
    box.replaceChildren(el);
  }
  async function load(): Promise<void> {
    try {
      const rec = await bff.paymentRecord(key!);
      if (!shown || isNewer(rec, shown)) show(rec);
    } catch (err) {
      box.replaceChildren(errorBox(err, () => void load()));
    }
  }
  show(undefined);
  // The bank decides after the approval: the status follows the payment's changes as they come.
  live(recent, (rec) => {
    if (key && rec.key === key && (!shown || isNewer(rec, shown))) show(rec);
  }, () => {
    // A change made before the stream opened is not in it: read the record again.
    if (key) void load();
  });
  if (key) void load();
}

// ---- Forms -----------------------------------------------------------------

/** A form's inputs by name, each with its error line and the request body path it fills. */
type Fields = Record<string, { input: HTMLInputElement; msg: HTMLElement; path: string }>;

function formField(fields: Fields, name: string, path: string, label: string, value: string, extra: Attrs = {}): HTMLElement {
  const input = h("input", { id: name, name, value, "aria-describedby": name + "-error", ...extra }) as HTMLInputElement;
  const msg = h("div", { class: "field-error", id: name + "-error" });
  fields[name] = { input, msg, path };
  return h("div", { class: "field" }, h("label", { for: name }, label), input, msg);
}

function clearFieldErrors(fields: Fields): void {
  for (const f of Object.values(fields)) { f.msg.textContent = ""; f.input.removeAttribute("aria-invalid"); }
}

/**
 * A form's submit handler: clears the last errors, disables the button while send runs,
 * and on failure marks each field the answer names (formError) and enables it again. The
 * button is the Retry of a form.
 */
function submitter(fields: Fields, out: HTMLElement, submit: HTMLButtonElement, send: () => Promise<void>) {
  return async (ev: Event) => {
    ev.preventDefault();
    out.replaceChildren();
    clearFieldErrors(fields);
    submit.disabled = true;
    try {
      await send();
    } catch (err) {
      submit.disabled = false;
      out.replaceChildren(formError(err, fields));
    }
  };
}

function formError(err: unknown, fields: Fields): HTMLElement {
  if (isBffError(err)) markFields(err, fields);
  return errorBox(err);
}

/** Whether an error's field names the path: itself, its last part, or an item of it (`providerIds[0]`). */
function namesPath(field: string, path: string): boolean {
  return field !== "" && (path === field || path.endsWith("." + field) || field.startsWith(path + "["));
}

/** Marks each input an error names, with the plain words of messages.ts (not the upstream's). */
function markFields(err: BffError, fields: Fields): void {
  for (const fe of err.fields) {
    const [name, f] = Object.entries(fields).find(([, x]) => namesPath(fe.field, x.path)) ?? [];
    if (!name || !f) continue;
    f.msg.textContent = fieldMessages[name] ?? ui.fieldHelp;
    f.input.setAttribute("aria-invalid", "true");
  }
}

// ---- Back from the bank ----------------------------------------------------

const finalOk = new Set(["ACCC", "ACSC", "ACSP", "ACTC", "ACWC", "ACFC", "PATC"]);
const finalBad = new Set(["RJCT", "CANC", "ERROR"]);

function paymentDonePage(): void {
  const id = new URLSearchParams(location.search).get("paymentId");
  const box = h("div", { id: "payment-outcome" }, "Checking the payment…");
  // Download receipt, once the payment's record (among the recent ones) says its outcome is known.
  const receipt = h("div", { id: "receipt" });
  let offered = false;
  const recent = recentPayments(10, (records) => {
    const rec = records.find((r) => r.paymentId === id);
    if (offered || !rec || !hasReceipt(rec)) return;
    offered = true;
    const out = h("div", { id: "receipt-result", "aria-live": "polite" });
    receipt.replaceChildren(h("div", { class: "row" }, receiptButton(rec.key, out, "receipt", "receipt-download")), out);
  });
  render(
    h("h1", {}, "Payment"),
    box,
    receipt,
    h("p", { class: "links" }, link("/pay", "Make another payment"), " · ", link("/payments", "All payments"), " · ", link("/", "Accounts")),
    recent.el,
  );
  if (!id) {
    box.replaceChildren(h("div", { class: "error" }, "This page was opened without a payment."));
    live(recent);
    return;
  }
  let shown: Payment | null = null;
  function show(p: Payment): void {
    shown = p;
    const cls = finalOk.has(p.status) ? "ok" : finalBad.has(p.status) ? "error" : "pending";
    const words = finalOk.has(p.status) ? "Payment accepted" : finalBad.has(p.status) ? "Payment not made" : "Payment still in progress";
    const pi = p.paymentInformation;
    box.replaceChildren(h("div", { class: cls, "data-status": p.status },
      h("strong", {}, `${words}: ${statusWords(paymentStatus, p.status)}`),
      h("div", {}, formatMoney({ amount: pi?.amount, currency: pi?.currency }),
        pi?.remittanceInformation ? " · " : "", h("bdi", {}, pi?.remittanceInformation ?? "")),
      h("p", { class: "reference" }, "Payment id: " + p.id)));
  }
  async function load(): Promise<void> {
    box.replaceChildren("Checking the payment…");
    try {
      // The bank's redirect says what it says; the BFF's answer is what counts.
      show(await bff.payment(id!));
    } catch (err) {
      box.replaceChildren(errorBox(err, () => void load()));
    }
  }
  // A final status is not undone by an older state of the payment arriving late.
  const moves = (status: string) => shown !== null && statusMoves(shown.status, status);
  /** On each connection of the stream: a change made before it opened is not in it. */
  async function reread(): Promise<void> {
    if (!shown) return; // the first read (load) is still on its way, or failed and offers Retry
    try {
      const p = await bff.payment(id!);
      if (moves(p.status)) show(p);
    } catch {
      // The status shown stays; the stream goes on.
    }
  }
  // The bank may still be deciding: the outcome follows the payment's changes as they come.
  live(recent, (rec) => {
    if (rec.paymentId === id && rec.paymentStatus && shown && moves(rec.paymentStatus)) {
      show({ ...shown, status: rec.paymentStatus });
    }
  }, () => void reread());
  void load();
}

// ---- Live payment status ---------------------------------------------------

// The one stream of payment changes (GET /bff/events), of the page on screen; route() ends it.
let liveStop: AbortController | null = null;

function stopLive(): void {
  liveStop?.abort();
  liveStop = null;
}

/**
 * Keeps recent (and onChange, for the page's own use) current from the BFF's payment events
 * until the next page: the client reconnects by itself; the list is loaded at once and again on
 * each connection, and onOpen (the page's own read) runs on each connection too, so a change
 * between a read and the stream's opening is not missed: a stream starts from now. A refusal (the session ended: the
 * client has shown the sign-in page) ends it with a line under the list.
 */
function live(recent: RecentPayments, onChange?: (rec: PaymentRecord) => void, onOpen?: () => void): void {
  stopLive();
  const stop = new AbortController();
  liveStop = stop;
  // At once, and again on each connection (below): a stream that waits out a 429 or a 503
  // leaves the list shown, not "Loading…".
  void recent.load();
  const opened = () => {
    void recent.load();
    onOpen?.();
  };
  void (async () => {
    try {
      for await (const ev of bff.events({ signal: stop.signal, onOpen: opened })) {
        recent.update(ev.data);
        onChange?.(ev.data);
      }
    } catch (err) {
      if (!stop.signal.aborted) recent.stopped(err);
    }
  })();
}

const recentColumns = [{ label: "Created" }, { label: "Payment" }, { label: "Request" }, { label: "Status" }];

interface RecentPayments {
  el: HTMLElement;
  /** (Re)reads the newest payments (GET /bff/payments), keeping what events said since. */
  load(): Promise<void>;
  /** Shows a payment's latest state (an event's data). */
  update(rec: PaymentRecord): void;
  /** The stream ended with err: the list is no longer live. */
  stopped(err: unknown): void;
}

/**
 * The user's newest payments as the BFF records them, with the bank's status: a table whose rows
 * (`tr[data-key][data-payment-id][data-payment-status]`) change in place as events arrive, each
 * finished one with its **Download receipt** (`button.receipt-download`, the receipt shown in
 * `#recent-receipt`). drawn(records) runs each time the rows are drawn.
 */
function recentPayments(limit = 10, drawn?: (records: PaymentRecord[]) => void): RecentPayments {
  const byKey = new Map<string, PaymentRecord>();
  const t = table("recent-payments-table", recentColumns, []);
  const body = t.querySelector("tbody")!;
  t.hidden = true;
  const msg = h("div", { id: "recent-payments-msg" }, ui.loading);
  const receiptOut = h("div", { id: "recent-receipt", "aria-live": "polite" });
  const el = h("section", { id: "recent-payments" }, h("h2", {}, "Recent payments"),
    h("p", { class: "muted" }, "Their status at the bank, kept up to date on this page."), t, receiptOut, msg);

  /** Keeps the newer of two states of one payment (isNewer; an event wins a tie). */
  function keep(rec: PaymentRecord, overTie: boolean): void {
    const had = byKey.get(rec.key);
    if (!had || isNewer(rec, had) || (overTie && rec.updatedAt === had.updatedAt)) byKey.set(rec.key, rec);
  }
  function row(rec: PaymentRecord): HTMLElement {
    const words = describeRecord(rec);
    return h("tr", {
      "data-key": rec.key, "data-state": rec.state, "data-status": rec.status === undefined ? "" : String(rec.status),
      "data-payment-id": rec.paymentId ?? "", "data-payment-status": rec.paymentStatus ?? "",
    },
      h("td", {}, formatDateTime(rec.createdAt)),
      h("td", {}, h("span", {}, h("span", { class: "mono" }, rec.paymentId ?? ""),
        hasReceipt(rec) ? receiptButton(rec.key, receiptOut, "recent-receipt") : null)),
      h("td", { class: "request-state" }, words.request),
      h("td", { class: "payment-status" }, words.status),
    );
  }
  function draw(): void {
    const newest = [...byKey.values()].sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0)).slice(0, limit);
    const rows = h("tbody", {}, ...newest.map(row));
    labelCells(rows, recentColumns);
    body.replaceChildren(...Array.from(rows.children));
    t.hidden = newest.length === 0;
    drawn?.(newest);
  }
  async function load(): Promise<void> {
    try {
      const page = await bff.paymentRecords({ limit });
      for (const rec of page.items) keep(rec, false);
      draw();
      msg.replaceChildren(byKey.size === 0 ? h("p", { id: "recent-payments-empty" }, "No payments yet.") : "");
    } catch (err) {
      msg.replaceChildren(errorBox(err, () => void load()));
    }
  }
  return {
    el,
    load,
    update(rec) {
      keep(rec, true);
      draw();
      if (byKey.size > 0) msg.replaceChildren();
    },
    stopped(err) {
      if (!isBffError(err)) console.error(err);
      void load().then(() => msg.append(h("p", { class: "muted", id: "recent-payments-stopped" }, ui.notLive)));
    },
  };
}

// ---- Receipts --------------------------------------------------------------

/**
 * **Download receipt** of the payment made with key: downloads its receipt, verifies it here
 * against the BFF's published keys and saves it as a file (receipt.ts); out then shows the
 * verified receipt (`[data-receipt-verified]`, its facts in `#<prefix>-facts`), "not known yet"
 * for a 409 (`[data-receipt-not-yet]`), or the error.
 */
function receiptButton(key: string, out: HTMLElement, prefix: string, id?: string): HTMLButtonElement {
  const button = h("button", {
    ...(id ? { id } : {}),
    class: "receipt-download", type: "button", "data-key": key,
    onclick: async () => {
      button.disabled = true;
      out.replaceChildren(h("p", { class: "muted" }, receiptWords.downloading));
      try {
        out.replaceChildren(verifiedReceipt(await downloadReceipt(bff, key), prefix));
      } catch (err) {
        const why = receiptProblem(err);
        out.replaceChildren(why === "not_yet"
          ? h("div", { class: "pending", role: "status", "data-receipt-not-yet": "" }, receiptWords.notYet)
          : why === "not_verified"
          ? h("div", { class: "error", role: "alert", "data-receipt-refused": "" }, receiptWords.notVerified)
          : errorBox(err));
      } finally {
        button.disabled = false;
      }
    },
  }, receiptWords.download) as HTMLButtonElement;
  return button;
}

/** A receipt that verified: who signed it with which key, and what it states. */
function verifiedReceipt(v: SavedReceipt, prefix: string): HTMLElement {
  const facts = receiptFacts(v.receipt).flatMap((f) => [h("dt", {}, f.label), h("dd", {}, h("bdi", {}, f.value))]);
  return h("div", { class: "ok", "data-receipt-verified": v.kid, "data-key": v.receipt.key },
    h("strong", {}, fill(receiptWords.verified, { iss: v.receipt.iss, kid: v.kid })),
    h("dl", { id: prefix + "-facts", class: "facts" }, ...facts),
    h("p", { class: "reference" }, fill(receiptWords.saved, { file: v.file })));
}

// ---- Payments --------------------------------------------------------------

const paymentColumns = [{ label: "Created" }, { label: "Amount", num: true }, { label: "Description" }, { label: "Status" }];

function paymentRow(p: Payment): HTMLElement {
  const pi = p.paymentInformation;
  return h("tr", { "data-payment-id": p.id, "data-status": p.status },
    h("td", {}, formatDateTime(p.createdAt)),
    h("td", { class: "num" }, formatMoney({ amount: pi?.amount, currency: pi?.currency })),
    h("td", {}, h("bdi", {}, pi?.remittanceInformation ?? "")),
    h("td", { class: "payment-status" }, statusWords(paymentStatus, p.status)),
  );
}

/** Moves the row of rec's payment in body, if listed, to rec's status. */
function restatusRow(body: HTMLElement, rec: PaymentRecord): void {
  if (!rec.paymentId || !rec.paymentStatus) return;
  for (const tr of Array.from(body.querySelectorAll<HTMLElement>("tr[data-payment-id]"))) {
    if (tr.dataset.paymentId !== rec.paymentId) continue;
    tr.dataset.status = rec.paymentStatus;
    const cell = tr.querySelector(".payment-status");
    if (cell) cell.textContent = statusWords(paymentStatus, rec.paymentStatus);
  }
}

function paymentsPage(): void {
  const t = table("payments-table", paymentColumns, []);
  const body = t.querySelector("tbody")!;
  t.hidden = true;
  const msg = h("div", { id: "payments-msg" });
  const more = h("button", { id: "payments-more", type: "button" }, "Load more") as HTMLButtonElement;
  const load = pager<Payment>({
    body,
    columns: paymentColumns,
    row: paymentRow,
    key: (p) => p.id,
    read: (nextPage) => bff.payments({ limit: 20, sort: -1, ...(nextPage ? { nextPage } : {}) }),
    more,
    msg,
    shown: (count, ended) => {
      t.hidden = count === 0;
      return count === 0 && ended
        ? h("p", { id: "payments-empty" }, "No payments yet.")
        : `${count} shown` + (ended ? " (all)" : "");
    },
  });

  const recent = recentPayments();
  render(
    h("h1", {}, "Payments"),
    h("p", { class: "muted" }, link("/pay", "New payment")),
    recent.el,
    h("h2", {}, "All payments at the bank"),
    h("p", { class: "muted" }, "Newest first."),
    t,
    msg,
    more,
  );
  live(recent, (rec) => restatusRow(body, rec));
  void load();
}

// ---- Bank connections ------------------------------------------------------

const connectionColumns = [{ label: "Bank" }, { label: "Status" }, { label: "Connected" }];

function connectionRow(c: Connection): HTMLElement {
  return h("tr", { "data-connection-id": c.id ?? "", "data-status": c.status ?? "" },
    h("td", {}, providerNames(c)),
    // A connection's own error is the bank's text: its status in words says what to do.
    h("td", {}, statusWords(connectionStatus, c.status)),
    h("td", {}, formatDateTime(c.createdAt)),
  );
}

function connectionsPage(): void {
  const list = h("div", { id: "connections" }, ui.loading);
  const fields: Fields = {};
  const out = h("div");
  const submit = h("button", { id: "connect", type: "submit" }, "Connect a bank") as HTMLButtonElement;
  const form = h(
    "form",
    {
      id: "connect-form",
      novalidate: true,
      onsubmit: submitter(fields, out, submit, async () => {
        const res = await bff.createConnection({
          providerIds: [fields.provider!.input.value.trim()],
          redirectUrl: location.origin + "/connection-done",
        });
        out.replaceChildren(h("p", {}, "Going to your bank to approve the connection…"));
        location.assign(res.connectUrl);
      }),
    },
    formField(fields, "provider", "providerIds", "Bank (provider id)", "demobank-sandbox", { autocomplete: "off" }),
    submit,
  );
  render(
    h("h1", {}, "Banks"),
    list,
    h("h2", {}, "Connect a bank"),
    h("p", { class: "muted" }, "You approve the connection at your bank and come back here."),
    form,
    out,
  );
  async function load(): Promise<void> {
    list.replaceChildren(ui.loading);
    try {
      const rows: HTMLElement[] = [];
      for await (const page of bff.connectionPages({})) rows.push(...page.items.map(connectionRow));
      list.replaceChildren(rows.length === 0
        ? h("p", { id: "connections-empty" }, "No banks connected yet.")
        : table("connections-table", connectionColumns, rows));
    } catch (err) {
      list.replaceChildren(errorBox(err, () => void load()));
    }
  }
  void load();
}

function connectionDonePage(): void {
  const id = new URLSearchParams(location.search).get("connectionId");
  const box = h("div", { id: "connection-outcome" }, "Checking the connection…");
  render(
    h("h1", {}, "Bank connection"),
    box,
    h("p", { class: "links" }, link("/connections", "Banks"), " · ", link("/", "Accounts")),
  );
  if (!id) {
    box.replaceChildren(h("div", { class: "error" }, "This page was opened without a connection."));
    return;
  }
  async function load(): Promise<void> {
    box.className = "";
    box.replaceChildren("Checking the connection…");
    try {
      const c = await bff.connection(id!);
      const status = c.status ?? "";
      const [cls, words] = status === "ACTIVE" ? ["ok", "Bank connected"]
        : status === "PENDING" ? ["pending", "Bank connection still waiting for approval"]
        : ["error", "Bank not connected: " + statusWords(connectionStatus, status)];
      box.className = cls;
      box.setAttribute("data-status", status);
      box.replaceChildren(
        h("strong", {}, words),
        h("div", {}, providerNames(c)),
        h("p", { class: "reference" }, "Connection id: " + (c.id ?? id)));
    } catch (err) {
      box.replaceChildren(errorBox(err, () => void load()));
    }
  }
  void load();
}

// ---- Sessions and logout ---------------------------------------------------

const sessionColumns = [{ label: "Method" }, { label: "Signed in" }, { label: "Last seen" }, { label: "Expires" }, { label: "" }];

function sessionsPage(): void {
  const list = h("div", { id: "sessions" }, ui.loading);
  const out = h("div");
  const logoutBtn = h("button", {
    id: "logout", type: "button",
    onclick: async () => {
      try {
        const { logoutUrl } = await bff.logout();
        who = null;
        renderNav();
        if (logoutUrl) {
          // After an OpenID login the browser is on its way to the provider's
          // logout page: leave nothing of the user's on this page, and no
          // extra history entry, behind it.
          render(h("p", {}, "Signing you out at your identity provider… ",
            h("a", { href: logoutUrl }, "Continue"), " if nothing happens."));
          return;
        }
        go("/login");
      } catch (err) { out.replaceChildren(errorBox(err)); }
    },
  }, "Log out");
  const everywhereBtn = h("button", {
    id: "logout-everywhere", type: "button",
    onclick: async () => {
      try {
        await bff.logoutEverywhere();
        who = null;
        go("/login");
      } catch (err) { out.replaceChildren(errorBox(err)); }
    },
  }, "Log out everywhere");
  function sessionRow(s: SessionInfo): HTMLElement {
    const revoke = h("button", {
      class: "revoke", type: "button",
      onclick: async () => {
        revoke.disabled = true;
        out.replaceChildren();
        try {
          await bff.revokeSession(s.id);
          await load();
        } catch (err) {
          revoke.disabled = false;
          out.replaceChildren(errorBox(err));
        }
      },
    }, "End this session") as HTMLButtonElement;
    return h("tr", { "data-session-id": s.id, "data-current": s.current && "true" },
      h("td", {}, sessionMethod[s.method] ?? s.method),
      h("td", {}, formatDateTime(s.createdAt)),
      h("td", {}, formatDateTime(s.lastSeenAt)),
      h("td", {}, formatDateTime(s.expiresAt)),
      h("td", {}, s.current ? "This browser" : revoke),
    );
  }
  async function load(): Promise<void> {
    try {
      const ss = await bff.sessions();
      list.replaceChildren(table("sessions-table", sessionColumns, ss.map(sessionRow)));
    } catch (err) {
      list.replaceChildren(errorBox(err, () => void load()));
    }
  }
  render(
    h("h1", {}, "Sessions"),
    list,
    h("div", { class: "row" }, logoutBtn, everywhereBtn),
    out,
  );
  void load();
}
