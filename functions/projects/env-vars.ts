/**
 * Env vars per environment (production when none is named). GET masks secrets;
 * PATCH is a merge in one transaction: upserts inserted or updated, deletes
 * removed, every other variable untouched. There is no full-replace operation.
 */
import { z } from "@hono/zod-openapi";
import { badRequest } from "../../shared/http/errors";
import { DEFAULT_LIMIT, MAX_LIMIT, toPage, PageQuery } from "../../shared/http/pagination";
import { defineRoute, jsonRequest, jsonResponse } from "../../shared/http/route";
import { callerOf, createRouter } from "../../shared/http/router";
import { environmentOf, envView, listEnv, MASK, mergeProjectEnv, yieldToOthers } from "./env-store";
import { recordAudit } from "../operations/audit/record";
import { EnvironmentName, ProjectIdParam } from "./schema";
import { findProject } from "./store";

const MAX_CHANGES = 200;

const EnvKey = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be a valid environment variable name: letters, digits and '_', not starting with a digit");

const EnvVarSchema = z
  .object({
    key: z.string(),
    value: z.string().openapi({ description: `Secret values read as \`${MASK}\` (eight U+2022 bullets), whatever their length` }),
    isSecret: z.boolean(),
    updatedAt: z.string(),
  })
  .openapi("EnvVar");

const EnvironmentField = EnvironmentName.optional().openapi({ description: "Target environment; default `production`" });

const EnvQuery = PageQuery.extend({ environment: EnvironmentField });

const EnvPatchBody = z
  .strictObject({
    environment: EnvironmentField,
    upserts: z
      .array(
        z.strictObject({
          key: EnvKey,
          value: z.string().max(32768),
          isSecret: z.boolean().optional().openapi({ description: "Omitted: an existing variable keeps its kind, a new one is plain" }),
        }),
      )
      .max(MAX_CHANGES)
      .optional(),
    deletes: z.array(EnvKey).max(MAX_CHANGES).optional(),
  })
  .openapi("EnvPatch");

/** At most this many names per list in an audit row (a patch may hold thousands); the counts are always whole. */
const AUDIT_NAMES = 100;

/** Names only, never values: the audit log must not hold a secret. */
function envChangeDetails(environment: string, upserts: { key: string }[], deleted: string[]) {
  const set = upserts.map((u) => u.key);
  return { environment, set: set.slice(0, AUDIT_NAMES), setCount: set.length, deleted: deleted.slice(0, AUDIT_NAMES), deletedCount: deleted.length };
}

const list = defineRoute({
  method: "get",
  path: "/projects/{id}/env",
  tags: ["Projects"],
  summary: "List env vars of an environment, secret values masked",
  description: `Ordered by key; \`limit\` 1-${MAX_LIMIT}, default ${DEFAULT_LIMIT}. Secret values read as \`${MASK}\`. An unknown environment is 400 naming \`environment\`.`,
  permission: "project:read",
  request: { params: ProjectIdParam, query: EnvQuery },
  responses: {
    200: jsonResponse(
      z.object({ environment: z.string(), items: z.array(EnvVarSchema), nextCursor: z.string().nullable() }).openapi("EnvVarPage"),
      "One page of variables",
    ),
  },
});

const patch = defineRoute({
  method: "patch",
  path: "/projects/{id}/env",
  tags: ["Projects"],
  summary: "Merge env var changes",
  description: `A merge, applied atomically: \`upserts\` are inserted or updated, \`deletes\` removed (an absent key is ignored), every other variable, untouched masked secrets included, stays as it is. Keys are environment variable names (\`[A-Za-z_][A-Za-z0-9_]*\`, at most 256 characters); values at most 32768 characters; at most ${MAX_CHANGES} upserts and ${MAX_CHANGES} deletes per request. A key twice in \`upserts\`, or in both \`upserts\` and \`deletes\`, is 400. The masked placeholder \`${MASK}\` sent as a secret's value keeps the stored value; sent for a plain or new variable, or to make a secret plain, it is 400. Secret values are encrypted at rest, bound to their row. The body may be up to 8 MiB (a full request of long values); larger: 413.`,
  permission: "project:write",
  // 200 values of 32768 characters need more than the default 1 MiB.
  bodyLimit: 8 * 1024 * 1024,
  request: { params: ProjectIdParam, body: jsonRequest(EnvPatchBody) },
  responses: {
    200: jsonResponse(
      z
        .object({
          environment: z.string(),
          upserted: z.array(EnvVarSchema).openapi({ description: "The upserted variables as stored (secrets masked)" }),
          deleted: z.array(z.string()).openapi({ description: "Keys that existed and were removed" }),
        })
        .openapi("EnvPatchResult"),
      "What changed",
    ),
  },
});

export const envVarsRouter = createRouter()
  .openapi(list, async (c) => {
    const { orgId } = callerOf(c);
    const { limit, cursor, environment = "production" } = c.req.valid("query");
    const project = await findProject(c.get("db"), orgId, c.req.valid("param").id);
    const env = await environmentOf(c.get("db"), project.id, environment);
    const rows = await listEnv(c.get("db"), { orgId, projectId: project.id, environmentId: env.id }, limit, cursor);
    const page = toPage(rows, limit, (r) => r.key);
    return c.json({ environment, items: page.items.map(envView), nextCursor: page.nextCursor }, 200);
  })
  .openapi(patch, async (c) => {
    const { orgId } = callerOf(c);
    const { environment = "production", upserts = [], deletes = [] } = c.req.valid("json");
    const seen = new Map<string, number>();
    for (const [i, u] of upserts.entries()) {
      if (seen.has(u.key)) throw badRequest(`upserts.${i}.key`, `'${u.key}' appears twice in upserts`);
      seen.set(u.key, i);
    }
    for (const [j, key] of deletes.entries()) {
      if (seen.has(key)) throw badRequest(`deletes.${j}`, `'${key}' is in both upserts and deletes`);
    }
    const result = await mergeProjectEnv(c.get("db"), c.get("keyring"), orgId, c.req.valid("param").id, environment, upserts, deletes, c.get("clock")());
    await recordAudit(c, {
      action: "env.changed",
      target: { kind: "project", id: c.req.valid("param").id },
      details: envChangeDetails(environment, upserts, result.deleted),
    });
    // The answer holds every upserted plain value (up to ~6.5 MB): written out a few variables at a time, giving way in between.
    const parts: string[] = [];
    let chars = 0;
    for (const v of result.upserted) {
      const part = JSON.stringify(v);
      parts.push(part);
      chars += part.length;
      if (chars >= 256 * 1024) {
        chars = 0;
        await yieldToOthers();
      }
    }
    const body = `{"environment":${JSON.stringify(environment)},"upserted":[${parts.join(",")}],"deleted":${JSON.stringify(result.deleted)}}`;
    return c.body(body, 200, { "content-type": "application/json" }) as unknown as ReturnType<typeof c.json<{ environment: string } & typeof result, 200>>;
  });
