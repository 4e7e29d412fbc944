/**
 * Per-project sandbox uids (table sandbox_uids): a project's uid is the one it
 * was given the first time one of its deployments ran, else the next free one
 * of RUNNER_UID_RANGE (after the highest given; once the range is used up, the
 * lowest one a deleted project gave back). The unique index settles two runners
 * allocating at once: the loser reads the winner's row or tries the next uid.
 * A uid recorded under an earlier range is kept (the project's files are its).
 */
import { between, eq, max, sql } from "drizzle-orm";
import { rowsOf } from "../../../../shared/db/rows";
import { sandboxUids } from "../../../../shared/db/schema";
import type { Db } from "../../../../shared/db/types";

export interface UidRange {
  first: number;
  last: number;
}

const ATTEMPTS = 20;

export class UidRangeExhausted extends Error {}

export async function sandboxUidOf(db: Db, project: { id: string; orgId: string }, range: UidRange): Promise<number> {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const [mine] = await db.select({ uid: sandboxUids.uid }).from(sandboxUids).where(eq(sandboxUids.projectId, project.id));
    if (mine) return mine.uid;
    const candidate = await nextFree(db, range);
    if (candidate === undefined) throw new UidRangeExhausted(`every uid of RUNNER_UID_RANGE (${range.first}-${range.last}) is given to a project`);
    const inserted = await db
      .insert(sandboxUids)
      .values({ projectId: project.id, orgId: project.orgId, uid: candidate })
      .onConflictDoNothing()
      .returning({ uid: sandboxUids.uid });
    if (inserted[0]) return inserted[0].uid;
  }
  throw new Error("could not allocate a sandbox uid (too many concurrent allocations)");
}

async function nextFree(db: Db, range: UidRange): Promise<number | undefined> {
  const [top] = await db
    .select({ uid: max(sandboxUids.uid) })
    .from(sandboxUids)
    .where(between(sandboxUids.uid, range.first, range.last));
  const next = top?.uid === null || top?.uid === undefined ? range.first : top.uid + 1;
  if (next <= range.last) return next;
  const free = rowsOf<{ uid: number }>(
    await db.execute(sql`select s.uid from generate_series(${range.first}::int, ${range.last}::int) as s(uid)
      where not exists (select 1 from sandbox_uids u where u.uid = s.uid) order by s.uid limit 1`),
  );
  return free[0] ? Number(free[0].uid) : undefined;
}
