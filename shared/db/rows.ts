/** Rows of a raw `execute`, whatever the driver (node-postgres, PGlite and Neon all answer `{rows}`). */
export function rowsOf<T>(result: unknown): T[] {
  return ((result as { rows?: T[] }).rows ?? (result as T[])) as T[];
}
