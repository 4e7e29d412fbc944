/**
 * Fixed-window rate-limit counters shared by every process and Worker
 * invocation (limits held in one process's memory would not hold across
 * several). A row is one key's current window: `count` units granted until
 * `window_end`; a use after `window_end` starts a new window. Rows are updated
 * by one atomic INSERT … ON CONFLICT DO UPDATE … RETURNING (no lost updates)
 * and pruned once their window has ended.
 */
import { index, integer, pgTable, text } from "drizzle-orm/pg-core";
import { ts } from "./columns";

export const rateLimits = pgTable(
  "rate_limits",
  {
    /** What is limited, e.g. `test:channel:<id>`, `send:org:<id>:email`. */
    key: text("key").primaryKey(),
    windowEnd: ts("window_end").notNull(),
    /** Units granted in the current window (never above the limit). */
    count: integer("count").notNull(),
    /** Units granted by the latest statement: RETURNING cannot read the row's previous count. */
    granted: integer("granted").notNull(),
  },
  (t) => [index("rate_limits_window_end_idx").on(t.windowEnd)],
);
