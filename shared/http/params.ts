import { z } from "@hono/zod-openapi";
import { isUnsafeText } from "./safe-text";

/**
 * An id in the path. No length or pattern check: an id that names nothing answers
 * the route's ordinary 404, byte-identical to any other unknown id. One Postgres
 * cannot store (NUL) becomes "" so it matches nothing instead of failing the query.
 */
export function pathId(name: string, description?: string) {
  return z
    .string()
    .transform((id) => (isUnsafeText(id) ? "" : id))
    .openapi({ param: { name, in: "path" }, type: "string", ...(description ? { description } : {}) });
}
