/** Without e-mail configured, asking for a code is 503 for every address (nothing is stored or limited). */
import { describe, expect, it } from "vitest";
import { newId } from "../../../shared/ids";
import { expectProblem, expectStatus, seedTenant } from "../../support/harness";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();

describe("sign-in without a mailer", () => {
  it("answers 503 saying e-mail is not configured, the same for any address", async () => {
    const t = await seedTenant(h);
    const known = await expectProblem(await h.request("/api/auth/login", { json: { email: t.email } }), 503);
    const unknown = await expectProblem(await h.request("/api/auth/login", { json: { email: `${newId("x")}@example.test` } }), 503);
    expect(known.detail).toMatch(/E-mail is not configured/);
    expect(unknown.detail).toBe(known.detail);
    if (h.runtime !== "worker") expect(known.detail).toMatch(/POST \/api\/auth\/token/);
  });

  it("says how to sign in here without trying: no e-mail; a token on self-hosted only (GET /api/auth/methods, public)", async () => {
    const res = await h.request("/api/auth/methods");
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(await expectStatus(res, 200)).toEqual({ email: false, token: h.runtime !== "worker" });
  });
});
