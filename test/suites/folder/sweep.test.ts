/** Folder upload (functions/projects/folder/sweep.ts): expired sessions and the sweep of their uploads. */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { uploadSessions } from "../../../shared/db/schema";
import { folderClient, NEXT_APP, problemWithoutId } from "../../support/folder-client";
import { expectProblem, seedTenant } from "../../support/harness";
import { tgz } from "../../support/tar-fixtures";
import { useRuntimeHarness } from "../../support/runtime";

const h = useRuntimeHarness();
const c = folderClient(h);

describe("folder upload: lifecycle", () => {
  it("an expired session is gone, and the sweep removes it and its upload; live ones stay", async () => {
    const t = await seedTenant(h);
    const bytes = await tgz(NEXT_APP);
    const old = await c.openSession(t);
    await c.upload(t, old, bytes);
    const live = await c.openSession(t);
    await c.upload(t, live, bytes);
    await h.db
      .update(uploadSessions)
      .set({ expiresAt: new Date(Date.now() - 1000) })
      .where(eq(uploadSessions.id, old.sessionId));

    const gone = await problemWithoutId(await c.scan(t, old.sessionId), 404);
    expect(gone.detail).toBe("Upload session not found");
    await expectProblem(await c.ensure(t, { name: "x", uploadSessionId: old.sessionId }), 404);
    expect(await c.store().open(`${t.orgId}/${old.sessionId}.tar.gz`)).not.toBeNull();

    await c.sweep();
    expect(await c.sessionRow(old.sessionId)).toBeUndefined();
    expect(await c.store().open(`${t.orgId}/${old.sessionId}.tar.gz`)).toBeNull();
    expect(await c.sessionRow(live.sessionId)).toBeDefined();
    const kept = await c.store().open(`${t.orgId}/${live.sessionId}.tar.gz`);
    expect(kept?.size).toBe(bytes.length);
    await kept?.body.cancel();
  });
});
