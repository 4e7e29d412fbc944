/**
 * A server's publicUrl passes the outbound guard (functions/servers/public-url-guard.ts):
 * with OUTBOUND_ALLOW_PRIVATE unset, a loopback, private, link-local or metadata address,
 * or a local name, is refused at registration and on change with 400 naming `publicUrl`,
 * and nothing is stored; a public name is accepted.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { CreatedServerSchema } from "../../../functions/servers/schema";
import { servers } from "../../../shared/db/schema";
import { expectBody, expectProblem, seedTenant } from "../../support/harness";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness({ env: { OUTBOUND_ALLOW_PRIVATE: "false" } });

const PRIVATE = [
  "http://127.0.0.1:8080",
  "http://10.1.2.3",
  "http://192.168.0.10:9000",
  "http://169.254.169.254/latest/meta-data",
  "http://[::1]:8080",
  "http://[::ffff:127.0.0.1]",
  "http://localhost:3000",
  "http://metadata.google.internal",
];

describe("build servers: publicUrl and the outbound guard (OUTBOUND_ALLOW_PRIVATE unset)", () => {
  it("refuses a private, loopback or metadata publicUrl at registration, naming the field", async () => {
    const t = await seedTenant(h);
    for (const publicUrl of PRIVATE) {
      const res = await h.request("/api/servers", { method: "POST", token: t.token, org: t.orgId, json: { name: "box", publicUrl } });
      const problem = await expectProblem(res, 400, "publicUrl");
      expect(JSON.stringify(problem)).toMatch(/refused/);
    }
    expect(await h.db.select().from(servers).where(eq(servers.orgId, t.orgId))).toEqual([]);
  });

  it("refuses one on change too; a public name is accepted and kept", async () => {
    const t = await seedTenant(h);
    const created = await expectBody(
      await h.request("/api/servers", { method: "POST", token: t.token, org: t.orgId, json: { name: "box", publicUrl: "https://build-1.example.com" } }),
      201,
      CreatedServerSchema,
    );
    for (const publicUrl of PRIVATE) {
      const res = await h.request(`/api/servers/${created.id}`, { method: "PATCH", token: t.token, org: t.orgId, json: { publicUrl } });
      await expectProblem(res, 400, "publicUrl");
    }
    const [row] = await h.db.select().from(servers).where(eq(servers.id, created.id));
    expect(row?.publicUrl).toBe("https://build-1.example.com");
  });
});
