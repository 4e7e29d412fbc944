/**
 * The one database schema, one file per module. drizzle-kit generates
 * `migrations/` from these files; every driver (PGlite, node-postgres, Neon)
 * applies the same SQL.
 *
 * Tenant tables carry `org_id`; per-user tables carry `user_id` too, and every
 * query filters by them.
 */
export * from "./identity";
export * from "./settings";
export * from "./notifications";
export * from "./projects";
export * from "./rate-limits";
export * from "./git";
export * from "./logs";
export * from "./edge";
export * from "./cloud";
export * from "./sessions";
export * from "./runner";
export * from "./servers";
export * from "./idempotency";
export * from "./instance";
export * from "./audit";
export * from "./job-credentials";
