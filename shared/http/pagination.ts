/**
 * Keyset pagination shared by every list: `limit` (default 50, at most 100) and an
 * opaque `cursor` taken from the previous page's `nextCursor`.
 */
import { z } from "@hono/zod-openapi";

export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 100;

export const PageQuery = z.strictObject({
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_LIMIT)
    .default(DEFAULT_LIMIT)
    .openapi({ description: `Page size, 1-${MAX_LIMIT} (default ${DEFAULT_LIMIT})` }),
  cursor: z.string().max(200).optional().openapi({ description: "`nextCursor` of the previous page" }),
});

export function pageOf<T extends z.ZodType>(item: T, name: string) {
  return z.object({ items: z.array(item), nextCursor: z.string().nullable().openapi({ description: "null on the last page" }) }).openapi(name);
}

/** Given `limit + 1` rows, returns one page and the cursor of the next. */
export function toPage<T>(rows: T[], limit: number, cursorOf: (row: T) => string): { items: T[]; nextCursor: string | null } {
  const items = rows.slice(0, limit);
  return { items, nextCursor: rows.length > limit ? cursorOf(items[items.length - 1]!) : null };
}
