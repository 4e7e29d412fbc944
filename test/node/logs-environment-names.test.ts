/**
 * lineNamer (functions/logs/environment-names.ts): lines get their deployment's
 * environment name with one query per batch for the deployments not named yet,
 * none for a batch of known ones or an empty one, never one per line; another
 * organization's deployment is not named.
 */
import { describe, expect, it } from "vitest";
import { lineNamer } from "../../functions/logs/environment-names";
import type { LogLineRow } from "../../functions/logs/store";
import type { Db } from "../../shared/db/types";
import { deploymentHelpers } from "../support/deployments";
import { expectStatus, seedTenant, useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { projectHelpers } from "../support/projects";

const h = useHarness(pgliteHarness);
const { create, call } = projectHelpers(h);
const { seedQueued } = deploymentHelpers(h);

/** The database, counting the SELECT statements built on it. */
function counting(db: Db) {
  const counter = { selects: 0 };
  const ex = new Proxy(db, {
    get(target, key, receiver) {
      if (key === "select") counter.selects++;
      const value = Reflect.get(target, key, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { ex, counter };
}

const rows = (ids: Array<string | null>, from = 1): LogLineRow[] =>
  ids.map((deploymentId, i) => ({ seq: from + i, at: new Date(0), deploymentId, stream: "stdout", message: `m${from + i}` }));

describe("lineNamer", () => {
  it("names each line's environment with one lookup per batch of new deployments, none for known ones", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    await expectStatus(await call(t, `/${p.id}/environments`, { method: "POST", json: { name: "preview-x", branch: "feature-x" } }), 201);
    const prod = await seedQueued(p);
    const preview = await seedQueued(p, "preview-x");
    const later = await seedQueued(p, "preview-x");
    const stranger = await seedTenant(h);
    const foreign = await seedQueued(await create(stranger));

    const { ex, counter } = counting(h.db);
    const named = lineNamer(ex, t.orgId);
    const batch = Array.from({ length: 1000 }, (_, i) => (i % 3 === 0 ? prod.id : i % 3 === 1 ? preview.id : null));
    const first = await named(rows(batch));
    expect(counter.selects).toBe(1);
    expect(first.map((l) => l.environment)).toEqual(batch.map((id) => (id === prod.id ? "production" : id === preview.id ? "preview-x" : null)));
    expect(first[0]).toEqual({
      id: "1",
      timestamp: "1970-01-01T00:00:00.000Z",
      deploymentId: prod.id,
      environment: "production",
      stream: "stdout",
      message: "m1",
    });

    // Known deployments and an empty batch: no query.
    await named(rows([preview.id, prod.id], 1001));
    await named([]);
    expect(counter.selects).toBe(1);

    // A deployment first seen in this batch: one more lookup, for it alone.
    const next = await named(rows([later.id, prod.id, later.id], 1003));
    expect(counter.selects).toBe(2);
    expect(next.map((l) => l.environment)).toEqual(["preview-x", "production", "preview-x"]);

    // Another organization's deployment is looked up once and named by nothing.
    expect((await named(rows([foreign.id, foreign.id]))).map((l) => l.environment)).toEqual([null, null]);
    await named(rows([foreign.id]));
    expect(counter.selects).toBe(3);
  });
});
