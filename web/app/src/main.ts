// The BFF's example web app: plain DOM, served by the BFF from its own origin
// (static_dir), so the session cookie is first-party and the client runs in
// cookie mode. Every piece of data goes into the page through textContent
// (never innerHTML): the BFF's Content-Security-Policy allows no inline script
// or style, and the data (merchant names, Hebrew products) is not trusted.
import "./app.css";
import { createClient, isBffError } from "../../client/src/index.ts";
import type { Account, BffError, Connection, Payment, SessionInfo, Transaction } from "../../client/src/index.ts";

const bff = createClient({
  mode: "cookie",
  // The default sends the browser to /auth/login (OpenID). This app also runs
  // against `auth.mode: dev`, which has no /auth/login, so show our sign-in page.
  onSessionRequired: () => go("/login?returnTo=" + encodeURIComponent(location.pathname + location.search)),
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

/** An error box: a BffError by its code and action, with the requestId for support. */
function errorBox(err: unknown): HTMLElement {
  if (!isBffError(err)) {
    return h("div", { class: "error", role: "alert" }, "Unexpected error: " + String(err));
  }
  return h(
    "div",
    { class: "error", role: "alert", "data-code": err.code },
    h("strong", {}, err.code),
    " (action: " + err.action + ")",
    h("div", {}, err.detail ?? err.title ?? ""),
    err.requestId ? h("div", { class: "muted" }, "Request id: " + err.requestId) : null,
  );
}

/** A date-time for display: "" when absent, as given when it is not a date. */
function when(s: string | null | undefined): string {
  if (!s) return "";
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? s : d.toLocaleString();
}

function money(m: { amount?: string | number; currency?: string } | undefined): string {
  if (!m || m.amount === undefined || m.amount === "") return "";
  const n = typeof m.amount === "number" ? m.amount : Number(m.amount);
  const cur = m.currency ?? "";
  if (!Number.isFinite(n)) return `${m.amount} ${cur}`.trim();
  try {
    return new Intl.NumberFormat("en-IL", { style: "currency", currency: cur || "ILS" }).format(n);
  } catch {
    return `${n.toFixed(2)} ${cur}`.trim();
  }
}

// ---- Router ----------------------------------------------------------------

function go(path: string): void {
  history.pushState(null, "", path);
  void route();
}

function link(path: string, text: string): HTMLElement {
  return h("a", {
    href: path,
    onclick: (ev: Event) => {
      ev.preventDefault();
      go(path);
    },
  }, text);
}

let who: string | null = null;
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
    link("/", "Accounts"), link("/connections", "Banks"), link("/pay", "New payment"),
    link("/payments", "Payments"), link("/sessions", "Sessions"),
  );
  whoEl.textContent = "Signed in as " + who;
}

async function route(): Promise<void> {
  const seq = ++routing;
  const path = location.pathname;
  // The previous page (or one restored from the back-forward cache after a
  // logout) must not stay on screen while the session is checked.
  render(h("p", {}, "Loading…"));
  if (path !== "/login") {
    try {
      const me = await bff.session();
      if (seq !== routing) return;
      who = me ? me.userId : null;
    } catch (err) {
      if (seq !== routing) return;
      renderNav();
      render(h("h1", {}, "Cannot reach the BFF"), errorBox(err));
      return;
    }
    if (!who) {
      history.replaceState(null, "", "/login?returnTo=" + encodeURIComponent(path + location.search));
    }
  }
  renderNav();
  switch (who ? location.pathname : "/login") {
    case "/login": return loginPage();
    case "/pay": return payPage();
    case "/payment-done": return paymentDonePage();
    case "/payments": return paymentsPage();
    case "/connections": return connectionsPage();
    case "/connection-done": return connectionDonePage();
    case "/sessions": return sessionsPage();
    default: return homePage();
  }
}

window.addEventListener("popstate", () => void route());
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

function loginPage(): void {
  const returnTo = safeReturnTo();
  const input = h("input", { id: "userId", name: "userId", value: "alice", autocomplete: "username" }) as HTMLInputElement;
  const out = h("div");
  const form = h(
    "form",
    {
      id: "login-form",
      onsubmit: async (ev: Event) => {
        ev.preventDefault();
        out.replaceChildren();
        try {
          const s = await bff.devLogin(input.value.trim());
          who = s.userId;
          go(returnTo);
        } catch (err) {
          out.replaceChildren(errorBox(err));
        }
      },
    },
    h("label", { for: "userId" }, "User id"),
    input,
    h("button", { type: "submit" }, "Sign in (dev login)"),
  );
  render(
    h("h1", {}, "Sign in"),
    h("p", {}, "Development login (POST /auth/dev/login, only with auth.mode: dev): any user id is accepted."),
    form,
    h("p", { class: "muted" },
      "Personas of the upstream simulator: a user id persona-<name>[-anything] gets that persona's data, " +
      "e.g. persona-busy (9 accounts, 10,000 transactions), persona-new (no data), persona-troubled " +
      "(expired and failing bank connections), persona-free (the Free plan: data calls refused). " +
      "Any other id is the default persona."),
    out,
    h("p", {}, "With an OpenID provider (auth.mode: oidc): ",
      h("a", { href: bff.loginUrl(returnTo) }, "Sign in with your identity provider")),
  );
  input.focus();
}

// ---- Accounts and transactions --------------------------------------------

function balanceOf(a: Account): string {
  const b = a.balances?.[0];
  return b ? money(b.balanceAmount) : "";
}

/** The charged amount, or the original amount when chargedAmount.amount is "". */
function txAmount(t: Transaction): string {
  const charged = t.amount?.chargedAmount;
  if (charged && charged.amount !== "" && charged.amount !== undefined) return money(charged);
  return money(t.amount?.originalAmount);
}

function homePage(): void {
  const status = h("div", { id: "refresh-status" });
  const accountsBox = h("div", { id: "accounts" }, "Loading accounts…");
  const txBody = h("tbody");
  const txMsg = h("div");
  const more = h("button", { id: "load-more", type: "button" }, "Load more") as HTMLButtonElement;
  more.hidden = true;
  let nextPage: string | null = null;
  let count = 0;

  async function loadTx(): Promise<void> {
    more.disabled = true;
    txMsg.replaceChildren("Loading…");
    try {
      const page = await bff.transactions({ limit: 20, ...(nextPage ? { nextPage } : {}) });
      for (const t of page.items) {
        txBody.append(h("tr", {},
          h("td", {}, t.date?.transactionDate ?? ""),
          h("td", {}, h("bdi", {}, t.merchantName || t.description?.description || "")),
          h("td", {}, t.category?.main ?? ""),
          h("td", { class: "num" }, txAmount(t)),
        ));
      }
      count += page.items.length;
      nextPage = page.nextPage ?? null;
      more.hidden = !nextPage;
      txMsg.replaceChildren(count === 0 ? "No transactions." : `${count} shown` + (nextPage ? "" : " (all)"));
    } catch (err) {
      txMsg.replaceChildren(errorBox(err));
    } finally {
      more.disabled = false;
    }
  }
  more.addEventListener("click", () => void loadTx());

  const refreshBtn = h("button", {
    id: "refresh",
    type: "button",
    onclick: async () => {
      status.replaceChildren("Refreshing…");
      try {
        const r = await bff.refresh();
        status.replaceChildren(h("div", { class: "ok" }, `Refresh ${r.status}` + (r.message ? `: ${r.message}` : "")));
      } catch (err) {
        if (isBffError(err) && err.is("REFRESH_TOO_SOON")) {
          status.replaceChildren(h("div", { class: "error", "data-code": err.code },
            `REFRESH_TOO_SOON: refreshed recently; try again in ${err.retryAfterSeconds ?? "?"} s.`,
            err.requestId ? h("div", { class: "muted" }, "Request id: " + err.requestId) : null));
        } else if (isBffError(err) && err.is("INSUFFICIENT_CREDITS")) {
          status.replaceChildren(h("div", { class: "error", "data-code": err.code },
            `INSUFFICIENT_CREDITS: needs ${err.cost ?? "?"} credits, ${err.balance ?? "?"} left.`));
        } else {
          status.replaceChildren(errorBox(err));
        }
      }
    },
  }, "Refresh data");

  render(
    h("h1", {}, "Accounts"),
    h("div", { class: "row" }, refreshBtn, status),
    accountsBox,
    h("h2", {}, "Transactions"),
    h("table", { id: "transactions" },
      h("thead", {}, h("tr", {}, h("th", {}, "Date"), h("th", {}, "Merchant"), h("th", {}, "Category"), h("th", { class: "num" }, "Amount"))),
      txBody),
    txMsg,
    more,
  );

  void (async () => {
    try {
      const rows: HTMLElement[] = [];
      for await (const page of bff.accountPages({})) {
        for (const a of page.items) {
          rows.push(h("tr", {},
            h("td", {}, h("bdi", {}, a.product ?? a.accountType ?? "")),
            h("td", {}, a.providerId ?? ""),
            h("td", { class: "mono" }, a.accountNumber ?? ""),
            h("td", { class: "num" }, balanceOf(a)),
          ));
        }
      }
      accountsBox.replaceChildren(rows.length === 0 ? "No accounts yet." : h("table", { id: "accounts-table" },
        h("thead", {}, h("tr", {}, h("th", {}, "Account"), h("th", {}, "Bank"), h("th", {}, "Number"), h("th", { class: "num" }, "Balance"))),
        h("tbody", {}, ...rows)));
    } catch (err) {
      accountsBox.replaceChildren(errorBox(err));
    }
  })();
  void loadTx();
}

// ---- New payment -----------------------------------------------------------

function payPage(): void {
  const fields: Fields = {};
  const field = (name: string, path: string, label: string, value: string, extra: Attrs = {}) =>
    formField(fields, name, path, label, value, extra);
  const out = h("div");
  const submit = h("button", { type: "submit" }, "Pay") as HTMLButtonElement;

  const form = h(
    "form",
    {
      id: "pay-form",
      novalidate: true,
      onsubmit: submitter(fields, out, submit, async () => {
        const res = await bff.createPayment({
          paymentInformation: {
            amount: fields.amount!.input.value.trim(),
            currency: fields.currency!.input.value.trim(),
            creditorAccount: { iban: fields.iban!.input.value.replace(/\s+/g, "") },
            remittanceInformation: fields.remittance!.input.value,
          },
          providerIds: ["demobank-sandbox"],
          includeFakeProviders: true,
          redirectUrl: location.origin + "/payment-done",
        });
        out.replaceChildren(h("p", {}, "Payment " + res.data.id + " created; going to the bank to approve it…"));
        location.assign(res.data.payUrl);
      }),
    },
    field("amount", "paymentInformation.amount", "Amount", "12.50", { inputmode: "decimal" }),
    field("currency", "paymentInformation.currency", "Currency", "ILS", { readonly: true }),
    field("iban", "paymentInformation.creditorAccount.iban", "Creditor IBAN", "IL620108000000099999999", { class: "mono" }),
    field("remittance", "paymentInformation.remittanceInformation", "Remittance information", "Example payment"),
    submit,
  );
  render(
    h("h1", {}, "New payment"),
    h("p", { class: "muted" }, "Paid through demobank-sandbox (the upstream simulator): you approve or reject it on the bank's consent page and come back here."),
    form,
    out,
  );
}

// ---- Forms -----------------------------------------------------------------

/** A form's inputs by name, each with its error line and the request body path it fills. */
type Fields = Record<string, { input: HTMLInputElement; msg: HTMLElement; path: string }>;

function formField(fields: Fields, name: string, path: string, label: string, value: string, extra: Attrs = {}): HTMLElement {
  const input = h("input", { id: name, name, value, ...extra }) as HTMLInputElement;
  const msg = h("div", { class: "field-error", id: name + "-error" });
  fields[name] = { input, msg, path };
  return h("div", { class: "field" }, h("label", { for: name }, label), input, msg);
}

function clearFieldErrors(fields: Fields): void {
  for (const f of Object.values(fields)) { f.msg.textContent = ""; f.input.removeAttribute("aria-invalid"); }
}

/** The box for a failed submit: a validation error's messages go next to their inputs. */
/**
 * A form's submit handler: clears the last errors, disables the button while send runs,
 * and on failure shows each field error at its field (formError) and enables it again.
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
  if (!isBffError(err) || err.fields.length === 0) return errorBox(err);
  const unplaced = showFieldErrors(err, fields);
  return h("div", { class: "error", role: "alert", "data-code": err.code },
    h("strong", {}, err.code), " (action: " + err.action + "): please correct the marked fields.",
    ...unplaced.map((m) => h("div", {}, m)),
    err.requestId ? h("div", { class: "muted" }, "Request id: " + err.requestId) : null);
}

/** Whether an error's field names the path: itself, its last part, or an item of it (`providerIds[0]`). */
function namesPath(field: string, path: string): boolean {
  return field !== "" && (path === field || path.endsWith("." + field) || field.startsWith(path + "["));
}

/** Puts each field error next to its input; returns the messages that match no input. */
function showFieldErrors(err: BffError, fields: Fields): string[] {
  const unplaced: string[] = [];
  for (const fe of err.fields) {
    const f = Object.values(fields).find((x) => namesPath(fe.field, x.path));
    if (!f) { unplaced.push(fe.message); continue; }
    f.msg.textContent = fe.message;
    f.input.setAttribute("aria-invalid", "true");
  }
  return unplaced;
}

// ---- Back from the bank ----------------------------------------------------

const finalOk = new Set(["ACCC", "ACSC", "ACSP", "ACTC", "ACWC", "ACFC", "PATC"]);
const finalBad = new Set(["RJCT", "CANC", "ERROR"]);

function paymentDonePage(): void {
  const q = new URLSearchParams(location.search);
  const id = q.get("paymentId");
  const said = q.get("status");
  const box = h("div", { id: "payment-outcome" }, "Checking the payment…");
  render(
    h("h1", {}, "Payment"),
    h("p", { class: "muted" }, "The bank sent you back with status " + (said ?? "(none)") + "; the BFF's answer is what counts:"),
    box,
    h("p", {}, link("/pay", "Make another payment"), " · ", link("/payments", "All payments"), " · ", link("/", "Accounts")),
  );
  if (!id) {
    box.replaceChildren(h("div", { class: "error" }, "No paymentId in the address."));
    return;
  }
  void (async () => {
    try {
      const p: Payment = await bff.payment(id);
      const cls = finalOk.has(p.status) ? "ok" : finalBad.has(p.status) ? "error" : "pending";
      const words = finalOk.has(p.status) ? "accepted" : finalBad.has(p.status) ? "not made" : "still in progress";
      box.replaceChildren(h("div", { class: cls, "data-status": p.status },
        h("strong", {}, `Payment ${words}: ${p.status}`),
        h("div", {}, `${money({ amount: p.paymentInformation?.amount, currency: p.paymentInformation?.currency })} ` +
          (p.paymentInformation?.remittanceInformation ? `· ${p.paymentInformation.remittanceInformation}` : "")),
        h("div", { class: "muted mono" }, "Payment id: " + p.id)));
    } catch (err) {
      box.replaceChildren(errorBox(err));
    }
  })();
}

// ---- Payments --------------------------------------------------------------

function paymentRow(p: Payment): HTMLElement {
  const pi = p.paymentInformation;
  return h("tr", { "data-payment-id": p.id, "data-status": p.status },
    h("td", {}, when(p.createdAt)),
    h("td", { class: "num" }, money({ amount: pi?.amount, currency: pi?.currency })),
    h("td", {}, h("bdi", {}, pi?.remittanceInformation ?? "")),
    h("td", { class: "mono" }, p.status),
  );
}

function paymentsPage(): void {
  const body = h("tbody");
  const table = h("table", { id: "payments-table" },
    h("thead", {}, h("tr", {}, h("th", {}, "Created"), h("th", { class: "num" }, "Amount"), h("th", {}, "Remittance information"), h("th", {}, "Status"))),
    body);
  table.hidden = true;
  const msg = h("div");
  const more = h("button", { id: "payments-more", type: "button" }, "Load more") as HTMLButtonElement;
  more.hidden = true;
  let nextPage: string | null = null;
  let count = 0;

  async function load(): Promise<void> {
    more.disabled = true;
    msg.replaceChildren("Loading…");
    try {
      const page = await bff.payments({ limit: 20, sort: -1, ...(nextPage ? { nextPage } : {}) });
      for (const p of page.items) body.append(paymentRow(p));
      count += page.items.length;
      nextPage = page.nextPage ?? null;
      more.hidden = !nextPage;
      table.hidden = count === 0;
      msg.replaceChildren(count === 0 && !nextPage
        ? h("p", { id: "payments-empty" }, "No payments yet.")
        : `${count} shown` + (nextPage ? "" : " (all)"));
    } catch (err) {
      msg.replaceChildren(errorBox(err));
    } finally {
      more.disabled = false;
    }
  }
  more.addEventListener("click", () => void load());

  render(
    h("h1", {}, "Payments"),
    h("p", { class: "muted" }, "Newest first. ", link("/pay", "New payment")),
    table,
    msg,
    more,
  );
  void load();
}

// ---- Bank connections ------------------------------------------------------

/** The connection's error, "CODE: message", or "". */
function connectionError(c: Connection): string {
  return c.error ? [c.error.code, c.error.message].filter(Boolean).join(": ") : "";
}

function connectionRow(c: Connection): HTMLElement {
  return h("tr", { "data-connection-id": c.id ?? "", "data-status": c.status ?? "" },
    h("td", {}, c.providerId ?? c.providerIds?.join(", ") ?? ""),
    h("td", { class: "mono" }, c.status ?? ""),
    h("td", {}, when(c.createdAt)),
    h("td", {}, h("bdi", {}, connectionError(c))),
  );
}

function connectionsPage(): void {
  const list = h("div", { id: "connections" }, "Loading…");
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
        out.replaceChildren(h("p", {}, "Connection " + res.id + " created; going to the bank to approve it…"));
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
    h("p", { class: "muted" }, "demobank-sandbox is the upstream simulator: you approve or reject the connection on the bank's consent page and come back here."),
    form,
    out,
  );
  void (async () => {
    try {
      const rows: HTMLElement[] = [];
      for await (const page of bff.connectionPages({})) rows.push(...page.items.map(connectionRow));
      list.replaceChildren(rows.length === 0 ? h("p", { id: "connections-empty" }, "No banks connected yet.") : h("table", { id: "connections-table" },
        h("thead", {}, h("tr", {}, h("th", {}, "Bank"), h("th", {}, "Status"), h("th", {}, "Created"), h("th", {}, "Error"))),
        h("tbody", {}, ...rows)));
    } catch (err) {
      list.replaceChildren(errorBox(err));
    }
  })();
}

function connectionDonePage(): void {
  const q = new URLSearchParams(location.search);
  const id = q.get("connectionId");
  const said = q.get("status");
  const box = h("div", { id: "connection-outcome" }, "Checking the connection…");
  render(
    h("h1", {}, "Bank connection"),
    h("p", { class: "muted" }, "The bank sent you back with status " + (said ?? "(none)") + "; the BFF's answer is what counts:"),
    box,
    h("p", {}, link("/connections", "Banks"), " · ", link("/", "Accounts")),
  );
  if (!id) {
    box.replaceChildren(h("div", { class: "error" }, "No connectionId in the address."));
    return;
  }
  void (async () => {
    try {
      const c = await bff.connection(id);
      const status = c.status ?? "";
      const [cls, words] = status === "ACTIVE" ? ["ok", "Bank connected"]
        : status === "PENDING" ? ["pending", "Bank connection still pending"]
        : ["error", "Bank not connected: " + (status || "(no status)")];
      box.className = cls;
      box.setAttribute("data-status", status);
      box.replaceChildren(
        h("strong", {}, words),
        h("div", {}, c.providerId ?? c.providerIds?.join(", ") ?? ""),
        h("div", {}, h("bdi", {}, connectionError(c))),
        h("div", { class: "muted mono" }, "Connection id: " + (c.id ?? id)));
    } catch (err) {
      box.replaceChildren(errorBox(err));
    }
  })();
}

// ---- Sessions and logout ---------------------------------------------------

function sessionsPage(): void {
  const list = h("div", { id: "sessions" }, "Loading…");
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
      h("td", {}, s.method),
      h("td", {}, when(s.createdAt)),
      h("td", {}, when(s.lastSeenAt)),
      h("td", {}, when(s.expiresAt)),
      h("td", {}, s.current ? "this browser" : revoke),
    );
  }
  async function load(): Promise<void> {
    try {
      const ss = await bff.sessions();
      list.replaceChildren(h("table", {},
        h("thead", {}, h("tr", {}, h("th", {}, "Method"), h("th", {}, "Signed in"), h("th", {}, "Last seen"), h("th", {}, "Expires"), h("th", {}, ""))),
        h("tbody", {}, ...ss.map(sessionRow))));
    } catch (err) {
      list.replaceChildren(errorBox(err));
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
