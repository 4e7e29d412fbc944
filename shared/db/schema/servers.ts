/**
 * Build servers: runner processes (`wsp runner`) attached to an organization
 * over HTTPS. Each holds one runner token (`wsr_…`), stored only as its SHA-256
 * hash here: deleting the row revokes it. The runner reports the status columns
 * through the runner protocol (POST /api/runner/heartbeat).
 */
import { sql } from "drizzle-orm";
import { boolean, index, integer, jsonb, pgTable, text, uniqueIndex } from "drizzle-orm/pg-core";
import { createdAt, ts } from "./columns";
import { organizations, users } from "./identity";

/** What a runner reports about its sandbox or its limits: small flat maps of named facts. */
export type ServerFacts = Record<string, string | number | boolean>;

export const servers = pgTable(
  "servers",
  {
    id: text("id").primaryKey(),
    orgId: text("org_id")
      .notNull()
      .references(() => organizations.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    labels: text("labels").array().notNull().default(sql`'{}'::text[]`),
    /** Where the control plane's edges forward requests for the apps this server runs (signed, functions/servers/forward-target.ts); null: not reachable. */
    publicUrl: text("public_url"),
    /** SHA-256 of the runner token; the token is shown once, at registration. */
    tokenHash: text("token_hash").notNull(),
    /** The token's first characters, to recognize it. */
    tokenPrefix: text("token_prefix").notNull(),
    /**
     * The key that signs requests forwarded to this server's edge (HMAC-SHA256),
     * encrypted with the keyring; the runner derives the same key from its token,
     * so it never travels. Null for servers registered before forwarding.
     */
    edgeKeyCiphertext: text("edge_key_ciphertext"),
    /** Take no new work (set by an admin; the runner reads it in its heartbeat answer). */
    draining: boolean("draining").notNull().default(false),
    /** As the runner last reported them. */
    version: text("version"),
    capacity: integer("capacity"),
    sandbox: jsonb("sandbox").$type<ServerFacts>(),
    limits: jsonb("limits").$type<ServerFacts>(),
    lastSeenAt: ts("last_seen_at"),
    createdBy: text("created_by").references(() => users.id, { onDelete: "set null" }),
    createdAt: createdAt(),
    updatedAt: ts("updated_at").notNull().defaultNow(),
  },
  (t) => [uniqueIndex("servers_token_hash_idx").on(t.tokenHash), index("servers_org_idx").on(t.orgId, t.id)],
);
