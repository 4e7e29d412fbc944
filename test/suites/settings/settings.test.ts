/** The spec's Settings section and its rows in "States and transitions". */
import { describe, expect, it } from "vitest";
import { storedIn, expectProblem, expectStatus, seedMember, seedTenant } from "../../support/harness";
import { useRuntimeHarness } from "../../support/runtime";

const DEFAULTS = {
  buildMode: "auto",
  defaultDeployTarget: null,
  defaultServerId: null,
  cloneToken: { hasToken: false, setAt: null, asDefault: false },
  cloneStrategyPreference: "prompt",
  forwardGitToServer: false,
};

const h = useRuntimeHarness();
describe("settings", () => {
  const patch = (token: string, path: string, json: unknown, org?: string) => h.request(`/api/settings${path}`, { method: "PATCH", token, json, org });
  const get = async (token: string, org?: string) => expectStatus(await h.request("/api/settings", { token, org }), 200);

  it("answers the defaults before anything is written, without writing a row", async () => {
    const t = await seedTenant(h);
    expect(await get(t.token)).toEqual(DEFAULTS);
    const rows = await h.db.execute(`select count(*)::int as n from workspace_settings where user_id = '${t.userId}'` as never);
    expect((rows as unknown as { rows: { n: number }[] }).rows[0]!.n).toBe(0);
  });

  it("PUT accepts only buildMode and creates then updates the row", async () => {
    const t = await seedTenant(h);
    const created = await expectStatus(await h.request("/api/settings", { method: "PUT", token: t.token, json: { buildMode: "local" } }), 200);
    expect(created).toEqual({ ...DEFAULTS, buildMode: "local" });
    await expectStatus(await h.request("/api/settings", { method: "PUT", token: t.token, json: { buildMode: "server" } }), 200);
    expect((await get(t.token)).buildMode).toBe("server");
    const p = await expectProblem(
      await h.request("/api/settings", { method: "PUT", token: t.token, json: { buildMode: "auto", forwardGitToServer: true } }),
      400,
      "forwardGitToServer",
    );
    expect(p.detail).toMatch(/Unknown field/);
    expect((await get(t.token)).buildMode).toBe("server");
  });

  it("rejects a bad buildMode naming the allowed values", async () => {
    const t = await seedTenant(h);
    for (const res of [
      await patch(t.token, "/build-mode", { buildMode: "turbo" }),
      await h.request("/api/settings", { method: "PUT", token: t.token, json: { buildMode: "turbo" } }),
    ]) {
      const p = await expectProblem(res, 400, "buildMode");
      expect(p.allowed).toEqual(["auto", "server", "local"]);
      expect(p.detail).toContain("auto");
    }
    expect(await get(t.token)).toEqual(DEFAULTS);
  });

  it("PATCH build-mode updates only the build mode", async () => {
    const t = await seedTenant(h);
    await expectStatus(await patch(t.token, "/forward-git", { enabled: true }), 200);
    const s = await expectStatus(await patch(t.token, "/build-mode", { buildMode: "local" }), 200);
    expect(s).toEqual({ ...DEFAULTS, buildMode: "local", forwardGitToServer: true });
  });

  describe("deploy defaults", () => {
    it("target server requires a server id (400, nothing written)", async () => {
      const t = await seedTenant(h);
      await expectProblem(await patch(t.token, "/deploy-defaults", { defaultDeployTarget: "server" }), 400, "defaultServerId");
      await expectProblem(await patch(t.token, "/deploy-defaults", { defaultDeployTarget: "server", defaultServerId: null }), 400, "defaultServerId");
      expect(await get(t.token)).toEqual(DEFAULTS);
    });

    it("stores the server id for target server (a server of the organization: test/suites/servers)", async () => {
      const t = await seedTenant(h);
      const server = await expectStatus(await h.request("/api/servers", { token: t.token, json: { name: "build-1" } }), 201);
      const s = await expectStatus(await patch(t.token, "/deploy-defaults", { defaultDeployTarget: "server", defaultServerId: server.id }), 200);
      expect(s).toMatchObject({ defaultDeployTarget: "server", defaultServerId: server.id });
    });

    it("stores null as the server id for local, cloud and null targets", async () => {
      const t = await seedTenant(h);
      const server = await expectStatus(await h.request("/api/servers", { token: t.token, json: { name: "build-1" } }), 201);
      for (const target of ["local", "cloud", null]) {
        await expectStatus(await patch(t.token, "/deploy-defaults", { defaultDeployTarget: "server", defaultServerId: server.id }), 200);
        const s = await expectStatus(await patch(t.token, "/deploy-defaults", { defaultDeployTarget: target, defaultServerId: "srv_2" }), 200);
        expect(s).toMatchObject({ defaultDeployTarget: target, defaultServerId: null });
        expect(await get(t.token)).toMatchObject({ defaultDeployTarget: target, defaultServerId: null });
      }
    });

    it("rejects an unknown target naming the allowed values, null included", async () => {
      const t = await seedTenant(h);
      const p = await expectProblem(await patch(t.token, "/deploy-defaults", { defaultDeployTarget: "mars" }), 400, "defaultDeployTarget");
      expect(p.allowed).toEqual(["local", "server", "cloud", null]);
      await expectProblem(await patch(t.token, "/deploy-defaults", {}), 400, "defaultDeployTarget");
    });
  });

  describe("clone credentials", () => {
    it("sets, replaces and clears the token, returning only its state", async () => {
      const t = await seedTenant(h);
      const before = Date.now();
      const set = await expectStatus(await patch(t.token, "/clone-credentials", { token: "ghp_first", asDefault: true }), 200);
      expect(set.cloneToken.hasToken).toBe(true);
      expect(set.cloneToken.asDefault).toBe(true);
      expect(new Date(set.cloneToken.setAt).getTime()).toBeGreaterThanOrEqual(before - 5000);
      expect(JSON.stringify(set)).not.toContain("ghp_first");

      const replaced = await expectStatus(await patch(t.token, "/clone-credentials", { token: "ghp_second", asDefault: false }), 200);
      expect(replaced.cloneToken).toMatchObject({ hasToken: true, asDefault: false });

      const cleared = await expectStatus(await patch(t.token, "/clone-credentials", { token: null }), 200);
      expect(cleared.cloneToken).toEqual({ hasToken: false, setAt: null, asDefault: false });
      expect((await get(t.token)).cloneToken.hasToken).toBe(false);
    });

    it("stores the token encrypted, bound to its row", async () => {
      const t = await seedTenant(h);
      await expectStatus(await patch(t.token, "/clone-credentials", { token: "ghp_bound_value" }), 200);
      const res = await h.db.execute(`select clone_token_ciphertext as c from workspace_settings where user_id = '${t.userId}'` as never);
      const ciphertext = (res as unknown as { rows: { c: string }[] }).rows[0]!.c;
      expect(ciphertext).toMatch(/^v1\./);
      const ctx = { orgId: t.orgId, table: "workspace_settings", column: "clone_token", rowId: t.userId };
      expect(await h.keyring.decrypt(ciphertext, ctx)).toBe("ghp_bound_value");
      await expect(h.keyring.decrypt(ciphertext, { ...ctx, rowId: "usr_other" })).rejects.toThrow();
    });

    it("requires token to be a string or null", async () => {
      const t = await seedTenant(h);
      await expectProblem(await patch(t.token, "/clone-credentials", { asDefault: true }), 400, "token");
      await expectProblem(await patch(t.token, "/clone-credentials", { token: 42 }), 400, "token");
      await expectProblem(await patch(t.token, "/clone-credentials", { token: "x", asDefault: "yes" }), 400, "asDefault");
      expect(await get(t.token)).toEqual(DEFAULTS);
    });
  });

  it("clone strategy preference moves from prompt to the sent value", async () => {
    const t = await seedTenant(h);
    for (const preference of ["local", "remote-with-token", "prompt"]) {
      const s = await expectStatus(await patch(t.token, "/clone-strategy-preference", { preference }), 200);
      expect(s.cloneStrategyPreference).toBe(preference);
    }
    const p = await expectProblem(await patch(t.token, "/clone-strategy-preference", { preference: "always" }), 400, "preference");
    expect(p.allowed).toEqual(["prompt", "local", "remote-with-token"]);
  });

  it("forward-git toggles and takes only a boolean", async () => {
    const t = await seedTenant(h);
    expect((await expectStatus(await patch(t.token, "/forward-git", { enabled: true }), 200)).forwardGitToServer).toBe(true);
    expect((await expectStatus(await patch(t.token, "/forward-git", { enabled: false }), 200)).forwardGitToServer).toBe(false);
    await expectProblem(await patch(t.token, "/forward-git", { enabled: "true" }), 400, "enabled");
    await expectProblem(await patch(t.token, "/forward-git", { forwardGitCredentials: true }), 400, "forwardGitCredentials");
  });

  it("refuses empty, non-JSON and non-object bodies with 400, writing nothing", async () => {
    const t = await seedTenant(h);
    const bodies: Array<{ body?: string; type?: string }> = [
      { body: "", type: "application/json" },
      { body: "{not json", type: "application/json" },
      { body: "buildMode=local", type: "application/x-www-form-urlencoded" },
      { body: '{"buildMode":"local"}', type: "text/plain" },
      { body: '["local"]', type: "application/json" },
      { body: "null", type: "application/json" },
    ];
    for (const b of bodies) {
      const res = await h.request("/api/settings/build-mode", {
        method: "PATCH",
        token: t.token,
        body: b.body,
        headers: b.type ? { "content-type": b.type } : {},
      });
      await expectProblem(res, 400);
    }
    expect(await get(t.token)).toEqual(DEFAULTS);
  });

  it("keeps one row per user per organization", async () => {
    const a = await seedTenant(h);
    const b = await seedMember(h, a.orgId, "member");
    await expectStatus(await patch(a.token, "/build-mode", { buildMode: "local" }), 200);
    expect((await get(b.token)).buildMode).toBe("auto");

    // The same user in a second organization has separate settings.
    const org2 = await expectStatus(await h.request("/api/orgs", { token: a.token, json: { name: "second" } }), 201);
    expect((await get(a.token, org2.id)).buildMode).toBe("auto");
    await expectStatus(await patch(a.token, "/build-mode", { buildMode: "server" }, org2.id), 200);
    expect((await get(a.token)).buildMode).toBe("local");
    expect((await get(a.token, org2.id)).buildMode).toBe("server");
  });

  it("a viewer may read and write their own settings", async () => {
    const t = await seedTenant(h);
    const viewer = await seedMember(h, t.orgId, "viewer");
    await expectStatus(await patch(viewer.token, "/build-mode", { buildMode: "local" }), 200);
    expect((await get(viewer.token)).buildMode).toBe("local");
  });

  it("concurrent writers of different fields lose nothing", async () => {
    const t = await seedTenant(h);
    const results = await Promise.all([
      patch(t.token, "/build-mode", { buildMode: "local" }),
      patch(t.token, "/forward-git", { enabled: true }),
      patch(t.token, "/clone-strategy-preference", { preference: "local" }),
      patch(t.token, "/deploy-defaults", { defaultDeployTarget: "cloud" }),
      patch(t.token, "/clone-credentials", { token: "ghp_concurrent", asDefault: true }),
    ]);
    for (const r of results) await expectStatus(r, 200);
    const s = await get(t.token);
    expect(s).toMatchObject({
      buildMode: "local",
      forwardGitToServer: true,
      cloneStrategyPreference: "local",
      defaultDeployTarget: "cloud",
      cloneToken: { hasToken: true, asDefault: true },
    });
  });

  it("never returns, logs or stores the clone token in the clear (canary)", async () => {
    const t = await seedTenant(h);
    const canary = `canary-${crypto.randomUUID()}`;
    const responses: string[] = [];
    const record = async (res: Response) => {
      responses.push(await res.clone().text());
      return res;
    };
    await record(await patch(t.token, "/clone-credentials", { token: canary, asDefault: true }));
    await record(await h.request("/api/settings", { token: t.token }));
    await record(await patch(t.token, "/build-mode", { buildMode: "local" }));
    await record(await h.request("/api/me", { token: t.token }));
    await record(await patch(t.token, "/clone-credentials", { token: canary, asDefault: "bad" }));
    for (const body of responses) expect(body).not.toContain(canary);
    expect(h.logs.join("\n")).not.toContain(canary);
    expect(await storedIn(h, canary)).toEqual([]);
  });
});
