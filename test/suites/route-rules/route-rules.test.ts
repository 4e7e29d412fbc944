/**
 * Route rules (GET/POST /api/projects/:id/route-rules, PATCH/DELETE …/:ruleId):
 * each kind, validation naming the field, the per-project cap (also under
 * concurrent creates on real Postgres), PATCH within a kind, permissions, org
 * scoping. Self-hosted only: on the Worker every one of these routes is 404.
 */
import { describe, expect, it } from "vitest";
import { routeRules } from "../../../shared/db/schema";
import { MAX_RULES_PER_PROJECT, RouteRuleSchema } from "../../../functions/route-rules/schema";
import { z } from "@hono/zod-openapi";
import { eq } from "drizzle-orm";
import { expectBody, expectProblem, expectStatus, type Member, seedMember, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { currentRuntime, runtimeHasRealConcurrency, useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create } = projectHelpers(h);
const runtime = currentRuntime();
const RuleList = z.object({ items: z.array(RouteRuleSchema) });

const rules = (t: Member, projectId: string, init: { method?: string; json?: unknown } = {}, ruleId?: string) =>
  h.request(`/api/projects/${projectId}/route-rules${ruleId ? `/${ruleId}` : ""}`, { token: t.token, ...init });
const rowsOf = (projectId: string) => h.db.select().from(routeRules).where(eq(routeRules.projectId, projectId));

describe.runIf(runtime === "worker")("route rules on the cloud", () => {
  it("every route-rules route is an unknown route (404)", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(await rules(t, p.id), 404);
    await expectStatus(await rules(t, p.id, { method: "POST", json: { kind: "ban", cidr: "203.0.113.0/24" } }), 404);
    await expectStatus(await rules(t, p.id, { method: "PATCH", json: { enabled: false } }, "rr_x"), 404);
    await expectStatus(await rules(t, p.id, { method: "DELETE" }, "rr_x"), 404);
  });
});

describe.runIf(runtime !== "worker")("route rules (self-hosted)", () => {
  it("creates one rule of each kind, lists them in creation order, reads defaults", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const rate = await expectBody(await rules(t, p.id, { method: "POST", json: { kind: "rate-limit", limit: 10, windowSeconds: 60 } }), 201, RouteRuleSchema);
    expect(rate).toMatchObject({ kind: "rate-limit", limit: 10, windowSeconds: 60, by: "ip", path: null, enabled: true, projectId: p.id });
    const ban = await expectBody(
      await rules(t, p.id, {
        method: "POST",
        json: { kind: "ban", cidr: "2001:db8::/32", reason: "scraper", expiresAt: "2030-01-01T00:00:00Z", path: "/api" },
      }),
      201,
      RouteRuleSchema,
    );
    expect(ban).toMatchObject({ kind: "ban", cidr: "2001:db8::/32", reason: "scraper", expiresAt: "2030-01-01T00:00:00Z", path: "/api" });
    const allow = await expectBody(
      await rules(t, p.id, {
        method: "POST",
        json: { kind: "allow-deny", mode: "allow", cidrs: ["10.0.0.0/8", "192.0.2.7"], path: "/admin/**", enabled: false },
      }),
      201,
      RouteRuleSchema,
    );
    expect(allow).toMatchObject({ kind: "allow-deny", mode: "allow", cidrs: ["10.0.0.0/8", "192.0.2.7"], path: "/admin/**", enabled: false });
    const listed = await expectBody(await rules(t, p.id), 200, RuleList);
    expect(listed.items.map((r) => r.id)).toEqual([rate.id, ban.id, allow.id]);
  });

  it("refuses bad input with a 400 naming the field, and writes nothing", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const cases: Array<[unknown, string]> = [
      [{ kind: "teleport" }, "kind"],
      [{ kind: "rate-limit", limit: 0, windowSeconds: 60 }, "limit"],
      [{ kind: "rate-limit", limit: -5, windowSeconds: 60 }, "limit"],
      [{ kind: "rate-limit", limit: 1.5, windowSeconds: 60 }, "limit"],
      [{ kind: "rate-limit", limit: 5, windowSeconds: 0 }, "windowSeconds"],
      [{ kind: "rate-limit", limit: 5, windowSeconds: 60, by: "user" }, "by"],
      [{ kind: "ban", cidr: "10.0.0.1/8" }, "cidr"],
      [{ kind: "ban", cidr: "300.0.0.1" }, "cidr"],
      [{ kind: "ban", cidr: "2001:db8::/129" }, "cidr"],
      [{ kind: "ban", cidr: "10.0.0.0/8", expiresAt: "tomorrow" }, "expiresAt"],
      [{ kind: "allow-deny", mode: "maybe", cidrs: ["10.0.0.0/8"] }, "mode"],
      [{ kind: "allow-deny", mode: "deny", cidrs: [] }, "cidrs"],
      [{ kind: "allow-deny", mode: "deny", cidrs: ["10.0.0.0/8", "nope"] }, "cidrs.1"],
      [{ kind: "ban", cidr: "10.0.0.0/8", path: "api" }, "path"],
      [{ kind: "ban", cidr: "10.0.0.0/8", path: "/a b" }, "path"],
      [{ kind: "ban", cidr: "10.0.0.0/8", limit: 5 }, "limit"],
    ];
    for (const [json, field] of cases) {
      const problem = await expectProblem(await rules(t, p.id, { method: "POST", json }), 400);
      expect(problem.field, JSON.stringify(json)).toBe(field);
    }
    expect(await rowsOf(p.id)).toEqual([]);
  });

  it("PATCH changes fields of the rule's own kind; another kind's field is 400 naming it; null path applies everywhere", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const rule = await expectBody(
      await rules(t, p.id, { method: "POST", json: { kind: "rate-limit", limit: 10, windowSeconds: 60, path: "/api" } }),
      201,
      RouteRuleSchema,
    );
    const changed = await expectBody(await rules(t, p.id, { method: "PATCH", json: { limit: 20, enabled: false, path: null } }, rule.id), 200, RouteRuleSchema);
    expect(changed).toMatchObject({ limit: 20, windowSeconds: 60, enabled: false, path: null });
    const problem = await expectProblem(await rules(t, p.id, { method: "PATCH", json: { cidr: "10.0.0.0/8" } }, rule.id), 400);
    expect(problem.field).toBe("cidr");
    expect((await expectProblem(await rules(t, p.id, { method: "PATCH", json: { limit: 0 } }, rule.id), 400)).field).toBe("limit");
    expect((await expectProblem(await rules(t, p.id, { method: "PATCH", json: { kind: "ban" } }, rule.id), 400)).field).toBe("kind");
    const [row] = await rowsOf(p.id);
    expect(row!.config).toEqual({ limit: 20, windowSeconds: 60, by: "ip" });
  });

  it("DELETE removes the rule; a second delete, another project's rule id and an unknown id are 404", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const other = await create(t);
    const rule = await expectBody(await rules(t, p.id, { method: "POST", json: { kind: "ban", cidr: "203.0.113.9" } }), 201, RouteRuleSchema);
    await expectStatus(await rules(t, other.id, { method: "DELETE" }, rule.id), 404);
    await expectStatus(await rules(t, other.id, { method: "PATCH", json: { enabled: false } }, rule.id), 404);
    await expectStatus(await rules(t, p.id, { method: "DELETE" }, rule.id), 204);
    await expectStatus(await rules(t, p.id, { method: "DELETE" }, rule.id), 404);
    await expectStatus(await rules(t, p.id, { method: "DELETE" }, "rr_unknown"), 404);
  });

  it(`caps a project at ${MAX_RULES_PER_PROJECT} rules (409), also when creates race`, async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await h.db.insert(routeRules).values(
      Array.from({ length: MAX_RULES_PER_PROJECT - 3 }, (_, i) => ({
        id: `rr_seed${String(i).padStart(4, "0")}${p.id.slice(-8)}`,
        orgId: t.orgId,
        projectId: p.id,
        kind: "ban" as const,
        config: { cidr: `198.51.100.${i}`, expiresAt: null, reason: null },
      })),
    );
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => rules(t, p.id, { method: "POST", json: { kind: "ban", cidr: `203.0.113.${i}` } })));
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 201)).toHaveLength(3);
    expect(statuses.filter((s) => s === 409)).toHaveLength(5);
    expect(await rowsOf(p.id)).toHaveLength(MAX_RULES_PER_PROJECT);
    if (runtimeHasRealConcurrency(runtime)) expect(new Set(statuses)).toEqual(new Set([201, 409]));
  });

  it("reading needs project:read, writing project:write: a viewer lists but cannot add; another org's project is 404", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const viewer = await seedMember(h, t.orgId, "viewer");
    await expectBody(await rules(viewer, p.id), 200, RuleList);
    await expectStatus(await rules(viewer, p.id, { method: "POST", json: { kind: "ban", cidr: "203.0.113.1" } }), 403);
    const stranger = await seedTenant(h);
    await expectStatus(await rules(stranger, p.id), 404);
    await expectStatus(await rules(stranger, p.id, { method: "POST", json: { kind: "ban", cidr: "203.0.113.1" } }), 404);
    expect(await rowsOf(p.id)).toEqual([]);
  });
});
