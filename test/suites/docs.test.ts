/**
 * The API reference page: its script comes from the API itself (pinned package,
 * works offline), nothing loads from another origin, and a Content-Security-Policy
 * allows only this origin plus the page's own inline script.
 */
import { describe, expect, it } from "vitest";
import { useRuntimeHarness } from "../support/runtime";

async function sha256Base64(text: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return btoa(String.fromCharCode(...digest));
}

/** `<script …>body</script>` elements of the page: their attributes and bodies. */
function scripts(html: string): Array<{ attrs: string; body: string }> {
  return [...html.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)].map((m) => ({ attrs: m[1]!, body: m[2]! }));
}

function directive(csp: string, name: string): string[] {
  const found = csp
    .split(";")
    .map((d) => d.trim().split(/\s+/))
    .find((parts) => parts[0] === name);
  return found ? found.slice(1) : [];
}

const h = useRuntimeHarness();
describe("API reference page", () => {
  it("serves the page with a strict CSP and no external origin", async () => {
    const res = await h.request("/api/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(directive(csp, "default-src")).toEqual(["'none'"]);
    expect(directive(csp, "connect-src")).toEqual(["'self'"]);
    expect(csp).not.toMatch(/https?:|\*/);
    const html = await res.text();
    expect(html).not.toContain("https://");
    expect(html).not.toContain("//cdn");

    const all = scripts(html);
    const external = all.filter((s) => /\ssrc=/.test(s.attrs));
    expect(external).toHaveLength(1);
    expect(external[0]!.attrs).toMatch(/\ssrc="\/api\/docs\/assets\/standalone\.js\?v=[0-9a-f]{16}"/);
    // Every inline script is allowed by its hash, and nothing else is.
    const inline = all.filter((s) => !/\ssrc=/.test(s.attrs));
    expect(inline.length).toBeGreaterThan(0);
    const hashes = await Promise.all(inline.map(async (s) => `'sha256-${await sha256Base64(s.body)}'`));
    expect(directive(csp, "script-src").sort()).toEqual(["'self'", ...hashes].sort());
  });

  it("serves the pinned script from the API, cacheable, with revalidation", async () => {
    const page = await (await h.request("/api/docs")).text();
    const src = /\ssrc="([^"]+)"/.exec(page)![1]!;
    const res = await h.request(src);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/javascript/);
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    const body = await res.text();
    expect(body.length).toBeGreaterThan(1_000_000);
    expect(body).toContain("createApiReference");
    const etag = res.headers.get("etag")!;
    expect(etag).toMatch(/^"[0-9a-f]{16}"$/);

    const again = await h.request(src, { headers: { "if-none-match": etag } });
    expect(again.status).toBe(304);
    // Without the page's version the URL is not immutable.
    const bare = await h.request("/api/docs/assets/standalone.js");
    expect(bare.status).toBe(200);
    expect(bare.headers.get("cache-control")).toBe("public, max-age=0, must-revalidate");
    await bare.arrayBuffer();
  });
});
