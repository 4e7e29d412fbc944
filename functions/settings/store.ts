/**
 * The settings row of (organization, user). Reads fall back to the defaults
 * without writing; every write is one `INSERT … ON CONFLICT DO UPDATE` touching
 * only its own columns, so concurrent writers of different fields lose nothing.
 */
import { and, eq, sql } from "drizzle-orm";
import type { Keyring } from "../../shared/crypto/keyring";
import { workspaceSettings } from "../../shared/db/schema";
import { preparedStatement } from "../../shared/db/prepared";
import type { Db } from "../../shared/db/types";
import type { Settings } from "./schema";

type Row = typeof workspaceSettings.$inferSelect;
export type SettingsPatch = Partial<Omit<typeof workspaceSettings.$inferInsert, "orgId" | "userId" | "updatedAt">>;

interface Owner {
  orgId: string;
  userId: string;
}

/** Where a clone token's ciphertext lives: the AES-GCM additional data. */
const cloneTokenContext = (o: Owner) => ({ orgId: o.orgId, table: "workspace_settings", column: "clone_token", rowId: o.userId });

function view(row: Row | undefined): Settings {
  return {
    buildMode: row?.buildMode ?? "auto",
    defaultDeployTarget: row?.defaultDeployTarget ?? null,
    defaultServerId: row?.defaultServerId ?? null,
    cloneToken: {
      hasToken: Boolean(row?.cloneTokenCiphertext),
      setAt: row?.cloneTokenSetAt?.toISOString() ?? null,
      asDefault: row?.cloneTokenAsDefault ?? false,
    },
    cloneStrategyPreference: row?.cloneStrategyPreference ?? "prompt",
    forwardGitToServer: row?.forwardGitToServer ?? false,
  };
}

const selectSettings = preparedStatement((db) =>
  db
    .select()
    .from(workspaceSettings)
    .where(and(eq(workspaceSettings.orgId, sql.placeholder("orgId")), eq(workspaceSettings.userId, sql.placeholder("userId"))))
    .prepare("settings_read"),
);

// Not async: a route's hot read, one promise fewer on every GET /api/settings.
export function readSettings(db: Db, owner: Owner): Promise<Settings> {
  return selectSettings(db)
    .execute({ orgId: owner.orgId, userId: owner.userId })
    .then(([row]) => view(row));
}

export async function writeSettings(db: Db, owner: Owner, patch: SettingsPatch, now: Date): Promise<Settings> {
  const [row] = await db
    .insert(workspaceSettings)
    .values({ ...owner, ...patch, updatedAt: now })
    .onConflictDoUpdate({ target: [workspaceSettings.orgId, workspaceSettings.userId], set: { ...patch, updatedAt: now } })
    .returning();
  return view(row);
}

/** Encrypts (or clears) the clone token; the plaintext never reaches the database. */
export async function cloneTokenPatch(keyring: Keyring, owner: Owner, token: string | null, asDefault: boolean, now: Date): Promise<SettingsPatch> {
  if (token === null) return { cloneTokenCiphertext: null, cloneTokenSetAt: null, cloneTokenAsDefault: false };
  return {
    cloneTokenCiphertext: await keyring.encrypt(token, cloneTokenContext(owner)),
    cloneTokenSetAt: now,
    cloneTokenAsDefault: asDefault,
  };
}
