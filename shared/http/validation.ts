/**
 * Turns zod issues into the one public error contract: a 400 problem naming the
 * offending field as a dotted path, with the allowed values for enum errors.
 * Raw zod output never reaches a client.
 */
import type { z } from "@hono/zod-openapi";
import { type ApiError, badRequest } from "./errors";

type Issue = z.core.$ZodIssue;

/** zod's type names in words: `int` is "an integer", `object` "an object". */
const TYPE_WORDS: Record<string, string> = { int: "an integer", object: "an object", array: "an array", undefined: "absent" };
const typeInWords = (expected: string) => TYPE_WORDS[expected] ?? `a ${expected}`;

function describe(value: unknown): string {
  return value === null ? "null" : JSON.stringify(value);
}

/** The submitted value at an issue's path; `undefined` when it was absent. */
function valueAt(data: unknown, path: readonly PropertyKey[]): unknown {
  let value = data;
  for (const key of path) {
    if (value === null || typeof value !== "object") return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

export function issueToError(issue: Issue, target: string, data?: unknown): ApiError {
  const path = issue.path.map(String);
  if (issue.code === "unrecognized_keys") {
    const field = [...path, issue.keys[0]!].join(".");
    return badRequest(field, `Unknown field '${field}'`);
  }
  const field = path.join(".") || undefined;
  const name = field ?? (target === "json" ? "body" : target);
  switch (issue.code) {
    case "invalid_union": {
      // A discriminated union (e.g. a channel's `kind`): zod lists the discriminator's values.
      const options = (issue as { options?: unknown }).options;
      if (!Array.isArray(options)) return badRequest(field, `${name} is not valid`);
      if (valueAt(data, issue.path) === undefined) return badRequest(field, `${name} is required`);
      return badRequest(field, `${name} must be one of ${options.map(describe).join(", ")}`, options);
    }
    case "invalid_value":
      return badRequest(field, `${name} must be one of ${issue.values.map(describe).join(", ")}`, issue.values as never);
    case "invalid_type":
      if (valueAt(data, issue.path) === undefined) return badRequest(field, `${name} is required`);
      return badRequest(field, `${name} must be ${issue.expected === "object" && !field ? "a JSON object" : typeInWords(issue.expected)}`);
    case "too_big":
      return badRequest(
        field,
        `${name} must be at most ${issue.maximum}${issue.origin === "string" ? " characters" : issue.origin === "array" ? " items" : ""}`,
      );
    case "too_small":
      if (issue.origin === "string" && issue.minimum === 1) return badRequest(field, `${name} must not be empty`);
      return badRequest(
        field,
        `${name} must be at least ${issue.minimum}${issue.origin === "string" ? " characters" : issue.origin === "array" ? " items" : ""}`,
      );
    default:
      return badRequest(field, `${name}: ${issue.message}`);
  }
}

/**
 * The `defaultHook` of every router. An unknown field is reported first (it is
 * usually a misspelling or a removed field); otherwise the first failing issue.
 */
export function validationHook(result: { success: boolean; error?: z.ZodError; target: string; data?: unknown }): void {
  if (result.success || !result.error) return;
  const issues = result.error.issues;
  throw issueToError(issues.find((i) => i.code === "unrecognized_keys") ?? issues[0]!, result.target, result.data);
}
