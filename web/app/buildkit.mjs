// What the example apps' build scripts share (web/app/build.mjs and web/react-app/build.mjs):
// the output directory, rebuilt in place; the build-time settings; finding esbuild's hashed
// outputs; and writing index.html and the favicon. It imports nothing, so either package can
// use it whatever its node_modules hold.
import { copyFileSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";

// `node build.mjs [outdir]`: dist/ by default; the browser tests build into their own
// temporary directory. The last build's files go but the directory stays: a running BFF holds
// it open (static_dir), so removing and recreating it would leave the BFF serving a deleted
// directory until restarted, while rebuilding in place is picked up at once. Only a build's own
// outputs go, whatever the directory given.
export function outDir(here) {
  const out = process.argv[2] ? resolve(process.argv[2]) : join(here, "dist");
  mkdirSync(out, { recursive: true });
  for (const f of readdirSync(out)) {
    if (f === "index.html" || f === "favicon.svg" || /^app-[A-Za-z0-9]+\.(js|css)$/.test(f)) rmSync(join(out, f), { force: true });
  }
  return out;
}

// Build-time settings, for a deployment or a test: the client's bound on one call's total time
// and when it says "still trying" (unset: the client's defaults, 20 s and 3 s).
export function msSetting(name) {
  const v = process.env[name];
  if (v === undefined || v === "") return "null";
  if (!/^\d+$/.test(v)) throw new Error(`build: ${name}=${v} is not a number of milliseconds`);
  return v;
}

// The defines both apps are built with.
export function settings() {
  return {
    __APP_TOTAL_TIMEOUT_MS__: msSetting("APP_TOTAL_TIMEOUT_MS"),
    __APP_SLOW_AFTER_MS__: msSetting("APP_SLOW_AFTER_MS"),
  };
}

// The names of the one .js and one .css file esbuild wrote (metafile: true).
export function outputs(result) {
  let js = "";
  let css = "";
  for (const [file, meta] of Object.entries(result.metafile.outputs)) {
    if (!meta.entryPoint && !file.endsWith(".css")) continue;
    if (file.endsWith(".js")) js = basename(file);
    if (file.endsWith(".css")) css = basename(file);
  }
  if (!js || !css) throw new Error(`build: expected one .js and one .css output, got ${Object.keys(result.metafile.outputs)}`);
  return { js, css };
}

// Writes index.html (html, given the hashed names) and copies the favicon. No inline script or
// style: the BFF's Content-Security-Policy allows neither.
export function finish(out, { js, css }, html, favicon) {
  writeFileSync(join(out, "index.html"), html(js, css));
  copyFileSync(favicon, join(out, "favicon.svg"));
  console.log(`${join(out, "index.html")} -> /${js}, /${css}`);
}
