/**
 * The first owner's address: WORKSPACE_OWNER_EMAIL, else DEFAULT_OWNER_EMAIL, which the API's
 * own e-mail check accepts (the sign-in form refused the old `owner@localhost`). The console's
 * sign-in at that default is driven in Chromium in console-sign-in.test.ts.
 */
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { EmailSchema } from "../../functions/auth/login";
import { bootstrapOwner, DEFAULT_OWNER_EMAIL } from "../../functions/identity/store";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { openPostgres, type PostgresDatabase } from "../../shared/db/postgres";
import { users } from "../../shared/db/schema";
import { type FreshDatabase, freshDatabase } from "../support/fresh-database";

let db: FreshDatabase;
let database: PostgresDatabase;

beforeAll(async () => {
  db = await freshDatabase(inject("pgUrl"), "owner_email", { migrate: true });
  database = await openPostgres(db.url, { migrate: false, max: 2 });
}, 60_000);

afterAll(async () => {
  await database?.close();
  await db?.drop();
});

describe("the first owner's address", () => {
  it("defaults to an address the sign-in form takes; WORKSPACE_OWNER_EMAIL sets it (lower-cased) and a non-address is refused", () => {
    expect(EmailSchema.safeParse(DEFAULT_OWNER_EMAIL).success).toBe(true);
    expect(EmailSchema.safeParse("owner@localhost").success).toBe(false);
    expect(loadNodeConfig({}).ownerEmail).toBe(DEFAULT_OWNER_EMAIL);
    expect(loadNodeConfig({ WORKSPACE_OWNER_EMAIL: "Ops@Example.COM" }).ownerEmail).toBe("ops@example.com");
    for (const bad of ["owner@localhost", "not an address", `${"a".repeat(320)}@example.com`]) {
      expect(() => loadNodeConfig({ WORKSPACE_OWNER_EMAIL: bad }), bad).toThrow(
        "Invalid configuration WORKSPACE_OWNER_EMAIL: WORKSPACE_OWNER_EMAIL must be an e-mail address, e.g. you@example.com",
      );
    }
  });

  it("creates the owner with that address on the first start, once", async () => {
    const boot = await bootstrapOwner(database.db, { email: "ops@example.com" });
    const [owner] = await database.db.select().from(users).where(eq(users.id, boot!.userId));
    expect(owner!.email).toBe("ops@example.com");
    expect(await bootstrapOwner(database.db, { email: "second@example.com" })).toBeNull();
  });
});
