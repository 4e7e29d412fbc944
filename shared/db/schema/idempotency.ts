/**
 * Idempotency-Key (issue 24): the first answer to a keyed POST, kept for 24 h so
 * a retried request with the same key and body gets the same answer. One row per
 * (principal, route, key): the principal is who asked (a user, or a token), the
 * route is the method and route template. A row without `status` is a request
 * still in progress (a concurrent retry is told so, not run twice).
 */
import { index, integer, pgTable, primaryKey, text } from "drizzle-orm/pg-core";
import { createdAt } from "./columns";

export const idempotencyKeys = pgTable(
  "idempotency_keys",
  {
    principal: text("principal").notNull(),
    route: text("route").notNull(),
    key: text("key").notNull(),
    /** SHA-256 of the request body: the same key with another body is 422. */
    requestHash: text("request_hash").notNull(),
    /** The first answer's status; null while the first request runs. */
    status: integer("status"),
    contentType: text("content_type"),
    /** The first answer's body, encrypted with the keyring: an answer may hold a secret shown once (a channel's signing secret). */
    bodyCiphertext: text("body_ciphertext"),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.principal, t.route, t.key] }), index("idempotency_keys_created_idx").on(t.createdAt)],
);
