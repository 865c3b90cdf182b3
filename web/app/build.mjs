// Builds dist/: app-[hash].js and app-[hash].css (bundled by esbuild, the client
// package's TypeScript included from ../client/src) and an index.html that
// references them. The BFF serves dist/ (static_dir): hashed files are cached
// for a year, index.html is revalidated, so a new build is seen on the next load.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
// `node build.mjs [outdir]`: dist/ by default; the browser tests build into
// their own temporary directory.
const out = process.argv[2] ? resolve(process.argv[2]) : join(here, "dist");
// Remove the last build's files but keep the directory itself: a running BFF
// holds it open (static_dir), so removing and recreating it would leave the
// BFF serving a deleted directory until restarted. Rebuilding in place is
// picked up at once. Only this script's own outputs go, whatever the
// directory given.
mkdirSync(out, { recursive: true });
for (const f of readdirSync(out)) {
  if (f === "index.html" || f === "favicon.svg" || /^app-[A-Za-z0-9]+\.(js|css)$/.test(f)) rmSync(join(out, f), { force: true });
}

// Build-time settings, for a deployment or a test: the client's bound on one call's total
// time and when it says "still trying" (unset: the client's defaults, 20 s and 3 s).
function msSetting(name) {
  const v = process.env[name];
  if (v === undefined || v === "") return "null";
  if (!/^\d+$/.test(v)) throw new Error(`build: ${name}=${v} is not a number of milliseconds`);
  return v;
}

const result = await esbuild.build({
  entryPoints: { app: join(here, "src/main.ts") },
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  sourcemap: false,
  entryNames: "[name]-[hash]",
  outdir: out,
  metafile: true,
  logLevel: "warning",
  define: {
    __APP_TOTAL_TIMEOUT_MS__: msSetting("APP_TOTAL_TIMEOUT_MS"),
    __APP_SLOW_AFTER_MS__: msSetting("APP_SLOW_AFTER_MS"),
  },
});

let js = "";
let css = "";
for (const [file, meta] of Object.entries(result.metafile.outputs)) {
  if (!meta.entryPoint && !file.endsWith(".css")) continue;
  if (file.endsWith(".js")) js = basename(file);
  if (file.endsWith(".css")) css = basename(file);
}
if (!js || !css) throw new Error(`build: expected one .js and one .css output, got ${Object.keys(result.metafile.outputs)}`);

// No inline script or style: the BFF's Content-Security-Policy allows neither.
const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>BFF example app</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/${css}">
<script type="module" src="/${js}"></script>
</head>
<body>
<header class="top">
<strong class="brand"><img src="/favicon.svg" alt="">Example bank app</strong>
<nav id="nav" aria-label="Main"></nav>
<span id="who"></span>
</header>
<div id="still-trying" role="status" hidden></div>
<main id="main"><p>Loading…</p></main>
</body>
</html>
`;
writeFileSync(join(out, "index.html"), html);
copyFileSync(join(here, "src/favicon.svg"), join(out, "favicon.svg"));
console.log(`${join(out, "index.html")} -> /${js}, /${css}`);
