/** Folder upload (functions/projects/folder/session.ts): POST /api/projects/folder/session, its target and the per-organization caps. */
import { and, eq, gt } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { uploadSessions } from "../../../shared/db/schema";
import { MAX_UPLOAD_BYTES, ORG_SESSION_CAPS } from "../../../shared/storage/limits";
import { folderClient } from "../../support/folder-client";
import { expectProblem, expectStatus, seedMember, seedTenant, type Member } from "../../support/harness";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const c = folderClient(h);

describe("folder upload: session", () => {
  it("opens a session without a body, with an empty body and with a hint (presigned targets need the size)", async () => {
    const t = await seedTenant(h);
    const hinted = await c.openSession(t, { name: "my-app", sizeBytes: 1234 });
    const targets = [hinted];
    if (c.presigned()) {
      await expectProblem(await h.request("/api/projects/folder/session", { method: "POST", token: t.token }), 400, "sizeBytes");
      await expectProblem(await h.request("/api/projects/folder/session", { token: t.token, json: {} }), 400, "sizeBytes");
    } else {
      targets.push(await c.openSession(t), await c.openSession(t, {}));
    }
    for (const target of targets) {
      expect(target.sessionId).toMatch(/^ups_/);
      expect(target.headers["Content-Type"]).toBe("application/gzip");
      expect(target.maxBytes).toBe(MAX_UPLOAD_BYTES);
      expect(new Date(target.expiresAt).getTime()).toBeGreaterThan(Date.now() + 50 * 60_000);
      expect(new URL(target.url, target.absoluteUrl).toString()).toBe(target.absoluteUrl);
      if (target.requiresAuth) {
        // The relay: a path under the API base, the same bearer token.
        expect(target.method).toBe("POST");
        expect(target.url).toBe(`/api/projects/folder/upload/${target.sessionId}`);
        expect(target.absoluteUrl.endsWith(target.url)).toBe(true);
      } else {
        // Presigned object storage: an absolute URL carrying its own credential, under the organization's prefix.
        expect(target.method).toBe("PUT");
        expect(target.url).toBe(target.absoluteUrl);
        const url = new URL(target.absoluteUrl);
        expect(url.pathname).toContain(`/${t.orgId}/${target.sessionId}.tar.gz`);
        expect(url.searchParams.get("X-Amz-Signature")).toMatch(/^[0-9a-f]{64}$/);
        expect(Number(url.searchParams.get("X-Amz-Expires"))).toBeLessThanOrEqual(15 * 60);
        expect(url.searchParams.get("X-Amz-SignedHeaders")!.split(";")).toEqual(expect.arrayContaining(["content-type", "content-length"]));
      }
    }
    expect(hinted.requiresAuth || hinted.headers["Content-Length"] === "1234").toBe(true);
    const row = await c.sessionRow(hinted.sessionId);
    expect(row).toMatchObject({ orgId: t.orgId, createdBy: t.userId, hintName: "my-app", hintSizeBytes: 1234, uploadedAt: null, scan: null });
  });

  it("refuses an invalid hint, naming the field", async () => {
    const t = await seedTenant(h);
    const post = (json: unknown) => h.request("/api/projects/folder/session", { token: t.token, json });
    await expectProblem(await post({ sizeBytes: MAX_UPLOAD_BYTES + 1 }), 400, "sizeBytes");
    await expectProblem(await post({ sizeBytes: 0 }), 400, "sizeBytes");
    await expectProblem(await post({ sizeBytes: "12" }), 400, "sizeBytes");
    await expectProblem(await post({ name: "" }), 400, "name");
    await expectProblem(await post({ bucket: "other" }), 400, "bucket");
    await expectProblem(await post([1]), 400);
    const raw = await h.request("/api/projects/folder/session", { token: t.token, method: "POST", body: "name=x", headers: { "content-type": "text/plain" } });
    await expectProblem(raw, 400);
  });

  it("presigned: a session without sizeBytes is a 400 naming it, and nothing is opened", async (ctx) => {
    if (!c.presigned()) ctx.skip();
    const t = await seedTenant(h);
    for (const hint of [undefined, {}, { name: "no-size" }]) {
      const res = await h.request("/api/projects/folder/session", { token: t.token, ...(hint ? { json: hint } : { method: "POST" }) });
      const p = await expectProblem(res, 400, "sizeBytes");
      expect(p.detail).toMatch(/sizeBytes is required/);
    }
    expect(await h.db.select().from(uploadSessions).where(eq(uploadSessions.orgId, t.orgId))).toHaveLength(0);
  });

  it("needs project:write", async () => {
    const t = await seedTenant(h);
    const viewer = await seedMember(h, t.orgId, "viewer");
    await expectProblem(await h.request("/api/projects/folder/session", { method: "POST", token: viewer.token }), 403);
    await expectProblem(await h.request("/api/projects/folder/session", { method: "POST" }), 401);
  });
});

describe("folder upload: per-organization caps", () => {
  const MIB = 1024 * 1024;
  const open = (t: Member, sizeBytes: number) => h.request("/api/projects/folder/session", { token: t.token, json: { sizeBytes } });

  async function expectCapped(res: Response, detail: RegExp) {
    const retryAfter = res.headers.get("retry-after");
    const p = await expectProblem(res, 429);
    expect(p).toMatchObject({ type: "urn:workspace:problem:too-many-requests", title: "Too Many Requests", status: 429 });
    expect(p.detail).toMatch(detail);
    expect(retryAfter).toMatch(/^\d+$/);
    return Number(retryAfter);
  }

  it(`caps bytes at ${ORG_SESSION_CAPS.maxBytes / 1024 / MIB} GiB and sessions at ${ORG_SESSION_CAPS.maxOpen} per organization: 429 with Retry-After; other organizations unaffected`, async () => {
    expect(ORG_SESSION_CAPS).toEqual({ maxOpen: 20, maxBytes: 2048 * MIB });
    const t = await seedTenant(h);
    const big: string[] = [];
    for (let i = 0; i < 6; i++) big.push((await expectStatus(await open(t, 300 * MIB), 201)).sessionId);
    // 1800 MiB open: another 300 MiB would pass 2 GiB; 248 MiB reaches it exactly.
    const retryAfter = await expectCapped(await open(t, 300 * MIB), /more than 2 GiB/);
    expect(retryAfter).toBeGreaterThan(3500);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    await expectStatus(await open(t, 248 * MIB), 201);
    await expectCapped(await open(t, 1), /more than 2 GiB/);

    // Another organization is not held up by this one's sessions.
    const other = await seedTenant(h);
    await expectStatus(await open(other, 300 * MIB), 201);

    // An expired session no longer counts; an uploaded size replaces the hint.
    await h.db
      .update(uploadSessions)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(uploadSessions.id, big[0]!));
    await h.db.update(uploadSessions).set({ sizeBytes: 1000 }).where(eq(uploadSessions.id, big[1]!));
    // Open: 5 × 300 MiB hinted (one of them uploaded: 1000 bytes) and 248 MiB, so 6 sessions of about 1448 MiB: 300 MiB fits again.
    await expectStatus(await open(t, 300 * MIB), 201);
    for (let i = 0; i < 13; i++) await expectStatus(await open(t, 1), 201);
    // 20 open: the next is refused whatever its size, Retry-After counting to the soonest expiry.
    await h.db
      .update(uploadSessions)
      .set({ expiresAt: new Date(Date.now() + 90_000) })
      .where(eq(uploadSessions.id, big[2]!));
    const wait = await expectCapped(await open(t, 1), new RegExp(`already has ${ORG_SESSION_CAPS.maxOpen} open upload sessions`));
    expect(wait).toBeGreaterThanOrEqual(85);
    expect(wait).toBeLessThanOrEqual(90);
    const rows = await h.db
      .select()
      .from(uploadSessions)
      .where(and(eq(uploadSessions.orgId, t.orgId), gt(uploadSessions.expiresAt, new Date())));
    expect(rows).toHaveLength(ORG_SESSION_CAPS.maxOpen);
    await expectStatus(await open(other, 1), 201);
  });

  it.runIf(h.realConcurrency)(
    "concurrent openings cannot pass the session cap (the organization row is locked)",
    async () => {
      const t = await seedTenant(h);
      const other = await seedTenant(h);
      const results = await Promise.all([
        ...Array.from({ length: ORG_SESSION_CAPS.maxOpen + 10 }, () => open(t, 1)),
        ...Array.from({ length: 3 }, () => open(other, 1)),
      ]);
      const statuses = await Promise.all(
        results.map(async (r) => {
          await r.text();
          return r.status;
        }),
      );
      expect(statuses.slice(0, -3).filter((s) => s === 201)).toHaveLength(ORG_SESSION_CAPS.maxOpen);
      expect(statuses.slice(0, -3).filter((s) => s === 429)).toHaveLength(10);
      expect(statuses.slice(-3)).toEqual([201, 201, 201]);
      expect(await h.db.select().from(uploadSessions).where(eq(uploadSessions.orgId, t.orgId))).toHaveLength(ORG_SESSION_CAPS.maxOpen);
    },
    60_000,
  );
});
