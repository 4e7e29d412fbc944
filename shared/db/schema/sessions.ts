/**
 * Browser sign-in: one-time codes e-mailed to an address, and the cookie
 * sessions they (or a pasted personal access token, self-hosted) open.
 * Neither table keeps a secret in the clear: a code is stored as a salted
 * SHA-256, a session as the SHA-256 of its cookie value.
 */
import { index, integer, pgTable, text, uniqueIndex } from "drizzle-orm/pg-core";
import { createdAt, ts } from "./columns";
import { apiTokens, users } from "./identity";

/**
 * The one live code of an address (a new request replaces it). A row exists for
 * an address without an account too (`user_id` null, no mail sent), so sign-in
 * answers and counts tries the same whether or not the address has one.
 */
export const signInCodes = pgTable(
  "sign_in_codes",
  {
    /** The address, lower-cased. */
    email: text("email").primaryKey(),
    userId: text("user_id").references(() => users.id, { onDelete: "cascade" }),
    /** SHA-256 of `<salt>:<code>`. */
    codeHash: text("code_hash").notNull(),
    salt: text("salt").notNull(),
    /** Wrong and right tries so far; at the limit the code is burned. */
    attempts: integer("attempts").notNull().default(0),
    expiresAt: ts("expires_at").notNull(),
    createdAt: createdAt(),
  },
  (t) => [index("sign_in_codes_expires_idx").on(t.expiresAt)],
);

export const sessions = pgTable(
  "sessions",
  {
    /** The public id (lists, DELETE); never the cookie value. */
    id: text("id").primaryKey(),
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    /** SHA-256 of the cookie value. */
    secretHash: text("secret_hash").notNull(),
    /** Set when the session was opened by pasting this personal access token: it ends with the token. */
    tokenId: text("token_id").references(() => apiTokens.id, { onDelete: "cascade" }),
    userAgent: text("user_agent"),
    /** Last use, refreshed at most once a minute; the idle expiry runs from it. */
    lastSeenAt: ts("last_seen_at").notNull(),
    /** The absolute expiry. */
    expiresAt: ts("expires_at").notNull(),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex("sessions_secret_idx").on(t.secretHash), index("sessions_user_idx").on(t.userId), index("sessions_expires_idx").on(t.expiresAt)],
);
