/**
 * `deploy <folder>`: the spec's folder-upload flow from a terminal. Packs the
 * folder, opens a session, uploads the tarball to the session's target with a
 * progress bar (the bearer token only when the target is the API's own relay,
 * at the API's own origin), scans it, and ensures the project from the scan.
 */
import { createReadStream } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { Readable } from "node:stream";
import { MAX_UPLOAD_BYTES } from "../../shared/storage/limits";
import { listFolder, packFolder } from "./pack";
import { progressBar } from "./progress";

export interface DeployOptions {
  folder: string;
  /** The API base URL (`{base_url}`; a trailing `/api` is accepted too). */
  api: string;
  token: string;
  org?: string;
  name?: string;
  projectId?: string;
  /** Progress and messages (stderr in the command). */
  log: (text: string) => void;
  /** Draw the progress bar in place (a terminal). */
  tty?: boolean;
}

export class CliError extends Error {}

interface Target {
  sessionId: string;
  url: string;
  absoluteUrl: string;
  method: string;
  headers: Record<string, string>;
  requiresAuth: boolean;
}

const mb = (n: number) => `${(n / 1_000_000).toFixed(1)} MB`;

function apiBase(api: string): string {
  const url = new URL(api);
  url.pathname = url.pathname.replace(/\/+$/, "").replace(/\/api$/, "");
  return url.toString().replace(/\/+$/, "");
}

async function call<T>(opts: DeployOptions, path: string, body: unknown): Promise<{ status: number; body: T }> {
  const headers: Record<string, string> = { authorization: `Bearer ${opts.token}` };
  if (opts.org) headers["x-organization-id"] = opts.org;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${apiBase(opts.api)}${path}`, { method: "POST", headers, body: body === undefined ? undefined : JSON.stringify(body) }).catch(
    (e) => {
      throw new CliError(`POST ${path}: ${e instanceof Error ? (e.cause instanceof Error ? e.cause.message : e.message) : String(e)}`);
    },
  );
  const text = await res.text();
  const parsed = text ? JSON.parse(text) : undefined;
  if (!res.ok) {
    const field = parsed?.field ? ` (${parsed.field})` : "";
    const retry = res.status === 429 && res.headers.get("retry-after") ? ` (retry in ${res.headers.get("retry-after")} s)` : "";
    throw new CliError(`POST ${path}: ${res.status} ${parsed?.detail ?? parsed?.title ?? text.slice(0, 200)}${field}${retry}`);
  }
  return { status: res.status, body: parsed as T };
}

/**
 * The relay's absoluteUrl is built from PUBLIC_URL, or else from the Host the
 * session request reached: a token is only ever sent back to the API's own origin.
 */
function checkRelayOrigin(opts: DeployOptions, target: Target): void {
  const api = new URL(apiBase(opts.api)).origin;
  let origin: string;
  try {
    origin = new URL(target.absoluteUrl).origin;
  } catch {
    throw new CliError(`The upload target ${JSON.stringify(target.absoluteUrl.slice(0, 200))} is not a URL`);
  }
  if (origin !== api) {
    throw new CliError(
      `The upload target ${origin} is not the API's origin ${api}; refusing to send the token there. ` +
        "If the instance's PUBLIC_URL is that address, pass it as --api.",
    );
  }
}

async function upload(opts: DeployOptions, target: Target, file: string, size: number): Promise<void> {
  // Rule 8: absoluteUrl as is, with the target's headers; our token only for the API's own relay.
  const headers: Record<string, string> = { ...target.headers, "Content-Length": String(size) };
  if (target.requiresAuth) {
    checkRelayOrigin(opts, target);
    headers.Authorization = `Bearer ${opts.token}`;
    if (opts.org) headers["X-Organization-Id"] = opts.org;
  }
  const bar = progressBar(size, opts.log, opts.tty ?? false);
  let sent = 0;
  const source = createReadStream(file, { highWaterMark: 256 * 1024 });
  source.on("data", (chunk) => {
    sent += chunk.length;
    bar.update(sent);
  });
  const res = await fetch(target.absoluteUrl, {
    method: target.method,
    headers,
    body: Readable.toWeb(source) as ReadableStream,
    duplex: "half",
  } as RequestInit).catch((e) => {
    throw new CliError(`Upload failed: ${e instanceof Error ? (e.cause instanceof Error ? e.cause.message : e.message) : String(e)}`);
  });
  const text = await res.text();
  bar.done();
  if (!res.ok) {
    const detail = (() => {
      try {
        return JSON.parse(text).detail as string;
      } catch {
        return /<Message>([^<]{1,200})<\/Message>/.exec(text)?.[1] ?? text.slice(0, 200);
      }
    })();
    throw new CliError(`Upload to ${target.requiresAuth ? "the relay" : "object storage"} failed: ${res.status} ${detail}`);
  }
}

/** The scan's answer, as far as the CLI reads it (the rest is passed on to ensure as it came). */
interface ScanAnswer extends Record<string, unknown> {
  stack: string;
  framework: string | null;
  services: unknown[] | null;
}

/** The ensured project, as far as the summary reads it. */
interface EnsuredAnswer extends Record<string, unknown> {
  id: string;
  name: string;
  framework: string | null;
  buildCommand: string | null;
  status: string;
  routes: { free: { hostname: string; state: string } };
  services: Array<{ name: string }>;
  uploadSessionId: string | null;
}

export interface DeployResult {
  project: EnsuredAnswer;
  scan: ScanAnswer;
  created: boolean;
  files: number;
  tarballBytes: number;
}

export async function deploy(opts: DeployOptions): Promise<DeployResult> {
  const folder = resolve(opts.folder);
  const info = await stat(folder).catch(() => null);
  if (!info?.isDirectory()) throw new CliError(`${opts.folder} is not a folder`);

  const listing = await listFolder(folder);
  if (listing.files.length === 0) throw new CliError(`${opts.folder} has no files to deploy (after its ignore files)`);
  for (const skipped of listing.skipped) opts.log(`Skipping ${skipped} (links and special files are not uploaded)\n`);

  const work = await mkdtemp(join(tmpdir(), "wsp-deploy-"));
  try {
    const tarball = join(work, "folder.tar.gz");
    await packFolder(folder, tarball, listing);
    const size = (await stat(tarball)).size;
    opts.log(`Packed ${listing.files.length} files into ${mb(size)}\n`);
    if (size > MAX_UPLOAD_BYTES)
      throw new CliError(`The tarball is ${mb(size)}; the limit is ${mb(MAX_UPLOAD_BYTES)}. Add what is not needed to .gitignore or .dockerignore.`);

    const name = opts.name ?? basename(folder);
    const { body: target } = await call<Target>(opts, "/api/projects/folder/session", { name: name.slice(0, 255), sizeBytes: size });
    await upload(opts, target, tarball, size);
    const { body: scan } = await call<ScanAnswer>(opts, `/api/projects/folder/scan/${target.sessionId}`, undefined);
    opts.log(`Detected ${scan.stack} (${scan.framework})${scan.services ? `, ${scan.services.length} services` : ""}\n`);

    const fromScan = Object.fromEntries(
      (["framework", "buildCommand", "installCommand", "startCommand", "outputDirectory", "services"] as const)
        .filter((k) => scan[k] !== null && scan[k] !== undefined)
        .map((k) => [k, scan[k]]),
    );
    const ensured = await call<EnsuredAnswer>(opts, "/api/projects/ensure", {
      name,
      gitProvider: "upload",
      uploadSessionId: target.sessionId,
      ...(opts.projectId ? { projectId: opts.projectId } : {}),
      ...fromScan,
    });
    return { project: ensured.body, scan, created: ensured.status === 201, files: listing.files.length, tarballBytes: size };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** The human summary of a deploy. */
export function summary(result: DeployResult): string {
  const p = result.project;
  const lines = [
    `${result.created ? "Created" : "Updated"} project ${p.name} (${p.id})`,
    `  framework   ${p.framework}`,
    ...(p.buildCommand ? [`  build       ${p.buildCommand}`] : []),
    `  route       https://${p.routes.free.hostname} (${p.routes.free.state})`,
    `  status      ${p.status}`,
    ...(p.services.length ? [`  services    ${p.services.map((s) => s.name).join(", ")}`] : []),
    `  upload      ${p.uploadSessionId}`,
    "Start the first build with POST /api/deployments.",
  ];
  return `${lines.join("\n")}\n`;
}
