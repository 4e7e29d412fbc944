/**
 * The audit log (functions/operations/audit/): each audited route leaves one row
 * naming the caller and the target; secrets (token secrets, invitation codes,
 * environment values, clone tokens) never reach it; GET /api/orgs/{orgId}/audit
 * pages newest first, filters, shows one organization's rows only, and is for
 * owners and admins.
 */
import { z } from "@hono/zod-openapi";
import { eq } from "drizzle-orm";
import { describe, expect, inject, it } from "vitest";
import { AuditEntrySchema } from "../../../functions/operations/audit/route";
import { GitSourceSchema } from "../../../functions/projects/schema";
import { apiTokens, auditLog } from "../../../shared/db/schema";
import { newId } from "../../../shared/ids";
import { deploymentHelpers } from "../../support/deployments";
import { gitServerControl } from "../../support/git-control";
import { delivery, hostsAt, post, seedPushHook } from "../../support/git-hooks";
import { expectBody, expectProblem, expectStatus, type Member, seedMember, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { currentRuntime, useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness({ env: hostsAt(inject("gitServerUrl")) });
const { create, call } = projectHelpers(h);
const { queue, act, seedQueued, runToReady } = deploymentHelpers(h);
const control = gitServerControl(inject("gitServerUrl"));
const AuditPage = z.object({ items: z.array(AuditEntrySchema), nextCursor: z.string().nullable() });

const audit = (t: Member, query = "", orgId = t.orgId) => h.request(`/api/orgs/${orgId}/audit${query}`, { token: t.token });
const entries = async (t: Member, query = "") => (await expectBody(await audit(t, query), 200, AuditPage)).items;

/** The owner's own token id (seedTenant mints one token per user). */
async function tokenIdOf(t: Member) {
  const [row] = await h.db.select({ id: apiTokens.id }).from(apiTokens).where(eq(apiTokens.userId, t.userId));
  return row!.id;
}

describe("audit log", () => {
  it("each audited change leaves one row with its actor and target, and no secret", async () => {
    const t = await seedTenant(h);
    const ownerTokenId = await tokenIdOf(t);
    const canary = newId("canary");
    const secrets: string[] = [];

    const minted = await expectStatus(await h.request("/api/tokens", { token: t.token, org: t.orgId, json: { name: "ci" } }), 201);
    secrets.push(minted.token);
    await expectStatus(await h.request(`/api/tokens/${minted.id}`, { method: "DELETE", token: t.token, org: t.orgId }), 204);

    const invitation = await expectStatus(
      await h.request(`/api/orgs/${t.orgId}/invitations`, { token: t.token, json: { email: `${newId("i")}@example.test`, role: "member" } }),
      201,
    );
    secrets.push(invitation.code);
    await expectStatus(await h.request(`/api/orgs/${t.orgId}/invitations/${invitation.id}`, { method: "DELETE", token: t.token }), 204);
    const m = await seedMember(h, t.orgId, "member");
    await expectStatus(await h.request(`/api/orgs/${t.orgId}/members/${m.userId}`, { method: "PATCH", token: t.token, json: { role: "viewer" } }), 200);
    await expectStatus(await h.request(`/api/orgs/${t.orgId}/members/${m.userId}`, { method: "DELETE", token: t.token }), 204);

    await expectStatus(await h.request("/api/settings/build-mode", { method: "PATCH", token: t.token, json: { buildMode: "local" } }), 200);
    await expectStatus(
      await h.request("/api/settings/clone-credentials", { method: "PATCH", token: t.token, json: { token: `${canary}-settings`, asDefault: true } }),
      200,
    );

    const p = await create(t);
    await expectStatus(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: `${canary}-clone` } }), 200);
    await expectStatus(
      await call(t, `/${p.id}/env`, {
        method: "PATCH",
        json: {
          upserts: [
            { key: "API_KEY", value: `${canary}-env`, isSecret: true },
            { key: "MODE", value: `${canary}-plain` },
          ],
        },
      }),
      200,
    );
    await expectStatus(await call(t, `/${p.id}/connect`, { method: "POST", json: { domain: `${p.slug}.audit.example.com` } }), 200);
    await expectStatus(await call(t, `/${p.id}/domains/${p.slug}.audit.example.com`, { method: "DELETE" }), 204);
    const channel = await expectStatus(await h.request("/api/notifications/channels", { token: t.token, json: { kind: "in_app", label: "bell" } }), 201);
    await expectStatus(await h.request(`/api/notifications/channels/${channel.id}`, { method: "DELETE", token: t.token }), 204);

    // Deployments: one queued from git and canceled, one promoted back to.
    const repo = await control.createRepo();
    await expectBody(
      await call(t, `/${p.id}/git/link`, { method: "POST", json: { provider: "gitea", owner: repo.owner, repo: repo.repo } }),
      200,
      GitSourceSchema,
    );
    const queued = await expectStatus(await queue(t, { projectId: p.id }), 201);
    await expectStatus(await act(t, queued.id, "cancel"), 200);
    const first = await seedQueued(p);
    await runToReady(first.id);
    await runToReady((await seedQueued(p)).id);
    await expectStatus(await act(t, first.id, "promote"), 200);

    const other = await create(t);
    await expectStatus(await call(t, `/${other.id}`, { method: "DELETE" }), 200);

    const items = await entries(t, "?limit=100");
    const expected: Array<[string, string, string | null]> = [
      ["token.created", "token", minted.id],
      ["token.revoked", "token", minted.id],
      ["member.invited", "invitation", invitation.id],
      ["invitation.revoked", "invitation", invitation.id],
      ["member.role_changed", "member", m.userId],
      ["member.removed", "member", m.userId],
      ["settings.changed", "settings", t.userId],
      ["clone_token.changed", "settings", t.userId],
      ["project.created", "project", p.id],
      ["clone_token.changed", "project", p.id],
      ["env.changed", "project", p.id],
      ["domain.added", "project", p.id],
      ["domain.removed", "project", p.id],
      ["channel.created", "channel", channel.id],
      ["channel.deleted", "channel", channel.id],
      ["deployment.created", "deployment", queued.id],
      ["deployment.canceled", "deployment", queued.id],
      ["deployment.promoted", "deployment", first.id],
      ["project.created", "project", other.id],
      ["project.deleted", "project", other.id],
    ];
    // Newest first: the reverse of the order the changes were made in.
    expect(items.map((e) => [e.action, e.target.kind, e.target.id]).reverse()).toEqual(expected);
    for (const e of items) {
      expect(e.actor).toEqual({ kind: "token", userId: t.userId, tokenId: ownerTokenId });
    }
    const env = items.find((e) => e.action === "env.changed")!;
    expect(env.details).toMatchObject({ environment: "production", set: ["API_KEY", "MODE"], setCount: 2 });
    expect(items.find((e) => e.action === "member.role_changed")!.details).toEqual({ role: "viewer" });

    // No secret anywhere in the organization's rows (nor in the answer).
    const stored = JSON.stringify(await h.db.select().from(auditLog).where(eq(auditLog.orgId, t.orgId)));
    for (const text of [stored, JSON.stringify(items)]) {
      expect(text).not.toContain(canary);
      for (const secret of secrets) expect(text).not.toContain(secret);
    }
  });

  it.runIf(currentRuntime() !== "worker")("route rules are audited (self-hosted)", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const rule = await expectStatus(
      await h.request(`/api/projects/${p.id}/route-rules`, { token: t.token, json: { kind: "ban", cidr: "203.0.113.0/24" } }),
      201,
    );
    await expectStatus(await h.request(`/api/projects/${p.id}/route-rules/${rule.id}`, { method: "PATCH", token: t.token, json: { enabled: false } }), 200);
    await expectStatus(await h.request(`/api/projects/${p.id}/route-rules/${rule.id}`, { method: "DELETE", token: t.token }), 204);
    const items = await entries(t, "?action=route_rules.changed");
    expect(items.map((e) => e.details?.change)).toEqual(["removed", "updated", "added"]);
    expect(new Set(items.map((e) => e.target.id))).toEqual(new Set([rule.id]));
  });

  it("pages newest first with a cursor and filters by action, target and actor", async () => {
    const t = await seedTenant(h);
    const admin = await seedMember(h, t.orgId, "admin");
    const a = await create(t);
    const b = await create(t);
    const c = await create(admin);
    const page1 = await expectBody(await audit(t, "?limit=2"), 200, AuditPage);
    expect(page1.items.map((e) => e.target.id)).toEqual([c.id, b.id]);
    const page2 = await expectBody(await audit(t, `?limit=2&cursor=${page1.nextCursor}`), 200, AuditPage);
    expect(page2.items.map((e) => e.target.id)).toEqual([a.id]);
    expect(page2.nextCursor).toBeNull();

    expect((await entries(t, `?targetId=${b.id}`)).map((e) => e.target.id)).toEqual([b.id]);
    expect((await entries(t, `?actor=${admin.userId}`)).map((e) => e.target.id)).toEqual([c.id]);
    expect((await entries(t, "?targetKind=project&action=project.created")).length).toBe(3);
    expect(await entries(t, "?action=project.deleted")).toEqual([]);
    await expectProblem(await audit(t, "?action=project.exploded"), 400, "action");
  });

  it("a push that queues a deployment is recorded as the system's", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo();
    const { hookId, secret } = await seedPushHook(h, t, p, { owner: repo.owner, repo: repo.repo, provider: "gitea" });
    const d = await delivery("gitea", secret, { kind: "push", ref: "refs/heads/main", commit: repo.branches.main! });
    const answer = await expectStatus(await post(h, hookId, d), 202);
    expect(answer.outcome).toBe("deploy_queued");
    const [row] = await entries(t, "?action=deployment.created");
    expect(row).toMatchObject({
      actor: { kind: "system", userId: null, tokenId: null },
      target: { kind: "deployment", id: answer.deploymentId },
      clientAddress: null,
      details: { projectId: p.id, trigger: "push" },
    });
    // A redelivery queues nothing and records nothing.
    await expectStatus(await post(h, hookId, d), 202);
    expect(await entries(t, "?action=deployment.created")).toHaveLength(1);
  });

  it("build servers: registered, updated and deleted, each one row (never the runner token)", async () => {
    const t = await seedTenant(h);
    const res = await h.request("/api/servers", { method: "POST", token: t.token, json: { name: "builder", labels: ["gpu"] } });
    expect(res.status).toBe(201);
    const created = (await res.json()) as { id: string; token: string };
    await expectStatus(await h.request(`/api/servers/${created.id}`, { method: "PATCH", token: t.token, json: { name: "builder-2" } }), 200);
    await expectStatus(await h.request(`/api/servers/${created.id}`, { method: "DELETE", token: t.token }), 200);
    const rows = await entries(t, "?targetKind=server");
    expect(rows.map((r) => [r.action, r.target])).toEqual([
      ["server.deleted", { kind: "server", id: created.id }],
      ["server.updated", { kind: "server", id: created.id }],
      ["server.registered", { kind: "server", id: created.id }],
    ]);
    expect(rows[1]!.details).toEqual({ fields: ["name"] });
    expect(JSON.stringify(rows)).not.toContain(created.token);
  });

  it("a refused change leaves no row (the row and the change are one transaction)", async () => {
    const t = await seedTenant(h);
    await expectProblem(await h.request(`/api/orgs/${t.orgId}/members/${t.userId}`, { method: "DELETE", token: t.token }), 409);
    await expectProblem(await h.request(`/api/orgs/${t.orgId}/members/${t.userId}`, { method: "PATCH", token: t.token, json: { role: "admin" } }), 409);
    await expectProblem(await h.request("/api/tokens/tok_unknown", { method: "DELETE", token: t.token, org: t.orgId }), 404);
    await expectProblem(await h.request("/api/notifications/channels/nch_unknown", { method: "DELETE", token: t.token }), 404);
    expect(await entries(t)).toEqual([]);
  });

  it("another organization's rows are invisible; a member or viewer cannot read the log", async () => {
    const t = await seedTenant(h);
    const stranger = await seedTenant(h);
    await create(t);
    expect(await entries(stranger)).toEqual([]);
    await expectProblem(await audit(stranger, "", t.orgId), 403);
    for (const role of ["member", "viewer"] as const) {
      const m = await seedMember(h, t.orgId, role);
      await expectProblem(await audit(m), 403);
    }
    const admin = await seedMember(h, t.orgId, "admin");
    expect((await entries(admin)).length).toBe(1);
  });
});
