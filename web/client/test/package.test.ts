// The package as a team gets it: `npm pack` (which builds dist/ afresh,
// prepack), installed from the tarball into a new npm project outside the repository, then
// programs compiled against it with the repository's TypeScript, as a team would compile them:
// module and moduleResolution nodenext, strict, the package's .d.ts files checked
// (skipLibCheck off), the DOM's fetch and no Node types.
//
//   test/consumer/main.ts       must compile, and run under Node as ESM
//   test/types-must-fail/*.ts   must not compile: each line marked `// error TSnnnn` fails with
//                               that code, and no other line fails
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cp, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);
// build/test/package.test.js -> the package's root
const root = resolve(fileURLToPath(import.meta.url), "../../..");
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
const mustFail = join(root, "test", "types-must-fail");

// The children get no npm_* variable of the `npm test` running this: `npm test --prefix
// web/client` passes its prefix on as npm_config_prefix, which would install the tarball into
// the repository instead of the new project.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));

async function sh(cmd: string, args: string[], cwd: string): Promise<string> {
  try {
    const r = await run(cmd, args, { cwd, env, maxBuffer: 16 << 20 });
    return r.stdout;
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(" ")} (in ${cwd}): ${err.message}\n${err.stdout ?? ""}${err.stderr ?? ""}`);
  }
}

/** What a failed tsc said: its diagnostics as `file:line TSnnnn`, and its whole output. */
async function typeCheck(cwd: string, project: string): Promise<{ ok: boolean; errors: string[]; out: string }> {
  try {
    const r = await run(process.execPath, [tsc, "-p", project, "--pretty", "false"], { cwd, env });
    return { ok: true, errors: [], out: r.stdout };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    if (typeof err.code !== "number") throw e;
    const out = (err.stdout ?? "") + (err.stderr ?? "");
    const errors = [...out.matchAll(/^(\S+?)\((\d+),\d+\): error (TS\d+):/gm)].map((m) => `${m[1]}:${m[2]} ${m[3]}`);
    return { ok: false, errors, out };
  }
}

// The consumer's compiler options: a web app's (the DOM, no Node types), strict, and the
// package's own declarations checked, so that a broken .d.ts in dist/ fails here.
const compilerOptions = {
  target: "ES2022",
  module: "nodenext",
  moduleResolution: "nodenext",
  lib: ["ES2022", "DOM", "DOM.Iterable"],
  types: [],
  strict: true,
  skipLibCheck: false,
};

let dir = ""; // the temporary directory: the tarball, and the project in project/
let project = "";
let tarball = "";
let packed: { path: string }[] = [];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "bff-client-package-"));
  const [info] = JSON.parse(await sh("npm", ["pack", "--json", "--pack-destination", dir], root)) as {
    filename: string;
    files: { path: string }[];
  }[];
  assert.ok(info, "npm pack --json said nothing");
  tarball = join(dir, info.filename);
  packed = info.files;

  project = join(dir, "project");
  await mkdir(project);
  await sh("npm", ["init", "-y"], project);
  await sh("npm", ["pkg", "set", "type=module"], project);
  // Offline: the package has no runtime dependency, so the tarball is all there is to install.
  await sh("npm", ["install", "--offline", "--no-audit", "--no-fund", tarball], project);

  await cp(join(root, "test", "consumer"), join(project, "consumer"), { recursive: true });
  await cp(mustFail, join(project, "must-fail"), { recursive: true });
  await writeFile(join(project, "tsconfig.json"), JSON.stringify({
    compilerOptions: { ...compilerOptions, outDir: "out", rootDir: "consumer" },
    include: ["consumer"],
  }));
  await writeFile(join(project, "tsconfig.must-fail.json"), JSON.stringify({
    compilerOptions: { ...compilerOptions, noEmit: true },
    include: ["must-fail"],
  }));
}, { timeout: 120_000 });

after(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

test("npm pack: a versioned tarball of dist/ (fresh), src/, README.md, LICENSE and package.json only", async () => {
  const pkg = JSON.parse(await readFile(join(root, "package.json"), "utf8")) as { version: string };
  assert.equal(relative(dir, tarball), `fintech-bff-client-${pkg.version}.tgz`);
  const paths = packed.map((f) => f.path).sort();
  for (const want of ["LICENSE", "README.md", "package.json", "dist/index.js", "dist/index.d.ts", "dist/generated/openapi.d.ts", "src/index.ts"]) {
    assert.ok(paths.includes(want), `the tarball lacks ${want}: ${paths.join(", ")}`);
  }
  const stray = paths.filter((p) => !/^(LICENSE|README\.md|package\.json|dist\/.+|src\/.+)$/.test(p));
  assert.deepEqual(stray, [], "files the package must not ship");
  assert.ok(!paths.some((p) => p.startsWith("dist/test") || p.startsWith("dist/src")), "an old layout's build in dist/");
});

test("installed from the tarball outside the repository: not private, licensed, ESM with types", async () => {
  assert.ok(relative(root, project).startsWith(".."), `${project} is inside ${root}`);
  const installed = JSON.parse(
    await readFile(join(project, "node_modules", "@fintech-bff", "client", "package.json"), "utf8"),
  ) as Record<string, unknown>;
  assert.equal(installed["private"], undefined);
  assert.equal(installed["license"], "Apache-2.0");
  assert.equal(installed["type"], "module");
  assert.equal(installed["sideEffects"], false);
  assert.deepEqual(installed["exports"], {
    ".": { types: "./dist/index.d.ts", import: "./dist/index.js" },
    "./package.json": "./package.json",
  });
  const deps = JSON.parse(await readFile(join(project, "package.json"), "utf8")) as { dependencies: Record<string, string> };
  assert.match(deps.dependencies["@fintech-bff/client"] ?? "", /fintech-bff-client-.*\.tgz$/);
});

test("consumer/main.ts compiles against the installed package and runs as ESM", async () => {
  const r = await typeCheck(project, "tsconfig.json");
  assert.ok(r.ok, `tsc failed:\n${r.out}`);
  const out = await sh(process.execPath, [join("out", "main.js")], project);
  assert.deepEqual(JSON.parse(out), {
    status: 201,
    key: "key-1",
    payUrl: "https://bank.test/pay",
    newMember: 1,
    sent: [{
      url: "https://bff.test/api/v2/payments",
      key: "key-1",
      body: {
        paymentInformation: {
          amount: 149.9,
          currency: "ILS",
          creditorName: "Shop",
          creditorAccount: { iban: "IL620108000000099999999" },
        },
        providerIds: ["demobank-sandbox"],
        redirectUrl: "https://app.example.com/payment-done",
      },
    }],
    again: "ILS",
    user: "u1",
    codes: true,
    isBffError: false,
    receiptReason: "malformed",
  });
});

// The programs that must not compile are type-checked together, once (each is a module of its
// own, so one's errors cannot hide another's), and judged one by one.
const failing = (await readdir(mustFail)).filter((f) => f.endsWith(".ts")).sort();
let mustFailRun: Promise<{ ok: boolean; errors: string[]; out: string }> | undefined;

test("types-must-fail/ has programs to check", () => {
  assert.ok(failing.length >= 4, `got ${failing.length} programs in ${mustFail}`);
});

for (const file of failing) {
  test(`types-must-fail/${file} does not compile, failing where and as marked`, async () => {
    mustFailRun ??= typeCheck(project, "tsconfig.must-fail.json");
    const r = await mustFailRun;
    const source = await readFile(join(mustFail, file), "utf8");
    const want = source
      .split("\n")
      .flatMap((line, i) => [...line.matchAll(/\/\/ error (TS\d+)/g)].map((m) => `must-fail/${file}:${i + 1} ${m[1]}`));
    assert.ok(want.length > 0, `${file} marks no line with // error TSnnnn`);
    const got = r.errors.filter((e) => e.startsWith(`must-fail/${file}:`));
    assert.deepEqual(got.sort(), want.sort(), `got these errors, want the marked ones; tsc said:\n${r.out}`);
  });
}
