/**
 * `wsp env ls|pull|push|set|rm`: a project's environment variables (GET and PATCH
 * /api/projects/:id/env, one environment at a time, production by default). Secret
 * values are never readable through the API (they read `••••••••`): `pull` writes
 * them as comments, never as values, and `push` never sends that mask as a value.
 */
import { readFile, rename, writeFile } from "node:fs/promises";
import { call, type Client, resolveProject } from "../api";
import { type Command, type Ctx, flag, pathFrom, print, projectRef, str, targetOf, UsageError } from "../command";
import { parseDotenv, quoteDotenv } from "../dotenv";

/** What a secret reads as (the API's mask, eight U+2022 bullets). */
export const MASK = "••••••••";
/** The API's caps per request and per page. */
const MAX_CHANGES = 200;
const PAGE = 100;
/** A dotenv file read by push: far above 200 values of 32768 characters would be a mistake. */
const MAX_FILE_BYTES = 8 * 1024 * 1024;

interface EnvVar {
  key: string;
  value: string;
  isSecret: boolean;
}

async function listAll(client: Client, projectId: string, environment: string): Promise<EnvVar[]> {
  const items: EnvVar[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const query: URLSearchParams = new URLSearchParams({ environment, limit: String(PAGE), ...(cursor ? { cursor } : {}) });
    const { body } = await call<{ items: EnvVar[]; nextCursor: string | null }>(client, "GET", `/api/projects/${projectId}/env?${query}`);
    items.push(...body.items);
    cursor = body.nextCursor;
  } while (cursor && ++pages < 1000);
  return items;
}

/** Sends the changes in requests of at most 200 upserts and 200 deletes. */
async function merge(
  client: Client,
  projectId: string,
  environment: string,
  upserts: Array<{ key: string; value: string; isSecret?: boolean }>,
  deletes: string[] = [],
) {
  const deleted: string[] = [];
  for (let i = 0; i < Math.max(upserts.length, deletes.length); i += MAX_CHANGES) {
    const { body } = await call<{ deleted: string[] }>(client, "PATCH", `/api/projects/${projectId}/env`, {
      body: { environment, upserts: upserts.slice(i, i + MAX_CHANGES), deletes: deletes.slice(i, i + MAX_CHANGES) },
    });
    deleted.push(...body.deleted);
  }
  return deleted;
}

const SUBCOMMANDS = ["ls", "pull", "push", "set", "rm"] as const;

async function run(ctx: Ctx): Promise<number> {
  const [sub, ...args] = ctx.positionals;
  if (!sub || !(SUBCOMMANDS as readonly string[]).includes(sub)) throw new UsageError(`env needs one of: ${SUBCOMMANDS.join(", ")}`);
  const environment = str(ctx, "env") ?? "production";
  const target = await targetOf(ctx);
  const { client } = target;
  const project = await resolveProject(client, projectRef(ctx, target, str(ctx, "project")));
  const where = `${project.name} (${environment})`;

  if (sub === "ls") {
    if (args.length > 0) throw new UsageError("env ls takes no arguments");
    const items = await listAll(client, project.id, environment);
    const width = Math.max(0, ...items.map((v) => v.key.length));
    print(
      ctx,
      { project: project.id, environment, items },
      items.length === 0 ? `No variables in ${where}.\n` : items.map((v) => `${v.key.padEnd(width)}  ${v.isSecret ? `${MASK} (secret)` : v.value}\n`).join(""),
    );
    return 0;
  }

  if (sub === "pull") {
    if (args.length > 1) throw new UsageError("env pull takes one file");
    const file = pathFrom(ctx.io, args[0] ?? ".env");
    const items = await listAll(client, project.id, environment);
    const secrets = items.filter((v) => v.isSecret).map((v) => v.key);
    const lines = [
      `# ${where}, pulled by wsp env pull from ${client.api}`,
      ...items.map((v) => (v.isSecret ? `# ${v.key} is secret: its value cannot be read back` : `${v.key}=${quoteDotenv(v.value)}`)),
    ];
    // Plain values may still be sensitive: the file is the user's alone, written whole or not at all.
    const part = `${file}.${process.pid}.tmp`;
    await writeFile(part, `${lines.join("\n")}\n`, { mode: 0o600 });
    await rename(part, file);
    print(
      ctx,
      { project: project.id, environment, file, written: items.length - secrets.length, secretsLeftOut: secrets },
      `Wrote ${items.length - secrets.length} variable${items.length - secrets.length === 1 ? "" : "s"} of ${where} to ${file}` +
        `${secrets.length ? `; ${secrets.length} secret${secrets.length === 1 ? "" : "s"} left out (${secrets.join(", ")})` : ""}\n`,
    );
    return 0;
  }

  if (sub === "push") {
    if (args.length > 1) throw new UsageError("env push takes one file");
    const file = pathFrom(ctx.io, args[0] ?? ".env");
    const text = await readFile(file, "utf8").catch((e) => {
      throw new UsageError(`Cannot read ${file}: ${e instanceof Error ? e.message : String(e)}`);
    });
    if (Buffer.byteLength(text) > MAX_FILE_BYTES) throw new UsageError(`${file} is over ${MAX_FILE_BYTES / 1024 / 1024} MiB`);
    const { entries, errors } = parseDotenv(text);
    if (errors.length > 0) throw new UsageError(`${file}: ${errors.join("; ")}`);
    // The mask is what a secret reads as, not its value: a line holding it changes nothing.
    const upserts = entries.filter((e) => e.value !== MASK).map((e) => ({ ...e, ...(flag(ctx, "secret") ? { isSecret: true } : {}) }));
    await merge(client, project.id, environment, upserts);
    print(
      ctx,
      { project: project.id, environment, file, upserted: upserts.map((u) => u.key) },
      `Pushed ${upserts.length} variable${upserts.length === 1 ? "" : "s"} from ${file} to ${where}${flag(ctx, "secret") ? " as secrets" : ""}; redeploy for a running app to see them\n`,
    );
    return 0;
  }

  if (sub === "set") {
    if (args.length === 0) throw new UsageError("env set needs NAME=VALUE");
    const upserts = args.map((a) => {
      const eq = a.indexOf("=");
      if (eq < 1) throw new UsageError(`${JSON.stringify(a)} is not NAME=VALUE`);
      return { key: a.slice(0, eq), value: a.slice(eq + 1), ...(flag(ctx, "secret") ? { isSecret: true } : {}) };
    });
    await merge(client, project.id, environment, upserts);
    print(
      ctx,
      { project: project.id, environment, upserted: upserts.map((u) => u.key) },
      `Set ${upserts.map((u) => u.key).join(", ")} in ${where}${flag(ctx, "secret") ? " as secret" : ""}; redeploy for a running app to see it\n`,
    );
    return 0;
  }

  if (args.length === 0) throw new UsageError("env rm needs at least one NAME");
  const deleted = await merge(client, project.id, environment, [], args);
  const missing = args.filter((k) => !deleted.includes(k));
  print(
    ctx,
    { project: project.id, environment, deleted, missing },
    `Removed ${deleted.length ? deleted.join(", ") : "nothing"} from ${where}${missing.length ? ` (not set: ${missing.join(", ")})` : ""}\n`,
  );
  return missing.length > 0 ? 1 : 0;
}

export const envCommand: Command = {
  name: "env",
  summary: "list, pull, push, set or remove environment variables",
  usage: `Usage: wsp env ls [--env NAME]
       wsp env pull [file] [--env NAME]
       wsp env push [file] [--env NAME] [--secret]
       wsp env set NAME=VALUE... [--env NAME] [--secret]
       wsp env rm NAME... [--env NAME]

The variables of one environment of the project (production unless --env names
another; the project: --project, else the folder's link).

  ls     lists them; secrets read ${MASK}
  pull   writes them to a dotenv file (default .env, mode 0600, replaced whole);
         secret values cannot be read back, so each secret is a comment there
  push   merges a dotenv file's variables into the environment (default .env);
         nothing is deleted; a value equal to ${MASK} is left out
  set    sets variables; an existing one keeps its kind unless --secret
  rm     removes variables (exit status 1 when one was not set)

Options:
  --env <name>       the environment (default: production)
  --project <ref>    the project (an id, a name or a slug)
  --secret           push, set: store the values as secrets
  --json             print what was read or changed as JSON

A saved change reaches a running app with its next deployment.
`,
  options: { env: { type: "string" }, project: { type: "string" }, secret: { type: "boolean" } },
  run,
};
