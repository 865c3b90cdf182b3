// A fake fetch for the tests: it records every request and answers from a script.
import { createClient, type ClientOptions } from "../src/index.js";

export interface Recorded {
  url: string;
  method: string;
  headers: Record<string, string>;
  credentials: RequestCredentials | undefined;
  body: string | undefined;
}

export type Reply = Response | Error | ((req: Recorded) => Response | Error);

export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(status === 204 ? null : JSON.stringify(body), {
    status,
    headers: { "Content-Type": "application/json", ...headers },
  });
}

export function problem(status: number, body: Record<string, unknown>, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify({ status, ...body }), {
    status,
    headers: { "Content-Type": "application/problem+json", ...headers },
  });
}

export function empty(status = 204, headers: Record<string, string> = {}): Response {
  return new Response(null, { status, headers });
}

/** A fake fetch answering with replies in order (the last one repeats). */
export function fakeFetch(...replies: Reply[]) {
  const calls: Recorded[] = [];
  const fn = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const headers: Record<string, string> = {};
    new Headers(init?.headers).forEach((v, k) => (headers[k] = v));
    const rec: Recorded = {
      url: String(input),
      method: init?.method ?? "GET",
      headers,
      credentials: init?.credentials,
      body: typeof init?.body === "string" ? init.body : undefined,
    };
    calls.push(rec);
    if (init?.signal?.aborted) throw init.signal.reason;
    let r = replies[Math.min(calls.length - 1, replies.length - 1)];
    if (typeof r === "function") r = r(rec);
    if (r === undefined) throw new Error("no reply scripted");
    if (r instanceof Error) throw r;
    return r.clone();
  };
  return { fetch: fn as typeof fetch, calls };
}

/** A client over a fake fetch, with a sleep that records its delays and does not wait. */
export function setup(replies: Reply[], opts: Partial<ClientOptions> = {}) {
  const f = fakeFetch(...replies);
  const delays: number[] = [];
  const client = createClient({
    mode: "cookie",
    baseUrl: "https://bff.test",
    fetch: f.fetch,
    sleep: async (ms) => {
      delays.push(ms);
    },
    random: () => 0.5,
    onSessionRequired: () => {},
    ...opts,
  });
  return { client, calls: f.calls, delays };
}
