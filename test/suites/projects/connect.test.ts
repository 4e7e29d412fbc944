/** Custom domains (functions/projects/connect.ts): POST /api/projects/{id}/connect. */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { ProjectSchema } from "../../../functions/projects/schema";
import { domains } from "../../../shared/db/schema";
import { newId } from "../../../shared/ids";
import { expectBody, expectProblem, expectStatus, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call, get } = projectHelpers(h);

describe("projects: connect", () => {
  const host = (label: string) => `${label}-${newId("d").slice(-10)}.example.com`;

  it("adds the domain as primary; an earlier primary stays, not primary; repeating is harmless", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const a = host("a");
    const b = host("b");
    const connect = (domain: string) => call(t, `/${p.id}/connect`, { method: "POST", json: { domain } });
    let v = await expectBody(await connect(a), 200, ProjectSchema);
    expect(v.routes.domains).toEqual([{ hostname: a, primary: true, createdAt: expect.any(String) }]);
    v = await expectBody(await connect(`${b.toUpperCase()}.`), 200, ProjectSchema);
    expect(v.routes.domains.map((d: { hostname: string; primary: boolean }) => [d.hostname, d.primary])).toEqual([
      [b, true],
      [a, false],
    ]);
    v = await expectBody(await connect(a), 200, ProjectSchema);
    expect(v.routes.domains.map((d: { hostname: string; primary: boolean }) => [d.hostname, d.primary])).toEqual([
      [a, true],
      [b, false],
    ]);
    v = await expectBody(await connect(a), 200, ProjectSchema);
    expect(v.routes.domains).toHaveLength(2);
    expect((await get(t, p.id)).routes.domains).toEqual(v.routes.domains);
  });

  it("a domain of another project, in any organization, is 409", async () => {
    const t = await seedTenant(h);
    const other = await seedTenant(h);
    const mine = await create(t);
    const sibling = await create(t);
    const theirs = await create(other);
    const d = host("taken");
    await expectBody(await call(other, `/${theirs.id}/connect`, { method: "POST", json: { domain: d } }), 200, ProjectSchema);
    await expectProblem(await call(t, `/${mine.id}/connect`, { method: "POST", json: { domain: d } }), 409);
    const e = host("sib");
    await expectBody(await call(t, `/${sibling.id}/connect`, { method: "POST", json: { domain: e } }), 200, ProjectSchema);
    await expectProblem(await call(t, `/${mine.id}/connect`, { method: "POST", json: { domain: e } }), 409);
    expect((await get(t, mine.id)).routes.domains).toEqual([]);
  });

  it("validates the hostname", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const bad = [
      "",
      "localhost",
      "https://a.example.com",
      "a.example.com/path",
      "a.example.com:8080",
      "*.example.com",
      "1.2.3.4",
      "a_b.example.com",
      "-a.example.com",
      "a..example.com",
      "exämple.com",
      `${"a".repeat(64)}.com`,
      `${"a.".repeat(130)}com`,
    ];
    for (const domain of bad) await expectProblem(await call(t, `/${p.id}/connect`, { method: "POST", json: { domain } }), 400, "domain");
    await expectProblem(await call(t, `/${p.id}/connect`, { method: "POST", json: {} }), 400, "domain");
    // Hosts under the shared domain are free routes.
    await expectProblem(
      await call(t, `/${p.id}/connect`, { method: "POST", json: { domain: `other.${p.routes.free.hostname.split(".").slice(1).join(".")}` } }),
      400,
      "domain",
    );
    await expectBody(
      await call(t, `/${p.id}/connect`, { method: "POST", json: { domain: `xn--bcher-kva-${newId("d").slice(-6)}.example` } }),
      200,
      ProjectSchema,
    );
  });

  it("concurrent connects to one project leave exactly one primary", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const hosts = Array.from({ length: 6 }, (_, i) => host(`c${i}`));
    const results = await Promise.all(hosts.map((domain) => call(t, `/${p.id}/connect`, { method: "POST", json: { domain } })));
    for (const r of results) await expectStatus(r, 200);
    const rows = await h.db.select().from(domains).where(eq(domains.projectId, p.id));
    expect(rows).toHaveLength(6);
    expect(rows.filter((r) => r.isPrimary)).toHaveLength(1);
  });
});
