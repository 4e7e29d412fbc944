/**
 * A deployment a push queues pins the environment's configuration like any other
 * (functions/deployments/config-snapshot.ts): its variables, secrets included and
 * encrypted for it, the resources and the options, in the delivery's transaction.
 */
import { eq } from "drizzle-orm";
import { describe, expect, inject, it } from "vitest";
import { pinnedVariables } from "../../../functions/deployments/config-snapshot";
import { PushDelivery } from "../../../functions/git-hooks/push";
import { deployments } from "../../../shared/db/schema";
import { gitServerControl } from "../../support/git-control";
import { delivery, hostsAt, post, seedPushHook } from "../../support/git-hooks";
import { storedIn, expectBody, expectStatus, seedTenant } from "../../support/harness";
import { projectHelpers } from "../../support/projects";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness({ env: hostsAt(inject("gitServerUrl")) });
const control = gitServerControl(inject("gitServerUrl"));
const { create, call } = projectHelpers(h);
const CANARY = "canary-push-snapshot-41b7e0";

describe("push webhook: the queued deployment's snapshot", () => {
  it("pins the variables (secret encrypted), resources and options as they were when the push arrived", async () => {
    const t = await seedTenant(h);
    const p = await create(t);
    const repo = await control.createRepo();
    const { hookId, secret } = await seedPushHook(h, t, p, { provider: "github", owner: repo.owner, repo: repo.repo });
    const upserts = [
      { key: "GREETING", value: "hello" },
      { key: "TOKEN", value: CANARY, isSecret: true },
    ];
    await expectStatus(await call(t, `/${p.id}/env`, { method: "PATCH", json: { upserts } }), 200);
    await expectStatus(await call(t, `/${p.id}/resources`, { method: "PATCH", json: { production: { memoryMb: 768 } } }), 200);
    await expectStatus(await call(t, `/${p.id}/options`, { method: "POST", json: { startCommand: "node server.js" } }), 200);
    const d = await delivery("github", secret, { kind: "push", ref: "refs/heads/main", commit: repo.branches.main! });
    const answer = await expectBody(await post(h, hookId, d), 202, PushDelivery);
    const [row] = await h.db.select().from(deployments).where(eq(deployments.id, answer.deploymentId!));
    expect(row!.configSnapshot).toMatchObject({ resources: { productionMemoryMb: 768 }, options: { startCommand: "node server.js" } });
    expect(await pinnedVariables(h.keyring, row!)).toEqual([
      { key: "GREETING", value: "hello", isSecret: false },
      { key: "TOKEN", value: CANARY, isSecret: true },
    ]);
    expect(await storedIn(h, CANARY)).toEqual([]);
  });
});
