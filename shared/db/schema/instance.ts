/**
 * Facts about the instance itself, one row per name. `keyring_check` holds a
 * known text encrypted with the keyring: a start with other secret keys than
 * the ones its secrets were encrypted with (a restore onto another machine, a
 * lost SECRET_KEYS) fails to decrypt it and is refused with a message naming
 * SECRET_KEYS, before any secret is read as garbage (functions/operations/keyring-check.ts).
 */
import { pgTable, text } from "drizzle-orm/pg-core";
import { ts } from "./columns";

export const instanceFacts = pgTable("instance_facts", {
  name: text("name").primaryKey(),
  value: text("value").notNull(),
  updatedAt: ts("updated_at").notNull().defaultNow(),
});
