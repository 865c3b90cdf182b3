// Builds dist/ for the BFF's static_dir, as web/app/build.mjs does: app-[hash].js and
// app-[hash].css (React, the client's TypeScript from ../client/src, and the message table,
// formatters and stylesheet of ../app/src), favicon.svg, and an index.html that references them.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
// `node build.mjs [outdir]`: dist/ by default; the browser tests build into their own directory.
const out = process.argv[2] ? resolve(process.argv[2]) : join(here, "dist");
// Rebuild in place (a running BFF holds static_dir open); only this script's outputs go.
mkdirSync(out, { recursive: true });
for (const f of readdirSync(out)) {
  if (f === "index.html" || f === "favicon.svg" || /^app-[A-Za-z0-9]+\.(js|css)$/.test(f)) rmSync(join(out, f), { force: true });
}

// Build-time settings, as web/app's: unset, the client's defaults (20 s, 3 s).
function msSetting(name) {
  const v = process.env[name];
  if (v === undefined || v === "") return "null";
  if (!/^\d+$/.test(v)) throw new Error(`build: ${name}=${v} is not a number of milliseconds`);
  return v;
}

const result = await esbuild.build({
  entryPoints: { app: join(here, "src/main.tsx") },
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  jsx: "automatic",
  entryNames: "[name]-[hash]",
  outdir: out,
  metafile: true,
  logLevel: "warning",
  define: {
    "process.env.NODE_ENV": '"production"',
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
writeFileSync(join(out, "index.html"), `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>BFF example app (React)</title>
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/${css}">
<script type="module" src="/${js}"></script>
</head>
<body>
<div id="root"><main><p>Loading…</p></main></div>
</body>
</html>
`);
copyFileSync(join(here, "../app/src/favicon.svg"), join(out, "favicon.svg"));
console.log(`${join(out, "index.html")} -> /${js}, /${css}`);
