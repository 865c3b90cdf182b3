import { test } from "node:test";
import assert from "node:assert/strict";
import { json, setup, type Recorded } from "./helpers.js";

function pager(req: Recorded): Response {
  const cursor = new URL(req.url).searchParams.get("nextPage");
  if (cursor === null) return json(200, { items: [{ id: 1 }, { id: 2 }], nextPage: "c1", count: 5 });
  if (cursor === "c1") return json(200, { items: [{ id: 3 }, { id: 4 }], nextPage: "c2", count: 5 });
  return json(200, { items: [{ id: 5 }], nextPage: null, count: 5 });
}

test("transactionPages follows nextPage until null, keeping the filters", async () => {
  const { client, calls } = setup([pager]);
  const ids: unknown[] = [];
  let pages = 0;
  for await (const page of client.transactionPages({ accountId: "A", limit: 2 })) {
    pages++;
    ids.push(...page.items.map((t) => t.id));
    assert.equal(page.count, 5);
  }
  assert.equal(pages, 3);
  assert.deepEqual(ids, [1, 2, 3, 4, 5]);
  assert.deepEqual(calls.map((c) => new URL(c.url).search), [
    "?accountId=A&limit=2",
    "?accountId=A&limit=2&nextPage=c1",
    "?accountId=A&limit=2&nextPage=c2",
  ]);
});

test("breaking out of the loop stops fetching", async () => {
  const { client, calls } = setup([pager]);
  for await (const page of client.paymentPages()) {
    assert.equal(page.items.length, 2);
    break;
  }
  assert.equal(calls.length, 1);
});

test("a single page: transactions() returns {items, nextPage, count}", async () => {
  const { client } = setup([json(200, { items: [], nextPage: null, count: 0 })]);
  assert.deepEqual(await client.transactions({ dateFrom: "2026-01-01" }), { items: [], nextPage: null, count: 0 });
});

test("a cursor seen before ends the iteration with UNEXPECTED_RESPONSE instead of looping", async () => {
  const { client } = setup([json(200, { items: [1], nextPage: "same", count: 9 })]);
  const got: number[] = [];
  await assert.rejects(async () => {
    for await (const page of client.pages<number>("/api/v2/merchants")) got.push(...page.items);
  }, { code: "UNEXPECTED_RESPONSE" });
  assert.deepEqual(got, [1, 1]);
});
