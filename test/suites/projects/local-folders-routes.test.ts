/**
 * The local-folder routes are self-hosted only: on the Worker they do not exist
 * (404); on the Node adapter without LOCAL_ROOTS (the suites' harness sets none)
 * they answer 409 saying how to enable them. A local project's deployment on the
 * cloud is covered by reasoning: import does not exist there, so no project gets
 * a localPath. The path rules and the deploy flow: test/node/local-folders.test.ts.
 */
import { describe, expect, it } from "vitest";
import { expectProblem, seedTenant } from "../../support/harness";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();

describe("local-folder routes by runtime", () => {
  it("are 404 on the Worker, 409 naming LOCAL_ROOTS on the Node adapter without roots", async () => {
    const t = await seedTenant(h);
    for (const [path, json] of [
      ["/api/projects/scan", { path: "/srv/app" }],
      ["/api/projects/import", { path: "/srv/app" }],
      ["/api/projects/local", undefined],
    ] as const) {
      const res = await h.request(path, { method: json ? "POST" : "GET", token: t.token, org: t.orgId, json });
      if (h.runtime === "worker") await expectProblem(res, 404);
      else expect((await expectProblem(res, 409)).detail).toContain("LOCAL_ROOTS");
    }
  });
});
