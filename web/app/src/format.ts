// One way to show dates, amounts and bank names, used by every page of the example apps.
import { locale } from "./messages.ts";

const dateTime = new Intl.DateTimeFormat(locale, { dateStyle: "medium", timeStyle: "short" });
// A booking date has no time of day and no zone: shown as the calendar date it names.
const dateOnly = new Intl.DateTimeFormat(locale, { dateStyle: "medium", timeZone: "UTC" });

/** A date-time for display; "" when absent or not a date. */
export function formatDateTime(s: string | null | undefined): string {
  if (!s) return "";
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? "" : dateTime.format(d);
}

/** A calendar date ("2024-05-01", or a date-time's date) for display; "" when absent or not a date. */
export function formatDate(s: string | null | undefined): string {
  if (!s) return "";
  const d = new Date(/^\d{4}-\d{2}-\d{2}$/.test(s) ? s + "T00:00:00Z" : s);
  return Number.isNaN(d.getTime()) ? "" : dateOnly.format(d);
}

/** An amount with its currency; "" when absent. */
export function formatMoney(m: { amount?: string | number; currency?: string } | undefined): string {
  if (!m || m.amount === undefined || m.amount === "") return "";
  const n = typeof m.amount === "number" ? m.amount : Number(m.amount);
  const cur = m.currency || "ILS";
  if (!Number.isFinite(n)) return "";
  try {
    return new Intl.NumberFormat(locale, { style: "currency", currency: cur }).format(n);
  } catch {
    return `${new Intl.NumberFormat(locale, { minimumFractionDigits: 2 }).format(n)} ${cur}`;
  }
}

/**
 * A bank's name from its provider id: "demobank-sandbox" is "Demobank (sandbox)". A real app
 * would read the names from GET /api/v2/providers; the ids are stable, so this is a fallback.
 */
export function providerName(id: string | null | undefined): string {
  if (!id) return "";
  const sandbox = id.endsWith("-sandbox");
  const base = (sandbox ? id.slice(0, -"-sandbox".length) : id).split(/[-_]/).filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1)).join(" ");
  return sandbox ? `${base} (sandbox)` : base;
}

/** The bank names of a connection or account: providerId, else providerIds. */
export function providerNames(x: { providerId?: string | null; providerIds?: string[] | null }): string {
  if (x.providerId) return providerName(x.providerId);
  return (x.providerIds ?? []).map(providerName).join(", ");
}
