// scripts/gen.mjs, run as `npm run gen` / `npm run check-gen` would run it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
// dist/test/gen.test.js -> the package's root
const root = resolve(fileURLToPath(import.meta.url), "../../..");
const fixture = (name: string) => join(root, "test", "fixtures", name);

async function gen(doc: string, ...args: string[]): Promise<{ code: number; out: string }> {
  try {
    const r = await run(process.execPath, ["scripts/gen.mjs", ...args], {
      cwd: root,
      env: { ...process.env, OPENAPI_DOC: doc },
    });
    return { code: 0, out: r.stdout + r.stderr };
  } catch (e) {
    const err = e as { code: number; stdout: string; stderr: string };
    return { code: err.code, out: err.stdout + err.stderr };
  }
}

test("gen: the code and action unions come from the Problem schema's enums, sorted", async () => {
  const dir = await mkdtemp(join(tmpdir(), "gen-test-"));
  try {
    const r = await gen(fixture("mini.yaml"), "--out", dir);
    assert.equal(r.code, 0, r.out);
    const errors = await readFile(join(dir, "errors.ts"), "utf8");
    assert.match(errors, /DO NOT EDIT/);
    assert.match(errors, /export const problemCodes = \[\n {2}"ALPHA_CODE",\n {2}"ZED_CODE",\n\] as const;/);
    assert.match(errors, /export const problemActions = \[\n {2}"login",\n {2}"retry_later",\n\] as const;/);
    const types = await readFile(join(dir, "openapi.ts"), "utf8");
    assert.match(types, /ProblemCode: "ZED_CODE" \| "ALPHA_CODE"/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("gen: request bodies are closed; an answer's copy of a request schema stays open; a free-form map stays a map", async () => {
  const dir = await mkdtemp(join(tmpdir(), "gen-test-"));
  try {
    const r = await gen(fixture("requests.yaml"), "--out", dir);
    assert.equal(r.code, 0, r.out);
    const types = await readFile(join(dir, "openapi.ts"), "utf8");
    const schema = (name: string) => {
      const m = new RegExp(`\\n {8}${name}: \\{\\n([\\s\\S]*?)\\n {8}\\};`).exec(types);
      assert.ok(m, `${name} is not in the output:\n${types}`);
      return m[1]!;
    };
    const order = schema("Order");
    assert.match(order, /line: components\["schemas"\]\["Line"\];/);
    assert.match(order, /meta\?: \{\n {16}\[key: string\]: unknown;\n {12}\};/, "a map in a request stays open");
    assert.doesNotMatch(order, /\n {8}\} & \{\n {12}\[key: string\]: unknown;/, "Order must be closed");
    assert.doesNotMatch(schema("Line"), /\[key: string\]: unknown/, "Line, reached from a request, must be closed");
    const reply = schema("OrderReply");
    assert.match(reply, /\/\*\* @description The line as ordered\. \*\/\n {12}line\?: \{\n {16}sku\?: string;\n {12}\} & \{\n {16}\[key: string\]: unknown;/,
      "the answer's line is an open inline copy");
    assert.match(reply, /\} & \{\n {12}\[key: string\]: unknown;$/, "OrderReply stays open");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("check-gen: fails, naming the files, when the checked-in files differ from the document", async () => {
  const r = await gen(fixture("mini.yaml"), "--check");
  assert.equal(r.code, 1);
  assert.match(r.out, /src\/generated\/openapi\.ts, src\/generated\/errors\.ts differ/);
});

test("gen: a document without a Problem schema, or no document, fails clearly", async () => {
  const none = await gen(fixture("no-problem.yaml"), "--out", tmpdir());
  assert.equal(none.code, 1);
  assert.match(none.out, /has no components\.schemas\.Problem/);
  const missing = await gen(fixture("does-not-exist.yaml"), "--check");
  assert.equal(missing.code, 1);
  assert.match(missing.out, /cannot read the OpenAPI document .*does-not-exist\.yaml \(ENOENT\); set OPENAPI_DOC/);
});
