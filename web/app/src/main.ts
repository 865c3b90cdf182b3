// The BFF's example web app: plain DOM, served by the BFF from its own origin
// (static_dir), so the session cookie is first-party and the client runs in
// cookie mode. Every piece of data goes into the page through textContent
// (never innerHTML): the BFF's Content-Security-Policy allows no inline script
// or style, and the data (merchant names, Hebrew products) is not trusted.
import "./app.css";
import { createClient, isBffError } from "../../client/src/index.ts";
import type { Account, BffError, Payment, Transaction } from "../../client/src/index.ts";

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

function renderNav(): void {
  const nav = document.getElementById("nav")!;
  const whoEl = document.getElementById("who")!;
  if (!who) {
    nav.replaceChildren(link("/login", "Sign in"));
    whoEl.textContent = "";
    return;
  }
  nav.replaceChildren(
    link("/", "Accounts"), link("/pay", "New payment"), link("/sessions", "Sessions"),
  );
  whoEl.textContent = "Signed in as " + who;
}

async function route(): Promise<void> {
  const path = location.pathname;
  if (path !== "/login") {
    try {
      const me = await bff.session();
      who = me ? me.userId : null;
    } catch (err) {
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
    case "/sessions": return sessionsPage();
    default: return homePage();
  }
}

window.addEventListener("popstate", () => void route());
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
  const fields: Record<string, { input: HTMLInputElement; msg: HTMLElement; path: string }> = {};
  function field(name: string, path: string, label: string, value: string, extra: Attrs = {}): HTMLElement {
    const input = h("input", { id: name, name, value, ...extra }) as HTMLInputElement;
    const msg = h("div", { class: "field-error", id: name + "-error" });
    fields[name] = { input, msg, path };
    return h("div", { class: "field" }, h("label", { for: name }, label), input, msg);
  }
  const out = h("div");
  const submit = h("button", { type: "submit" }, "Pay") as HTMLButtonElement;

  const form = h(
    "form",
    {
      id: "pay-form",
      novalidate: true,
      onsubmit: async (ev: Event) => {
        ev.preventDefault();
        out.replaceChildren();
        for (const f of Object.values(fields)) { f.msg.textContent = ""; f.input.removeAttribute("aria-invalid"); }
        submit.disabled = true;
        try {
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
        } catch (err) {
          submit.disabled = false;
          if (isBffError(err) && err.fields.length > 0) {
            const unplaced = showFieldErrors(err, fields);
            out.replaceChildren(h("div", { class: "error", role: "alert", "data-code": err.code },
              h("strong", {}, err.code), " (action: " + err.action + "): please correct the marked fields.",
              ...unplaced.map((m) => h("div", {}, m)),
              err.requestId ? h("div", { class: "muted" }, "Request id: " + err.requestId) : null));
          } else {
            out.replaceChildren(errorBox(err));
          }
        }
      },
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

/** Puts each field error next to its input; returns the messages that match no input. */
function showFieldErrors(err: BffError, fields: Record<string, { input: HTMLInputElement; msg: HTMLElement; path: string }>): string[] {
  const unplaced: string[] = [];
  for (const fe of err.fields) {
    const f = Object.values(fields).find((x) => fe.field !== "" && (x.path === fe.field || x.path.endsWith("." + fe.field)));
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
    h("p", {}, link("/pay", "Make another payment"), " · ", link("/", "Accounts")),
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

// ---- Sessions and logout ---------------------------------------------------

function sessionsPage(): void {
  const list = h("div", { id: "sessions" }, "Loading…");
  const out = h("div");
  const logoutBtn = h("button", {
    id: "logout", type: "button",
    onclick: async () => {
      try {
        await bff.logout(); // after an OpenID login, the browser goes on to the provider's logout page
        who = null;
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
  render(
    h("h1", {}, "Sessions"),
    list,
    h("div", { class: "row" }, logoutBtn, everywhereBtn),
    out,
  );
  void (async () => {
    try {
      const ss = await bff.sessions();
      list.replaceChildren(h("table", {},
        h("thead", {}, h("tr", {}, h("th", {}, "Method"), h("th", {}, "Signed in"), h("th", {}, "Last seen"), h("th", {}, "Expires"), h("th", {}, ""))),
        h("tbody", {}, ...ss.map((s) => h("tr", {},
          h("td", {}, s.method),
          h("td", {}, new Date(s.createdAt).toLocaleString()),
          h("td", {}, new Date(s.lastSeenAt).toLocaleString()),
          h("td", {}, new Date(s.expiresAt).toLocaleString()),
          h("td", {}, s.current ? "this browser" : ""),
        )))));
    } catch (err) {
      list.replaceChildren(errorBox(err));
    }
  })();
}
