/**
 * Two invitations for the same new e-mail (from two organizations) accepted at the
 * same moment on real Postgres: one creates the account, the other gets a clean
 * answer (409, or 401 when it ran just after), never a 500; its invitation stays
 * open and the new user's token then accepts it.
 */
import { describe, expect, it } from "vitest";
import { newId } from "../../shared/ids";
import { expectStatus, seedTenant, useHarness } from "../support/harness";
import { postgresHarness } from "../support/node-harness";

const h = useHarness(postgresHarness);

async function invite(orgId: string, token: string, email: string): Promise<string> {
  const res = await h.request(`/api/orgs/${orgId}/invitations`, { token, json: { email, role: "member" } });
  return (await expectStatus<{ code: string }>(res, 201)).code;
}

describe("concurrent acceptance of invitations for one new e-mail", () => {
  it.runIf(h.realConcurrency)(
    "one creates the account, the other gets 409 (never 500), then joins with the new token",
    async () => {
      const [a, b] = [await seedTenant(h), await seedTenant(h)];
      const seen = new Set<number>();
      for (let round = 0; round < 20; round++) {
        const local = newId("race");
        // The same address, spelled with different case in each invitation.
        const codes = [await invite(a.orgId, a.token, `${local}@example.test`), await invite(b.orgId, b.token, `${local.toUpperCase()}@EXAMPLE.test`)];
        const answers = await Promise.all(codes.map((code) => h.request("/api/invitations/accept", { json: { code, name: "Racer" } })));
        const statuses = answers.map((r) => r.status);
        for (const s of statuses) seen.add(s);
        expect(
          statuses.filter((s) => s === 200),
          `round ${round}: ${statuses}`,
        ).toHaveLength(1);
        const winner = answers[statuses.indexOf(200)]!;
        const loser = answers[statuses.findIndex((s) => s !== 200)]!;
        expect([409, 401]).toContain(loser.status);
        expect(loser.headers.get("content-type")).toMatch(/^application\/problem\+json/);
        if (loser.status === 409) expect((await loser.json()).detail).toMatch(/just created; sign in/);
        const { user, token } = (await winner.json()) as { user: { id: string }; token: string };

        // The losing invitation was not used up: the new account accepts it with its token.
        const again = await h.request("/api/invitations/accept", { token, json: { code: codes[statuses.indexOf(200) === 0 ? 1 : 0] } });
        expect((await expectStatus<{ user: { id: string } }>(again, 200)).user.id).toBe(user.id);
      }
      // The race itself was hit, not only the sequential case.
      expect(seen.has(409)).toBe(true);
    },
    120_000,
  );
});
