/**
 * What every `wsp` command shares: the Io it prints through, the global options,
 * where paths resolve from, and which server, token, organization and project a
 * command acts on (flags, then the environment, then the folder's link, then the
 * saved sign-in).
 */
import { isAbsolute, resolve } from "node:path";
import type { ParseArgsConfig } from "node:util";
import { apiBase, type Client } from "./api";
import { readLogin, type SavedLogin } from "./config";
import { type FolderLink, readLink } from "./link";

export interface Io {
  out: (text: string) => void;
  err: (text: string) => void;
  env: Record<string, string | undefined>;
  tty: boolean;
  /** Aborted on Ctrl-C: a followed stream stops cleanly. */
  signal?: AbortSignal;
  /** The working directory (default: the process's). `INIT_CWD` wins: under `npm run` it is where the user ran npm. */
  cwd?: string;
  /** Asks the user a question on the terminal (login); absent when there is no one to ask. */
  prompt?: (question: string) => Promise<string>;
}

/** Test hook: faster reconnection of followed streams. */
export interface MainOptions {
  follow?: { retryMs?: number; idleMs?: number };
}

/** A usage mistake: exit status 2 with the command's help. */
export class UsageError extends Error {}

export type Options = NonNullable<ParseArgsConfig["options"]>;

export const GLOBAL_OPTIONS = {
  api: { type: "string" },
  token: { type: "string" },
  org: { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const satisfies Options;

export type Values = Record<string, string | boolean | undefined>;

export interface Ctx {
  io: Io;
  values: Values;
  positionals: string[];
  options: MainOptions;
}

export interface Command {
  name: string;
  /** One line for `wsp --help`. */
  summary: string;
  /** `wsp <name> --help`. */
  usage: string;
  options: Options;
  run(ctx: Ctx): Promise<number>;
}

export const str = (ctx: Ctx, name: string) => {
  const v = ctx.values[name];
  return typeof v === "string" ? v : undefined;
};
export const flag = (ctx: Ctx, name: string) => ctx.values[name] === true;

/**
 * Where the user ran wsp: `INIT_CWD` when npm runs wsp itself (`npm run wsp`: npm runs scripts from the package
 * root), else the working directory. INIT_CWD alone is not enough: any npm script sets it, and a wsp started by
 * one (`"deploy": "cd site && wsp deploy"`) inherits the outer folder, which would be packed instead.
 */
export const cwdOf = (io: Io) => (io.env.INIT_CWD && io.env.npm_lifecycle_event === "wsp" ? io.env.INIT_CWD : undefined) || io.cwd || process.cwd();
export const pathFrom = (io: Io, path: string) => (isAbsolute(path) ? path : resolve(cwdOf(io), path));

/** Prints the answer: JSON with --json, else the human text. */
export function print(ctx: Ctx, json: unknown, human: string): void {
  ctx.io.out(ctx.values.json ? `${JSON.stringify(json, null, 2)}\n` : human);
}

export interface Target {
  client: Client;
  /** The saved sign-in, when the command uses it. */
  login: SavedLogin | null;
  /** The folder's link to a project on this API, if any. */
  link: FolderLink | null;
}

/**
 * The server, token and organization: --api, $WORKSPACE_API_URL, the saved sign-in's.
 * The saved token goes only to the server it was saved for, never to another --api.
 */
export async function targetOf(ctx: Ctx): Promise<Target> {
  const { io } = ctx;
  const login = await readLogin(io.env);
  const api = str(ctx, "api") ?? io.env.WORKSPACE_API_URL ?? login?.api;
  if (!api) throw new UsageError("Missing --api (or WORKSPACE_API_URL): run wsp login first, or pass --api and --token");
  try {
    new URL(api);
  } catch {
    throw new UsageError(`--api ${JSON.stringify(api)} is not a URL`);
  }
  const saved = login && apiBase(login.api) === apiBase(api) ? login : null;
  const token = str(ctx, "token") ?? io.env.WORKSPACE_TOKEN ?? saved?.token;
  if (!token) throw new UsageError(`Missing --token (or WORKSPACE_TOKEN): run wsp login${login ? ` (signed in to ${login.api}, not ${apiBase(api)})` : ""}`);
  const folderLink = await readLink(cwdOf(io));
  const link = folderLink && folderLink.api === apiBase(api) ? folderLink : null;
  const org = str(ctx, "org") ?? io.env.WORKSPACE_ORG ?? link?.orgId ?? saved?.org;
  return { client: { api, token, org }, login: saved, link };
}

/** The project a command acts on: the one named (id, name or slug), else the folder's link. */
export function projectRef(ctx: Ctx, target: Target, named: string | undefined): string {
  const ref = named ?? target.link?.projectId;
  if (!ref) throw new UsageError(`No project: name one with --project, or run wsp link in ${cwdOf(ctx.io)}`);
  return ref;
}
