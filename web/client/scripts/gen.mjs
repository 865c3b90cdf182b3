// Regenerates the client's generated sources from the BFF's OpenAPI document:
//
//   src/generated/openapi.ts  request and response types (openapi-typescript), with every
//                             request body closed (see closeRequests)
//   src/generated/errors.ts   the error envelope's `code` and `action` unions, read from the
//                             enumerations of the document's `Problem` schema
//
// The document is $OPENAPI_DOC, else ../../api/openapi.yaml (the repository's api/openapi.yaml).
//
//   node scripts/gen.mjs           write the files (npm run gen)
//   node scripts/gen.mjs --check   generate into a temporary directory and fail when the
//                                  checked-in files differ (npm run check-gen, run by CI)
//   node scripts/gen.mjs --out DIR write the files into DIR instead of src/generated (tests)
import { mkdtemp, readFile, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";
import openapiTS, { astToString } from "openapi-typescript";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const docPath = resolve(root, process.env.OPENAPI_DOC || "../../api/openapi.yaml");
const outputs = ["openapi.ts", "errors.ts"];
// The name the headers give the document: the same whatever path it was read from, so that
// --check does not depend on where the document lives.
const docName = "api/openapi.yaml";

function fail(msg) {
  console.error(`gen: ${msg}`);
  process.exit(1);
}

// deref follows local "$ref": "#/..." pointers.
function deref(doc, node, seen = new Set()) {
  while (node && typeof node === "object" && typeof node.$ref === "string") {
    const ref = node.$ref;
    if (!ref.startsWith("#/")) fail(`only local $refs are followed, not ${ref}`);
    if (seen.has(ref)) fail(`$ref cycle at ${ref}`);
    seen.add(ref);
    node = ref
      .slice(2)
      .split("/")
      .map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"))
      .reduce((n, key) => (n == null ? undefined : n[key]), doc);
    if (node === undefined) fail(`unresolved $ref ${ref}`);
  }
  return node;
}

// enumOf collects the string enumeration of a schema: its own `enum` (or `const`), and those of
// its allOf/anyOf/oneOf members (a code may be "one of these, or any upstream code").
function enumOf(doc, schema) {
  schema = deref(doc, schema);
  if (!schema || typeof schema !== "object") return [];
  const out = [];
  if (Array.isArray(schema.enum)) out.push(...schema.enum);
  if (typeof schema.const === "string") out.push(schema.const);
  for (const k of ["allOf", "anyOf", "oneOf"]) {
    if (Array.isArray(schema[k])) for (const s of schema[k]) out.push(...enumOf(doc, s));
  }
  return out;
}

function problemEnum(doc, member) {
  const problem = deref(doc, doc?.components?.schemas?.Problem);
  if (!problem) fail(`${docName} has no components.schemas.Problem`);
  let props = {};
  for (const s of [problem, ...(problem.allOf ?? []).map((s) => deref(doc, s))]) {
    Object.assign(props, s?.properties ?? {});
  }
  if (!props[member]) fail(`Problem has no property ${member}`);
  const values = enumOf(doc, props[member]);
  if (values.length === 0) fail(`Problem.${member} has no enumeration`);
  for (const v of values) {
    if (typeof v !== "string") fail(`Problem.${member} enumerates a non-string: ${JSON.stringify(v)}`);
  }
  return [...new Set(values)].sort();
}

const methods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];
const schemaRef = /^#\/components\/schemas\/([^/]+)$/;
const refName = (ref) => {
  const m = typeof ref === "string" ? schemaRef.exec(ref) : null;
  return m ? m[1].replace(/~1/g, "/").replace(/~0/g, "~") : null;
};

// requestSchemas names every components.schemas entry a request body reaches, through $refs,
// properties, items and allOf/anyOf/oneOf alike.
function requestSchemas(doc) {
  const names = new Set();
  const visit = (node) => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (!node || typeof node !== "object") return;
    if (typeof node.$ref === "string") {
      const name = refName(node.$ref);
      if (name === null) return visit(deref(doc, node)); // a components.requestBodies entry
      if (names.has(name)) return;
      names.add(name);
      const target = doc?.components?.schemas?.[name];
      if (target === undefined) fail(`unresolved $ref ${node.$ref}`);
      return visit(target);
    }
    Object.values(node).forEach(visit);
  };
  for (const item of Object.values(doc?.paths ?? {})) {
    for (const m of methods) if (item?.[m]?.requestBody) visit(item[m].requestBody);
  }
  return names;
}

// closeShape makes every object of a schema that declares properties exact: its
// `additionalProperties: true` becomes false. A schema without properties (a free-form map) is
// left as it is, and so are $refs: each schema they name is closed on its own.
function closeShape(node) {
  if (Array.isArray(node)) return node.forEach(closeShape);
  if (!node || typeof node !== "object" || typeof node.$ref === "string") return;
  if (node.additionalProperties === true && node.properties && typeof node.properties === "object") {
    node.additionalProperties = false;
  }
  Object.values(node).forEach(closeShape);
}

// closeRequests returns a copy of the document in which what a client sends is exact and what
// it reads is as open as the document says.
//
// The upstream's schemas are open (`additionalProperties: true`) for both directions: it ignores
// members it does not know. For an answer that is right (a new member must not break a reader);
// for a request it means a misspelt member (`redirectURL` for `redirectUrl`) is sent, ignored,
// and the payment made without it. So every schema a request body reaches is closed here
// (closeShape), and an answer that refers to one of them (Payment.paymentInformation) gets an
// inline copy of the schema as the document has it, open. The document itself is not changed:
// it says what the BFF and the upstream accept, and they accept more than this client sends.
function closeRequests(doc) {
  const requests = requestSchemas(doc);
  const out = JSON.parse(JSON.stringify(doc)); // unshared: YAML aliases become copies
  const original = out.components?.schemas ?? {};
  const opened = new Map();
  // openCopy is the schema `name` as the document has it, with the request schemas it refers
  // to inlined the same way (a cycle among them cannot be inlined, and fails).
  const openCopy = (name, stack = []) => {
    if (stack.includes(name)) fail(`cannot inline the request schema ${name}: $ref cycle ${[...stack, name].join(" -> ")}`);
    if (!opened.has(name)) opened.set(name, reopen(JSON.parse(JSON.stringify(original[name])), [...stack, name]));
    return JSON.parse(JSON.stringify(opened.get(name)));
  };
  const reopen = (node, stack = []) => {
    if (Array.isArray(node)) return node.map((n) => reopen(n, stack));
    if (!node || typeof node !== "object") return node;
    const name = refName(node.$ref);
    if (name !== null && requests.has(name)) {
      const { $ref, ...siblings } = node; // a 3.1 $ref's siblings (a description) override
      return { ...openCopy(name, stack), ...reopen(siblings, stack) };
    }
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, reopen(v, stack)]));
  };
  // Everything but the request bodies and the request schemas themselves reads as it is.
  for (const item of Object.values(out.paths ?? {})) {
    if (!item || typeof item !== "object") continue;
    for (const [k, v] of Object.entries(item)) {
      if (!methods.includes(k) || !v || typeof v !== "object") {
        item[k] = reopen(v);
        continue;
      }
      for (const [ok, ov] of Object.entries(v)) if (ok !== "requestBody") v[ok] = reopen(ov);
    }
  }
  for (const [section, entries] of Object.entries(out.components ?? {})) {
    if (section === "requestBodies" || !entries || typeof entries !== "object") continue;
    for (const [name, schema] of Object.entries(entries)) {
      if (section === "schemas" && requests.has(name)) continue;
      entries[name] = reopen(schema);
    }
  }
  for (const name of requests) closeShape(out.components.schemas[name]);
  return out;
}

function list(values) {
  return values.map((v) => `  ${JSON.stringify(v)},`).join("\n");
}

function errorsSource(codes, actions) {
  return `// Code generated by scripts/gen.mjs from ${docName} (components.schemas.Problem). DO NOT EDIT.
// Regenerate with \`npm run gen\`.

/**
 * Every \`code\` the BFF's error envelope documents. The BFF also passes on well-formed codes
 * of the upstream that are not listed here; BffError.code is typed to accept those too.
 */
export const problemCodes = [
${list(codes)}
] as const;

/** A \`code\` the OpenAPI document enumerates. */
export type ProblemCode = (typeof problemCodes)[number];

/** Every \`action\`: what a frontend should do next about an error. */
export const problemActions = [
${list(actions)}
] as const;

/** An \`action\` the OpenAPI document enumerates. */
export type ProblemAction = (typeof problemActions)[number];
`;
}

async function generate(outDir) {
  let text;
  try {
    text = await readFile(docPath, "utf8");
  } catch (err) {
    fail(`cannot read the OpenAPI document ${docPath} (${err.code ?? err.message}); set OPENAPI_DOC`);
  }
  const doc = parse(text);
  const errors = errorsSource(problemEnum(doc, "code"), problemEnum(doc, "action"));
  const ast = await openapiTS(closeRequests(doc));
  const types =
    `// Code generated by scripts/gen.mjs (openapi-typescript) from ${docName}. DO NOT EDIT.\n` +
    `// Regenerate with \`npm run gen\`. Request bodies are exact: every schema a request body\n` +
    `// reaches is closed, whatever its additionalProperties; answers are as open as the document\n` +
    `// says (an answer's copy of a request schema is inlined, open).\n\n` +
    astToString(ast);
  await mkdir(outDir, { recursive: true });
  await writeFile(join(outDir, "errors.ts"), errors);
  await writeFile(join(outDir, "openapi.ts"), types);
}

const outFlag = process.argv.indexOf("--out");
const generatedDir = outFlag > 0 && process.argv[outFlag + 1]
  ? resolve(process.argv[outFlag + 1])
  : join(root, "src", "generated");
if (process.argv.includes("--check")) {
  const tmp = await mkdtemp(join(tmpdir(), "bff-client-gen-"));
  try {
    await generate(tmp);
    const stale = [];
    for (const f of outputs) {
      const want = await readFile(join(tmp, f), "utf8");
      const have = await readFile(join(generatedDir, f), "utf8").catch(() => null);
      if (have !== want) stale.push(`src/generated/${f}`);
    }
    if (stale.length > 0) {
      fail(`${stale.join(", ")} differ from what ${docPath} generates: run \`npm run gen\` and commit`);
    }
    console.log(`gen: src/generated is up to date with ${docPath}`);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
} else {
  await generate(generatedDir);
  console.log(`gen: wrote ${generatedDir}/{${outputs.join(",")}} from ${docPath}`);
}
