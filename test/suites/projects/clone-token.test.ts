/** Clone token (functions/projects/clone-token.ts): GET and PATCH /api/projects/{id}/clone-token. */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { CloneTokenState } from "../../../functions/projects/clone-token";
import { projects } from "../../../shared/db/schema";
import { expectBody, expectProblem, seedMember, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call } = projectHelpers(h);

describe("projects: clone token", () => {
  it("sets, replaces and clears it, returning only hasToken and setAt; needs project:admin to write", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    expect(await expectBody(await call(t, `/${p.id}/clone-token`), 200, CloneTokenState)).toEqual({ hasToken: false, setAt: null });
    const set = await expectBody(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: "ghp_first_value" } }), 200, CloneTokenState);
    expect(set).toEqual({ hasToken: true, setAt: expect.any(String) });
    const member = await seedMember(h, t.orgId, "member");
    await expectProblem(await call(member, `/${p.id}/clone-token`, { method: "PATCH", json: { token: null } }), 403);
    expect(await expectBody(await call(member, `/${p.id}/clone-token`), 200, CloneTokenState)).toEqual(set);
    await expectBody(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: "ghp_second_value" } }), 200, CloneTokenState);
    const [row] = await h.db.select().from(projects).where(eq(projects.id, p.id));
    const ctx = { orgId: t.orgId, table: "projects", column: "clone_token", rowId: p.id };
    expect(row!.cloneTokenCiphertext).toMatch(/^v1\./);
    expect(await h.keyring.decrypt(row!.cloneTokenCiphertext!, ctx)).toBe("ghp_second_value");
    await expect(h.keyring.decrypt(row!.cloneTokenCiphertext!, { ...ctx, rowId: "prj_other" })).rejects.toThrow();
    expect(await expectBody(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: null } }), 200, CloneTokenState)).toEqual({
      hasToken: false,
      setAt: null,
    });
    for (const json of [{}, { token: "" }, { token: 5 }, { token: "x", asDefault: true }]) {
      await expectProblem(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json }), 400);
    }
  });
});
