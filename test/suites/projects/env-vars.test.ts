/** Project env vars (Projects rule 5) and the secret canary of the Projects module. */
import { describe, expect, it } from "vitest";
import { storedIn, expectProblem, expectStatus, seedMember, seedTenant } from "../../support/harness";
import { envTools, MASK, projectHelpers, type Var } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const { create, call, get } = projectHelpers(h);
const { patchEnv, readEnv, storedSecret } = envTools(h);

describe("projects: env vars", () => {
  it("masks secret values on read and keeps plain values readable", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    expect(await expectStatus(await call(t, `/${p.id}/env`), 200)).toEqual({ environment: "production", items: [], nextCursor: null });
    const res = await expectStatus(
      await patchEnv(t, p, {
        upserts: [
          { key: "API_KEY", value: "s3cr3t-value", isSecret: true },
          { key: "NODE_ENV", value: "production" },
        ],
      }),
      200,
    );
    expect(res).toEqual({
      environment: "production",
      upserted: [
        { key: "API_KEY", value: MASK, isSecret: true, updatedAt: expect.any(String) },
        { key: "NODE_ENV", value: "production", isSecret: false, updatedAt: expect.any(String) },
      ],
      deleted: [],
    });
    expect(await readEnv(t, p)).toEqual([
      { key: "API_KEY", value: MASK, isSecret: true },
      { key: "NODE_ENV", value: "production", isSecret: false },
    ]);
    const { row, plain } = await storedSecret(p, t.orgId, "API_KEY");
    expect(plain).toBe("s3cr3t-value");
    expect(row!.value).toBeNull();
    expect(row!.valueCiphertext).toMatch(/^v1\./);
  });

  it("is a merge: only named keys change, untouched (masked) secrets stay intact", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(
      await patchEnv(t, p, {
        upserts: [
          { key: "A", value: "1" },
          { key: "B", value: "2" },
          { key: "S", value: "secret-s", isSecret: true },
        ],
      }),
      200,
    );
    const res = await expectStatus(
      await patchEnv(t, p, {
        upserts: [
          { key: "A", value: "10" },
          { key: "C", value: "3" },
        ],
        deletes: ["B", "MISSING"],
      }),
      200,
    );
    expect(res.deleted).toEqual(["B"]);
    expect(await readEnv(t, p)).toEqual([
      { key: "A", value: "10", isSecret: false },
      { key: "C", value: "3", isSecret: false },
      { key: "S", value: MASK, isSecret: true },
    ]);
    expect((await storedSecret(p, t.orgId, "S")).plain).toBe("secret-s");
    // An empty merge changes nothing.
    await expectStatus(await patchEnv(t, p, {}), 200);
    expect(await readEnv(t, p)).toHaveLength(3);
  });

  it("the masked placeholder sent back keeps the stored secret; it is never stored", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(
      await patchEnv(t, p, {
        upserts: [
          { key: "TOKEN", value: "real-token", isSecret: true },
          { key: "PLAIN", value: "p" },
        ],
      }),
      200,
    );
    const { row: before } = await storedSecret(p, t.orgId, "TOKEN");
    // The GET output sent back unchanged, with and without isSecret.
    const listed = await readEnv(t, p);
    await expectStatus(await patchEnv(t, p, { upserts: listed }), 200);
    await expectStatus(await patchEnv(t, p, { upserts: [{ key: "TOKEN", value: MASK }] }), 200);
    const after = await storedSecret(p, t.orgId, "TOKEN");
    expect(after.plain).toBe("real-token");
    expect(after.row!.valueCiphertext).toBe(before!.valueCiphertext);

    // For a new or plain variable, or to make a secret plain, the mask is 400 and nothing changes.
    await expectProblem(await patchEnv(t, p, { upserts: [{ key: "NEW", value: MASK, isSecret: true }] }), 400, "upserts.0.value");
    await expectProblem(
      await patchEnv(t, p, {
        upserts: [
          { key: "A", value: "x" },
          { key: "PLAIN", value: MASK },
        ],
      }),
      400,
      "upserts.1.value",
    );
    await expectProblem(await patchEnv(t, p, { upserts: [{ key: "TOKEN", value: MASK, isSecret: false }] }), 400, "upserts.0.value");
    expect(await readEnv(t, p)).toEqual(listed);
    expect(await storedIn(h, `"value":"${MASK}"`)).toEqual([]);
  });

  it("an omitted isSecret keeps the variable's kind; a secret can be made plain with a new value", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(
      await patchEnv(t, p, {
        upserts: [
          { key: "S", value: "one", isSecret: true },
          { key: "P", value: "plain" },
        ],
      }),
      200,
    );
    await expectStatus(
      await patchEnv(t, p, {
        upserts: [
          { key: "S", value: "two" },
          { key: "P", value: "plain2" },
        ],
      }),
      200,
    );
    expect(await readEnv(t, p)).toEqual([
      { key: "P", value: "plain2", isSecret: false },
      { key: "S", value: MASK, isSecret: true },
    ]);
    expect((await storedSecret(p, t.orgId, "S")).plain).toBe("two");
    await expectStatus(
      await patchEnv(t, p, {
        upserts: [
          { key: "S", value: "now-visible", isSecret: false },
          { key: "P", value: "hidden", isSecret: true },
        ],
      }),
      200,
    );
    expect(await readEnv(t, p)).toEqual([
      { key: "P", value: MASK, isSecret: true },
      { key: "S", value: "now-visible", isSecret: false },
    ]);
    expect((await storedSecret(p, t.orgId, "P")).plain).toBe("hidden");
  });

  it("refuses conflicting or malformed changes with 400 and applies none of the request", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(await patchEnv(t, p, { upserts: [{ key: "KEEP", value: "k" }] }), 200);
    const cases: Array<[unknown, string]> = [
      [{ upserts: [{ key: "A", value: "1" }], deletes: ["KEEP", "A"] }, "deletes.1"],
      [
        {
          upserts: [
            { key: "A", value: "1" },
            { key: "A", value: "2" },
          ],
        },
        "upserts.1.key",
      ],
      [{ upserts: [{ key: "1ABC", value: "1" }] }, "upserts.0.key"],
      [{ upserts: [{ key: "MY-VAR", value: "1" }] }, "upserts.0.key"],
      [{ upserts: [{ key: "", value: "1" }] }, "upserts.0.key"],
      [{ upserts: [{ key: "A B", value: "1" }] }, "upserts.0.key"],
      [{ deletes: ["KEEP", "bad.key"] }, "deletes.1"],
      [{ upserts: [{ key: "A" }] }, "upserts.0.value"],
      [{ upserts: [{ key: "A", value: 5 }] }, "upserts.0.value"],
      [{ upserts: [{ key: "A", value: "a\u0000b" }] }, "upserts.0.value"],
      [{ upserts: [{ key: "A", value: "1", isSecret: "yes" }] }, "upserts.0.isSecret"],
      [{ upserts: [{ key: "A", value: "1", secret: true }] }, "upserts.0.secret"],
      [{ variables: { A: "1" } }, "variables"],
      [{ upserts: {} }, "upserts"],
      [{ environment: "nope", upserts: [{ key: "A", value: "1" }] }, "environment"],
      [{ environment: "Bad Name" }, "environment"],
    ];
    for (const [json, field] of cases) await expectProblem(await patchEnv(t, p, json), 400, field);
    expect(await readEnv(t, p)).toEqual([{ key: "KEEP", value: "k", isSecret: false }]);
    await expectProblem(await call(t, `/${p.id}/env?environment=nope`), 400, "environment");
  });

  it("keeps each environment's variables apart", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "staging", branch: "dev" } }), 201);
    await expectStatus(await patchEnv(t, p, { upserts: [{ key: "URL", value: "prod" }] }), 200);
    await expectStatus(
      await patchEnv(t, p, {
        environment: "staging",
        upserts: [
          { key: "URL", value: "stage" },
          { key: "S", value: "x", isSecret: true },
        ],
      }),
      200,
    );
    await expectStatus(await patchEnv(t, p, { environment: "production", deletes: ["S"] }), 200);
    expect(await readEnv(t, p)).toEqual([{ key: "URL", value: "prod", isSecret: false }]);
    expect(await readEnv(t, p, "staging")).toEqual([
      { key: "S", value: MASK, isSecret: true },
      { key: "URL", value: "stage", isSecret: false },
    ]);
  });

  it("binds each secret to its row: copied to another key, environment or project it does not decrypt", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(await patchEnv(t, p, { upserts: [{ key: "BOUND", value: "bound-value", isSecret: true }] }), 200);
    const { row, envId } = await storedSecret(p, t.orgId, "BOUND");
    const ctx = { orgId: t.orgId, table: "env_vars", column: "value", rowId: `${p.id}/${envId}/BOUND` };
    expect(await h.keyring.decrypt(row!.valueCiphertext!, ctx)).toBe("bound-value");
    for (const other of [{ rowId: `${p.id}/${envId}/OTHER` }, { rowId: `prj_other/${envId}/BOUND` }, { orgId: "org_other" }, { column: "clone_token" }]) {
      await expect(h.keyring.decrypt(row!.valueCiphertext!, { ...ctx, ...other })).rejects.toThrow();
    }
  });

  it("pages variables by key", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const keys = ["E", "A", "D", "B", "C"];
    await expectStatus(await patchEnv(t, p, { upserts: keys.map((key) => ({ key, value: key.toLowerCase() })) }), 200);
    const first = await expectStatus(await call(t, `/${p.id}/env?limit=2`), 200);
    expect(first.items.map((v: Var) => v.key)).toEqual(["A", "B"]);
    const second = await expectStatus(await call(t, `/${p.id}/env?limit=2&cursor=${first.nextCursor}`), 200);
    expect(second.items.map((v: Var) => v.key)).toEqual(["C", "D"]);
    const third = await expectStatus(await call(t, `/${p.id}/env?limit=2&cursor=${second.nextCursor}`), 200);
    expect(third).toMatchObject({ items: [{ key: "E" }], nextCursor: null });
  });

  it("a viewer reads (masked) but cannot change env vars", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(await patchEnv(t, p, { upserts: [{ key: "S", value: "hidden", isSecret: true }] }), 200);
    const viewer = await seedMember(h, t.orgId, "viewer");
    expect(await readEnv(viewer, p)).toEqual([{ key: "S", value: MASK, isSecret: true }]);
    await expectProblem(await patchEnv(viewer, p, { deletes: ["S"] }), 403);
    expect(await readEnv(t, p)).toHaveLength(1);
  });

  // h is filled in beforeAll, so `it.runIf(h.realConcurrency)` would read it too early: skip at run time.
  it("50 concurrent merges with distinct keys leave all 50 keys", async (ctx) => {
    if (!h.realConcurrency) return ctx.skip("needs a database that runs transactions concurrently");
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(await patchEnv(t, p, { upserts: [{ key: "BASE", value: "kept", isSecret: true }] }), 200);
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => patchEnv(t, p, { upserts: [{ key: `KEY_${i}`, value: `v${i}`, isSecret: i % 2 === 0 }] })),
    );
    for (const r of results) await expectStatus(r, 200);
    const vars = await readEnv(t, p);
    expect(vars).toHaveLength(51);
    for (let i = 0; i < 50; i++) {
      expect(vars).toContainEqual({ key: `KEY_${i}`, value: i % 2 === 0 ? MASK : `v${i}`, isSecret: i % 2 === 0 });
    }
    expect((await storedSecret(p, t.orgId, "KEY_48")).plain).toBe("v48");
  });

  // h is filled in beforeAll, so `it.runIf(h.realConcurrency)` would read it too early: skip at run time.
  it("concurrent merges over the same keys in any order neither deadlock nor fail", async (ctx) => {
    if (!h.realConcurrency) return ctx.skip("needs a database that runs transactions concurrently");
    const t = await seedTenant(h);
    const p = await create(t);
    const keys = ["K_A", "K_B", "K_C", "K_D"];
    await expectStatus(await patchEnv(t, p, { upserts: keys.map((key) => ({ key, value: "0" })) }), 200);
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => {
        const order = i % 2 ? [...keys].reverse() : keys;
        const upserts = order.slice(0, 3).map((key) => ({ key, value: `${i}`, isSecret: i % 3 === 0 }));
        return patchEnv(t, p, { upserts, deletes: [order[3]!] });
      }),
    );
    for (const r of results) await expectStatus(r, 200);
    const vars = await readEnv(t, p);
    expect(vars.every((v) => keys.includes(v.key))).toBe(true);
  });

  it("concurrent merges with distinct keys lose nothing on any runtime", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => patchEnv(t, p, { upserts: [{ key: `K${i}`, value: `${i}` }] })));
    for (const r of results) await expectStatus(r, 200);
    expect(await readEnv(t, p)).toHaveLength(10);
  });

  it("concurrent merges of one secret (sealed before their transactions) leave one of the sent values, and a value saved again keeps its ciphertext", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(await patchEnv(t, p, { upserts: [{ key: "S", value: "v0", isSecret: true }] }), 200);
    const values = Array.from({ length: 12 }, (_, i) => `v${i % 3}`);
    const results = await Promise.all(values.map((value) => patchEnv(t, p, { upserts: [{ key: "S", value, isSecret: true }] })));
    for (const r of results) await expectStatus(r, 200);
    const { row, plain } = await storedSecret(p, t.orgId, "S");
    expect(values).toContain(plain);
    await expectStatus(await patchEnv(t, p, { upserts: [{ key: "S", value: plain!, isSecret: true }] }), 200);
    expect((await storedSecret(p, t.orgId, "S")).row!.valueCiphertext).toBe(row!.valueCiphertext);
  });
});

describe("projects: secret canary", () => {
  it("a secret env value and a clone token appear in no response, log line or table column", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const secret = `canary-env-${crypto.randomUUID()}`;
    const cloneToken = `canary-clone-${crypto.randomUUID()}`;
    const bodies: string[] = [];
    const record = async (res: Response) => {
      bodies.push(await res.clone().text());
      return res;
    };
    await record(await patchEnv(t, p, { upserts: [{ key: "CANARY", value: secret, isSecret: true }] }));
    await record(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: cloneToken } }));
    await record(await patchEnv(t, p, { upserts: [{ key: "CANARY", value: MASK }] }));
    await record(await patchEnv(t, p, { upserts: [{ key: "bad key", value: secret, isSecret: true }] }));
    await record(await patchEnv(t, p, { upserts: [{ key: "CANARY2", value: secret, isSecret: "yes" }] }));
    await record(await patchEnv(t, p, { upserts: [{ key: "X", value: secret }], deletes: ["X"] }));
    await record(await call(t, `/${p.id}/clone-token`, { method: "PATCH", json: { token: cloneToken, extra: cloneToken } }));
    await record(await call(t, `/${p.id}/env`));
    await record(await call(t, `/${p.id}/clone-token`));
    await record(await call(t, `/${p.id}`));
    await record(await call(t, `/${p.id}/info`));
    await record(await call(t, `/${p.id}/deletion-preview`));
    await record(await call(t, ""));
    await record(await call(t, "/home"));
    for (const body of bodies) {
      expect(body).not.toContain(secret);
      expect(body).not.toContain(cloneToken);
    }
    expect((await get(t, p.id)).id).toBe(p.id);
    const logs = h.logs.join("\n");
    expect(logs).not.toContain(secret);
    expect(logs).not.toContain(cloneToken);
    expect(await storedIn(h, secret)).toEqual([]);
    expect(await storedIn(h, cloneToken)).toEqual([]);
    expect((await storedSecret(p, t.orgId, "CANARY")).plain).toBe(secret);
  });
});
