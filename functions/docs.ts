/**
 * `GET /api/docs`: the API reference page (Scalar), served with its script from the
 * API itself so it works offline and loads nothing from a third-party origin.
 * The script is `@scalar/api-reference`'s standalone bundle, pinned in package.json:
 * read from node_modules on Node; on the Worker it is one of the static assets
 * (console/api/docs/assets/standalone.js links to the same file, wrangler.toml `[assets]`),
 * read through the ASSETS binding, so its 4.4 MB are not part of the Worker's code.
 */
import { Scalar } from "@scalar/hono-api-reference";
import type { Context, Hono } from "hono";
import type { AppEnv } from "../shared/http/context";

export const DOCS_PATH = "/api/docs";
export const DOCS_ASSET_PATH = "/api/docs/assets/standalone.js";

interface Asset {
  text: string;
  /** The first 16 hex digits of the script's SHA-256: the cache-busting `?v=` and the ETag. */
  version: string;
}

interface Page {
  html: string;
  csp: string;
}

async function sha256(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
}

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
const base64 = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes));

/** The Worker's static assets (wrangler.toml `[assets] binding`). */
interface AssetsBinding {
  fetch(request: Request): Promise<Response>;
}

async function readStandalone(c: Context): Promise<string> {
  if (globalThis.navigator?.userAgent === "Cloudflare-Workers") {
    const assets = (c.env as { ASSETS?: AssetsBinding } | undefined)?.ASSETS;
    if (!assets) throw new Error("Worker misconfigured: no ASSETS binding (wrangler.toml [assets]) to read the API reference's script from");
    // The asset at the route's own path: under /api/, so only this route serves it to clients.
    const res = await assets.fetch(new Request(new URL(DOCS_ASSET_PATH, c.req.url)));
    if (!res.ok) {
      await res.body?.cancel();
      throw new Error(`the API reference's script is not among the Worker's assets (HTTP ${res.status})`);
    }
    return res.text();
  }
  // The package's exports map hides dist/browser: resolve its entry and step over.
  const { createRequire } = await import("node:module");
  const { readFile } = await import("node:fs/promises");
  const { dirname, join } = await import("node:path");
  const entry = createRequire(import.meta.url).resolve("@scalar/api-reference");
  return readFile(join(dirname(entry), "browser", "standalone.js"), "utf8");
}

/** The inline `<script>` bodies of our own rendered page (trusted text), for their CSP hashes. */
function inlineScripts(html: string): string[] {
  const bodies: string[] = [];
  let from = 0;
  for (;;) {
    const open = html.indexOf("<script", from);
    if (open < 0) return bodies;
    const tagEnd = html.indexOf(">", open);
    const close = html.indexOf("</script>", tagEnd);
    if (tagEnd < 0 || close < 0) return bodies;
    if (!/\ssrc=/.test(html.slice(open, tagEnd))) bodies.push(html.slice(tagEnd + 1, close));
    from = close + "</script>".length;
  }
}

async function renderPage(c: Context, asset: Asset): Promise<Page> {
  const render = Scalar({
    url: "/api/openapi.json",
    pageTitle: "Workspace Service API",
    // `cdn` is where the page loads the standalone bundle from: here, this API.
    cdn: `${DOCS_ASSET_PATH}?v=${asset.version}`,
    // Off: features that reach Scalar's hosted services (fonts, AI chat, MCP, share/deploy
    // toolbar); the CSP would block them anyway.
    withDefaultFonts: false,
    agent: { disabled: true },
    mcp: { disabled: true },
    showDeveloperTools: "never",
  });
  // The middleware always answers (it never calls `next`).
  const html = await ((await render(c, async () => {})) as Response).text();
  const hashes = await Promise.all(inlineScripts(html).map(async (body) => `'sha256-${base64(await sha256(body))}'`));
  const csp = [
    "default-src 'none'",
    `script-src 'self' ${hashes.join(" ")}`.trim(),
    // The bundle injects its own <style> elements at run time.
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
  return { html, csp };
}

/** Mounts the reference page and its script on `app`. */
export function mountDocs(app: Hono<AppEnv>): void {
  let asset: Promise<Asset> | undefined;
  let page: Promise<Page> | undefined;
  const loadAsset = (c: Context) => {
    asset ??= readStandalone(c).then(async (text) => ({ text, version: hex(await sha256(text)).slice(0, 16) }));
    return asset.catch((e) => {
      asset = undefined;
      throw e;
    });
  };

  app.get(DOCS_PATH, async (c) => {
    const current = await loadAsset(c);
    page ??= renderPage(c, current);
    const { html, csp } = await page.catch((e) => {
      page = undefined;
      throw e;
    });
    return c.body(html, 200, {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": csp,
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      "cache-control": "no-cache",
    });
  });

  app.get(DOCS_ASSET_PATH, async (c) => {
    const { text, version } = await loadAsset(c);
    const etag = `"${version}"`;
    // The page asks for `?v=<hash>`: that URL's content never changes. Any other URL revalidates.
    const cacheControl = c.req.query("v") === version ? "public, max-age=31536000, immutable" : "public, max-age=0, must-revalidate";
    const headers = {
      "content-type": "text/javascript; charset=utf-8",
      "x-content-type-options": "nosniff",
      "cross-origin-resource-policy": "same-origin",
      "cache-control": cacheControl,
      etag,
    };
    if (c.req.header("if-none-match") === etag) return c.body(null, 304, headers);
    return c.body(text, 200, headers);
  });
}
