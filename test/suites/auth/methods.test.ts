/** GET /api/auth/methods with a mailer configured: the e-mailed code is offered (without one: no-mailer.test.ts). */
import { describe, expect, it } from "vitest";
import { expectStatus } from "../../support/harness";
import { useNotificationsEnv } from "../../support/notifications-env";

const { h } = useNotificationsEnv();

describe("sign-in methods", () => {
  it("offers the e-mailed code where a mailer is configured, and the token on self-hosted only", async () => {
    const res = await h.request("/api/auth/methods");
    expect(await expectStatus(res, 200)).toEqual({ email: true, token: h.runtime !== "worker" });
  });
});
