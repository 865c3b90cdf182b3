// Builds dist/: app-[hash].js and app-[hash].css (bundled by esbuild, the client
// package's TypeScript included from ../client/src) and an index.html that
// references them. The BFF serves dist/ (static_dir): hashed files are cached
// for a year, index.html is revalidated, so a new build is seen on the next load.
import * as esbuild from "esbuild";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { finish, outDir, outputs, settings } from "./buildkit.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const out = outDir(here);

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
  define: settings(),
});

finish(out, outputs(result), (js, css) => `<!doctype html>
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
`, join(here, "src/favicon.svg"));
