/**
 * `deploy <folder>`: the spec's folder-upload flow from a terminal. Checks the
 * token first (GET /api/me), packs the folder, opens a session, uploads the
 * tarball to the session's target with a progress bar (the bearer token only when
 * the target is the API's own relay, at the API's own origin), scans it, ensures
 * the project, queues its build (POST /api/deployments/build/access) and follows
 * the build log to its end with the returned read-only session token. The folder
 * remembers its project in `.wsp/project.json` (link.ts). A project with a linked
 * git repository is deployed from its host instead (deployGit), with the local git
 * credential when Settings' forwardGitToServer is on.
 */
import { createReadStream } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { Readable } from "node:stream";
import { MAX_UPLOAD_BYTES } from "../../shared/storage/limits";
import { ApiCallError, apiBase, CliError, call, checkToken, type Client, reasonOf } from "./api";
import { detectedLine } from "./detected";
import { type LocalGitCredential, readGitCredential } from "./git-credential";
import { type FolderLink, LINK_FILE, readLink, writeLink } from "./link";
import { listFolder, packFolder } from "./pack";
import { humanSize, progressBar } from "./progress";
import { follow, type LogLine, type StreamEnd } from "./sse";

export { CliError };

export interface DeployOptions extends Client {
  folder: string;
  name?: string;
  projectId?: string;
  environment?: string;
  /** Return once the build is queued instead of following it. */
  noWait?: boolean;
  /** Progress and messages (stderr in the command). */
  log: (text: string) => void;
  /** The build log's lines (stdout in the command). */
  line?: (line: LogLine) => void;
  /** Draw the progress bar in place (a terminal). */
  tty?: boolean;
  /** Reconnection timing of the build log stream (tests). */
  follow?: { retryMs?: number; idleMs?: number };
  /** The environment `git credential fill` runs in (a git project's deploy with forwardGitToServer on); default: this process's. */
  gitEnv?: NodeJS.ProcessEnv;
}

interface Target {
  sessionId: string;
  url: string;
  absoluteUrl: string;
  method: string;
  headers: Record<string, string>;
  requiresAuth: boolean;
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

async function upload(opts: DeployOptions, client: Client, target: Target, file: string, size: number): Promise<void> {
  // Rule 8: absoluteUrl as is, with the target's headers; our token only for the API's own relay.
  const headers: Record<string, string> = { ...target.headers, "Content-Length": String(size) };
  if (target.requiresAuth) {
    checkRelayOrigin(opts, target);
    headers.Authorization = `Bearer ${client.token}`;
    if (client.org) headers["X-Organization-Id"] = client.org;
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
    throw new CliError(`Upload failed: ${reasonOf(e)}`);
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
  packageManager: string | null;
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
  services?: Array<{ name: string }>;
  uploadSessionId?: string | null;
}

export interface DeploymentAnswer extends Record<string, unknown> {
  id: string;
  environment: string;
  status: string;
  failureReason: string | null;
}

interface BuildAccessAnswer {
  deployment: DeploymentAnswer;
  session: { token: string; expiresAt: string };
}

export interface DeployResult {
  project: EnsuredAnswer;
  /** null: a git project's deploy (nothing uploaded or scanned). */
  scan: ScanAnswer | null;
  created: boolean;
  files: number;
  tarballBytes: number;
  deployment: DeploymentAnswer;
  /** How the build ended (null with noWait). */
  end: StreamEnd | null;
  /** Set when this deploy wrote the folder's link (its first deploy to this API). */
  linked: boolean;
}

/** The project this deploy updates: --project, else the folder's link to this API (and organization); undefined: a new one. */
function targetOf(opts: DeployOptions, link: FolderLink | null): { projectId?: string; fromLink: boolean } {
  if (opts.projectId) return { projectId: opts.projectId, fromLink: false };
  if (link && link.api === apiBase(opts.api) && (!opts.org || opts.org === link.orgId)) return { projectId: link.projectId, fromLink: true };
  return { fromLink: false };
}

export async function deploy(opts: DeployOptions): Promise<DeployResult> {
  const folder = resolve(opts.folder);
  const info = await stat(folder).catch(() => null);
  if (!info?.isDirectory()) throw new CliError(`${opts.folder} is not a folder`);
  const link = await readLink(folder);
  const target = targetOf(opts, link);
  const client: Client = { api: opts.api, token: opts.token, org: opts.org ?? (target.fromLink ? link!.orgId : undefined) };

  // The token first: a wrong one fails now, before the folder is read or packed.
  const { orgId } = await checkToken(client);

  let existing: (EnsuredAnswer & { gitProvider?: string | null }) | undefined;
  if (target.projectId) {
    try {
      existing = (await call<EnsuredAnswer & { gitProvider?: string | null }>(client, "GET", `/api/projects/${encodeURIComponent(target.projectId)}`)).body;
    } catch (e) {
      if (target.fromLink && e instanceof ApiCallError && e.status === 404) {
        throw new CliError(
          `This folder is linked to project ${target.projectId} (${LINK_FILE}), which no longer exists or is not yours: delete ${LINK_FILE} to deploy the folder as a new project`,
        );
      }
      throw e;
    }
    if (target.fromLink) opts.log(`Deploying to project ${existing.name} (${existing.id}), linked in ${LINK_FILE}\n`);
    // A project with a linked repository deploys its branch's head from the host: nothing is uploaded.
    if (existing.gitProvider && existing.gitProvider !== "upload") return deployGit(opts, client, existing);
  }

  const listing = await listFolder(folder);
  if (listing.files.length === 0) throw new CliError(`${opts.folder} has no files to deploy (after its ignore files)`);
  for (const skipped of listing.skipped) opts.log(`Skipping ${skipped} (links and special files are not uploaded)\n`);

  const work = await mkdtemp(join(tmpdir(), "wsp-deploy-"));
  try {
    const tarball = join(work, "folder.tar.gz");
    await packFolder(folder, tarball, listing);
    const size = (await stat(tarball)).size;
    opts.log(`Packed ${listing.files.length} file${listing.files.length === 1 ? "" : "s"} into ${humanSize(size)}\n`);
    if (size > MAX_UPLOAD_BYTES)
      throw new CliError(
        `The tarball is ${humanSize(size)}; the limit is ${humanSize(MAX_UPLOAD_BYTES)}. Add what is not needed to .gitignore or .dockerignore.`,
      );

    // An existing project keeps its name unless --name is given.
    const name = opts.name ?? existing?.name ?? basename(folder);
    const { body: session } = await call<Target>(client, "POST", "/api/projects/folder/session", { body: { name: name.slice(0, 255), sizeBytes: size } });
    await upload(opts, client, session, tarball, size);
    const { body: scan } = await call<ScanAnswer>(client, "POST", `/api/projects/folder/scan/${session.sessionId}`);
    opts.log(`${detectedLine(scan)}\n`);

    const fromScan = Object.fromEntries(
      (["framework", "buildCommand", "installCommand", "startCommand", "outputDirectory", "services"] as const)
        .filter((k) => scan[k] !== null && scan[k] !== undefined)
        .map((k) => [k, scan[k]]),
    );
    const ensured = await call<EnsuredAnswer>(client, "POST", "/api/projects/ensure", {
      body: {
        name,
        gitProvider: "upload",
        uploadSessionId: session.sessionId,
        ...(existing ? { projectId: existing.id } : {}),
        ...fromScan,
      },
    });
    const project = ensured.body;

    const linked = !link || link.projectId !== project.id || link.api !== apiBase(opts.api) || link.orgId !== orgId;
    if (linked) {
      await writeLink(folder, { projectId: project.id, orgId, api: apiBase(opts.api) });
      opts.log(
        `Linked this folder to project ${project.name} (${project.id}) in ${LINK_FILE}: the next wsp deploy of this folder updates this project (delete ${LINK_FILE} to deploy it as a new one)\n`,
      );
    }

    const { body: access } = await call<BuildAccessAnswer>(client, "POST", "/api/deployments/build/access", {
      body: { projectId: project.id, uploadSessionId: session.sessionId, ...(opts.environment ? { environment: opts.environment } : {}) },
    });
    const deployment = access.deployment;
    opts.log(`Queued deployment ${deployment.id} (${deployment.environment})\n`);
    const result = { project, scan, created: ensured.status === 201, files: listing.files.length, tarballBytes: size, deployment, linked };
    if (opts.noWait) return { ...result, end: null };

    let token = access.session.token;
    const end = await follow({
      url: `${apiBase(opts.api)}/api/deployments/${deployment.id}/logs/stream`,
      token: () => token,
      refresh: async () => {
        token = (await call<{ token: string }>(client, "POST", `/api/projects/${project.id}/deployment-session`)).body.token;
      },
      onLine: (l) => (opts.line ?? ((x: LogLine) => opts.log(`${x.message}\n`)))(l),
      note: opts.log,
      ...opts.follow,
    });
    return { ...result, end: end ?? null };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * A git project's deploy: POST /api/deployments, then the build log followed. With the
 * caller's Settings `forwardGitToServer` on, the local git credential for the repository's
 * host (git-credential.ts, never prompting) goes with it as `gitCredential`: the clone uses
 * it once, and the control plane deletes it. Off: nothing is read or sent (the project's or
 * the Settings clone token is used).
 */
async function deployGit(opts: DeployOptions, client: Client, project: EnsuredAnswer): Promise<DeployResult> {
  const settings = (await call<{ forwardGitToServer?: boolean }>(client, "GET", "/api/settings")).body;
  let gitCredential: LocalGitCredential | undefined;
  if (settings.forwardGitToServer) {
    const git = (await call<{ cloneUrl: string | null }>(client, "GET", `/api/projects/${encodeURIComponent(project.id)}/git`)).body;
    const read = git.cloneUrl ? await readGitCredential(git.cloneUrl, { env: opts.gitEnv }) : { none: "the repository has no clone URL here" };
    if ("credential" in read) {
      gitCredential = read.credential;
      opts.log(`Forwarding your git credential for ${new URL(git.cloneUrl!).host} to this deployment's clone (forwardGitToServer)\n`);
    } else {
      opts.log(`Not forwarding a git credential: ${read.none}; the project's clone token is used\n`);
    }
  }
  const { body: deployment } = await call<DeploymentAnswer>(client, "POST", "/api/deployments", {
    body: { projectId: project.id, ...(opts.environment ? { environment: opts.environment } : {}), ...(gitCredential ? { gitCredential } : {}) },
  });
  gitCredential = undefined;
  opts.log(`Queued deployment ${deployment.id} (${deployment.environment}) from the project's repository\n`);
  const result = { project, scan: null, created: false, files: 0, tarballBytes: 0, deployment, linked: false };
  if (opts.noWait) return { ...result, end: null };
  const session = async () => (await call<{ token: string }>(client, "POST", `/api/projects/${project.id}/deployment-session`)).body.token;
  let token = await session();
  const end = await follow({
    url: `${apiBase(opts.api)}/api/deployments/${deployment.id}/logs/stream`,
    token: () => token,
    refresh: async () => {
      token = await session();
    },
    onLine: (l) => (opts.line ?? ((x: LogLine) => opts.log(`${x.message}\n`)))(l),
    note: opts.log,
    ...opts.follow,
  });
  return { ...result, end: end ?? null };
}

/**
 * Where the app answers: its hostname with the API's scheme and port (a
 * self-hosted edge serves apps on the API's own listener: http://app.localhost:8787
 * on a default install; behind a TLS terminator on 443 it is plain https://host).
 */
export function appUrl(hostname: string, api: string): string {
  const u = new URL(apiBase(api));
  return `${u.protocol}//${hostname}${u.port ? `:${u.port}` : ""}`;
}

/** The human summary of a deploy. */
export function summary(result: DeployResult, api: string): string {
  const p = result.project;
  const d = result.deployment;
  const route = appUrl(p.routes.free.hostname, api);
  const lines = [
    `${result.created ? "Created" : "Updated"} project ${p.name} (${p.id})`,
    `  framework   ${p.framework}`,
    ...(p.buildCommand ? [`  build       ${p.buildCommand}`] : []),
    `  route       ${route}`,
    ...(p.services?.length ? [`  services    ${p.services.map((s) => s.name).join(", ")}`] : []),
    `  deployment  ${d.id} (${d.environment})`,
  ];
  if (!result.end) {
    lines.push(
      `Deployment ${d.id} is queued. Follow its build with: wsp logs ${p.id} --deployment ${d.id} --follow`,
      `(or GET ${apiBase(api)}/api/deployments/${d.id}/logs/stream; its state: GET ${apiBase(api)}/api/deployments/${d.id})`,
    );
  } else if (result.end.status === "ready") {
    lines.push(`Deployment ${d.id} is ready: ${route}`);
  }
  return `${lines.join("\n")}\n`;
}
