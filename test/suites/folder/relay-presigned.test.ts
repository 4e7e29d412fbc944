/** Folder upload targets: the relay route (self-hosted) and presigned object storage (cloud). */

import { describe, expect, it } from "vitest";
import { ScanResultSchema } from "../../../functions/projects/folder/schema";
import { folderClient, NEXT_APP, problemWithoutId } from "../../support/folder-client";
import { expectBody, expectProblem, expectStatus, seedTenant } from "../../support/harness";
import { tgz } from "../../support/tar-fixtures";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const c = folderClient(h);

describe("folder upload: the relay (self-hosted) and presigned targets (cloud)", () => {
  it("relay: needs the bearer token and application/gzip", async (ctx) => {
    const t = await seedTenant(h);
    const target = await c.openSession(t);
    if (!target.requiresAuth) ctx.skip();
    const bytes = await tgz(NEXT_APP);
    await expectProblem(await h.request(target.url, { method: "POST", headers: target.headers, body: bytes as Uint8Array<ArrayBuffer> }), 401);
    await expectProblem(await c.sendUpload(t, target, bytes, { "Content-Type": "application/octet-stream" }), 415);
    await expectProblem(await c.sendUpload(t, target, bytes, { "Content-Type": "application/json" }), 415);
    await expectProblem(await c.sendUpload(t, target, new Uint8Array(0)), 400);
    expect(await c.store().open(`${t.orgId}/${target.sessionId}.tar.gz`)).toBeNull();
    const res = await c.sendUpload(t, target, bytes);
    expect(await expectStatus(res, 200)).toMatchObject({ sessionId: target.sessionId, sizeBytes: bytes.length });
    expect((await c.sessionRow(target.sessionId))?.sizeBytes).toBe(bytes.length);
  });

  it("cloud: the relay route does not exist (the unknown-route 404)", async (ctx) => {
    const t = await seedTenant(h);
    const target = await c.openSession(t);
    if (target.requiresAuth) ctx.skip();
    const path = `/api/projects/folder/upload/${target.sessionId}`;
    const res = await h.request(path, { method: "POST", token: t.token, headers: { "content-type": "application/gzip" }, body: new Uint8Array([1]) });
    expect(await problemWithoutId(res, 404)).toEqual({
      type: "urn:workspace:problem:not-found",
      title: "Not Found",
      status: 404,
      detail: `No route for POST ${path}`,
    });
    const doc = await expectStatus(await h.request("/api/openapi.json"), 200);
    expect(Object.keys(doc.paths)).not.toContain("/api/projects/folder/upload/{sessionId}");
  });

  it("presigned: plain fetch without the token works; tampered, expired, mistyped and missized uploads are refused", async (ctx) => {
    const t = await seedTenant(h);
    const bytes = await tgz(NEXT_APP);
    const target = await c.openSession(t, { sizeBytes: bytes.length });
    if (target.requiresAuth) ctx.skip();
    expect(target.headers["Content-Length"]).toBe(String(bytes.length));
    const put = (url: string, body: Uint8Array, headers: Record<string, string> = { "Content-Type": "application/gzip" }) =>
      fetch(url, { method: "PUT", headers, body: body as Uint8Array<ArrayBuffer> });

    const url = new URL(target.absoluteUrl);
    const signature = url.searchParams.get("X-Amz-Signature")!;
    const tamperedSignature = new URL(url);
    tamperedSignature.searchParams.set("X-Amz-Signature", (signature[0] === "a" ? "b" : "a") + signature.slice(1));
    const otherOrg = await seedTenant(h);
    const tamperedKey = target.absoluteUrl.replace(t.orgId, otherOrg.orgId);
    const longerExpiry = new URL(url);
    longerExpiry.searchParams.set("X-Amz-Expires", "604800");
    for (const bad of [tamperedSignature.toString(), tamperedKey, longerExpiry.toString()]) {
      const res = await put(bad, bytes);
      expect(res.status, await res.text()).toBe(403);
    }
    // The signed content type and size.
    expect((await put(target.absoluteUrl, bytes, { "Content-Type": "application/octet-stream" })).status).toBe(403);
    expect((await put(target.absoluteUrl, bytes.subarray(1))).status).toBe(403);
    expect(await c.store().open(`${t.orgId}/${target.sessionId}.tar.gz`)).toBeNull();

    // Expired: the same signer, 20 minutes ago.
    const store = c.store();
    if (store.kind !== "presigned") throw new Error("expected presigned storage");
    const stale = await store.presign({
      key: `${t.orgId}/${target.sessionId}.tar.gz`,
      sizeBytes: bytes.length,
      now: new Date(Date.now() - 20 * 60_000),
      expiresInSeconds: 15 * 60,
    });
    const expired = await put(stale.absoluteUrl, bytes);
    expect(expired.status).toBe(403);
    expect(await expired.text()).toMatch(/expired/i);

    // As the spec says: the URL as is, its headers, and no Authorization header.
    const ok = await fetch(target.absoluteUrl, { method: target.method, headers: target.headers, body: bytes as Uint8Array<ArrayBuffer> });
    expect(ok.status, await ok.text()).toBe(200);
    expect(await expectBody(await c.scan(t, target.sessionId), 200, ScanResultSchema)).toMatchObject({ framework: "nextjs", sizeBytes: bytes.length });
  });
});
