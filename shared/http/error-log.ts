/**
 * What an unexpected error may leave in the logs. A failed database query logs
 * its SQL statement and the database's error code, never its parameters (they
 * carry request values: secrets, e-mail addresses, env values); values quoted in
 * the database's message and its `detail` line are left out for the same reason.
 */

/** Stack frames only: the first lines of `stack` repeat the message. */
function framesOf(error: Error): string | undefined {
  const frames = error.stack?.split("\n").filter((line) => line.startsWith("    at "));
  return frames?.length ? frames.join("\n") : undefined;
}

/** Database messages quote offending input (`invalid input syntax for type uuid: "…"`). */
const redactQuoted = (message: string) => message.replace(/"[^"]*"/g, '"…"');

function databaseCause(cause: unknown): Record<string, unknown> | undefined {
  if (!(cause instanceof Error)) return undefined;
  const { code, constraint, table, column, routine } = cause as Error & Record<string, unknown>;
  return { message: redactQuoted(cause.message), code, constraint, table, column, routine };
}

function isFailedQuery(error: Error): error is Error & { query: string; params: unknown } {
  return typeof (error as { query?: unknown }).query === "string" && "params" in error;
}

export function describeError(error: unknown): Record<string, unknown> {
  if (!(error instanceof Error)) return { error: String(error) };
  if (isFailedQuery(error)) {
    return { error: "database query failed", query: error.query, cause: databaseCause(error.cause), stack: framesOf(error) };
  }
  return { error: error.message, stack: framesOf(error) };
}
