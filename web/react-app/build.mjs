// Builds dist/ for the BFF's static_dir, as web/app/build.mjs does (and with its helpers,
// ../app/buildkit.mjs): app-[hash].js and app-[hash].css (React, the client's TypeScript from
// ../client/src, and the message table, formatters and stylesheet of ../app/src), favicon.svg,
// and an index.html that references them.
import * as esbuild from "esbuild";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { finish, outDir, outputs, settings } from "../app/buildkit.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const out = outDir(here);

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
  define: { "process.env.NODE_ENV": '"production"', ...settings() },
});

finish(out, outputs(result), (js, css) => `<!doctype html>
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
`, join(here, "../app/src/favicon.svg"));
