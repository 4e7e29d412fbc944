/**
 * A real git host for tests: a loopback `node:http` server that runs git's own
 * smart-HTTP CGI (`git http-backend`) per request over bare repositories made
 * with real `git` commands in a temp dir.
 *
 * - Repositories live at `<url>/<owner>/<repo>.git`. A private one answers 401
 *   unless the request carries HTTP basic auth whose password or username is
 *   the test token (providers put the token in either place).
 * - `<url>/v0/<owner>/<repo>.git` serves the same repository without passing
 *   the client's `Git-Protocol` header on, so http-backend speaks protocol v0.
 * - Misbehaving hosts, for runtimes that cannot start servers (workerd):
 *   `<url>/down/...` destroys the connection without an answer (a host that is
 *   down), `/slow/...` never answers, `/endless/...` streams a ref
 *   advertisement that never ends, `/moved/...` redirects, `/html/...` answers
 *   200 with a web page.
 * - `<url>/__control/...` lets a test in workerd (which cannot run git) create a
 *   fresh repository, add a commit, or read a ref: see `handleControl`.
 *
 * Node tests start one directly (`startGitServer()`); both test projects get a
 * shared one from test/setup/git.ts through `inject("gitServerUrl")`.
 */
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import type { TestRepo } from "./git-control";

export type { TestRepo };

const run = promisify(execFile);

export const GIT_TEST_TOKEN = "glpat-test-clone-token-6f1d2c";
export const GIT_HTTP_BACKEND = "/usr/lib/git-core/git-http-backend";

/** The template every repository is cloned from: default branch `trunk`, and `main` that is NOT the default. */
export const TEMPLATE_BRANCHES = ["trunk", "main", "feature/login", "release-1.0"] as const;
export const TEMPLATE_DEFAULT_BRANCH = "trunk";

export interface GitTestServer {
  /** `http://127.0.0.1:<port>` */
  url: string;
  token: string;
  root: string;
  /** A fresh bare repository cloned from the template (unique name unless given). */
  createRepo(options?: { owner?: string; repo?: string; private?: boolean }): Promise<TestRepo>;
  /** Adds an empty commit to `branch` (created from trunk when missing); returns its SHA. */
  addCommit(owner: string, repo: string, branch: string, message?: string): Promise<string>;
  revParse(owner: string, repo: string, ref: string): Promise<string>;
  /** Requests served since the start (or the last reset), control requests excluded. */
  requestCount(): number;
  resetRequestCount(): void;
  /** Closes the listener and drops open connections: the host is down until `start()`. */
  stop(): Promise<void>;
  /** Listens again on the same port. */
  start(): Promise<void>;
  close(): Promise<void>;
}

/** Git's identity for the commits tests make, with no system or user git config. */
export const GIT_ENV = {
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "Test",
  GIT_AUTHOR_EMAIL: "test@example.com",
  GIT_COMMITTER_NAME: "Test",
  GIT_COMMITTER_EMAIL: "test@example.com",
  GIT_TERMINAL_PROMPT: "0",
};

async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run("git", args, { cwd, env: { ...process.env, ...GIT_ENV } });
  return stdout.trim();
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

/** Reads a request body with a cap (the control endpoints take small JSON). */
function readBody(req: http.IncomingMessage, cap = 64 * 1024): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > cap) return reject(new Error("body too large"));
      chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/** Parses CGI output headers (`Name: value` lines up to a blank line); returns the status, headers and where the body starts. */
function parseCgiHead(buffer: Buffer): { status: number; headers: Array<[string, string]>; bodyStart: number } | null {
  let end = buffer.indexOf("\r\n\r\n");
  let sepLength = 4;
  const lf = buffer.indexOf("\n\n");
  if (lf >= 0 && (end < 0 || lf < end)) {
    end = lf;
    sepLength = 2;
  }
  if (end < 0) return null;
  let status = 200;
  const headers: Array<[string, string]> = [];
  for (const line of buffer.subarray(0, end).toString("latin1").split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === "status") status = Number.parseInt(value, 10) || 200;
    else headers.push([name, value]);
  }
  return { status, headers, bodyStart: end + sepLength };
}

function authorized(header: string | undefined, token: string): string | null {
  if (!header?.startsWith("Basic ")) return null;
  const decoded = Buffer.from(header.slice(6), "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  const user = colon >= 0 ? decoded.slice(0, colon) : decoded;
  const password = colon >= 0 ? decoded.slice(colon + 1) : "";
  return password === token || user === token ? user || "token" : null;
}

export async function startGitServer(options: { token?: string } = {}): Promise<GitTestServer> {
  const token = options.token ?? GIT_TEST_TOKEN;
  const root = mkdtempSync(join(tmpdir(), "ws-git-"));
  const projects = join(root, "repos");
  const template = join(root, "template");
  const work = join(root, "work");
  const privateRepos = new Set<string>();
  let requests = 0;
  let counter = 0;

  // The template: a few commits, four branches, a tag, HEAD on trunk.
  await run("mkdir", ["-p", projects, work]);
  await git(root, "init", "--quiet", "--initial-branch", TEMPLATE_DEFAULT_BRANCH, template);
  await git(template, "commit", "--quiet", "--allow-empty", "-m", "initial commit");
  await git(template, "tag", "-a", "v1.0", "-m", "first release");
  for (const branch of TEMPLATE_BRANCHES.slice(1)) {
    await git(template, "checkout", "--quiet", "-b", branch, TEMPLATE_DEFAULT_BRANCH);
    await git(template, "commit", "--quiet", "--allow-empty", "-m", `work on ${branch}`);
  }
  await git(template, "checkout", "--quiet", TEMPLATE_DEFAULT_BRANCH);
  await git(template, "commit", "--quiet", "--allow-empty", "-m", "second commit on trunk");

  const repoDir = (owner: string, repo: string) => join(projects, owner, `${repo}.git`);

  async function revParse(owner: string, repo: string, ref: string): Promise<string> {
    return git(repoDir(owner, repo), "rev-parse", `${ref}^{commit}`);
  }

  async function createRepo(opts: { owner?: string; repo?: string; private?: boolean } = {}): Promise<TestRepo> {
    const owner = opts.owner ?? "acme";
    const repo = opts.repo ?? `${opts.private ? "private" : "public"}-${process.pid}-${++counter}-${Date.now().toString(36)}`;
    if (!NAME.test(owner) || !NAME.test(repo)) throw new Error("bad repository name");
    const dir = repoDir(owner, repo);
    await git(root, "clone", "--quiet", "--bare", "--no-local", template, dir);
    // A bare clone copies every branch and the tag, and points HEAD where the template's does (trunk).
    if (opts.private) privateRepos.add(`${owner}/${repo}`);
    const branches: Record<string, string> = {};
    for (const branch of TEMPLATE_BRANCHES) branches[branch] = await revParse(owner, repo, `refs/heads/${branch}`);
    return { owner, repo, private: !!opts.private, url: `${state.url}/${owner}/${repo}.git`, branches };
  }

  async function addCommit(owner: string, repo: string, branch: string, message = "a new commit"): Promise<string> {
    const dir = repoDir(owner, repo);
    const parentRef = (await git(dir, "for-each-ref", `refs/heads/${branch}`)) ? `refs/heads/${branch}` : `refs/heads/${TEMPLATE_DEFAULT_BRANCH}`;
    const parent = await git(dir, "rev-parse", parentRef);
    const tree = await git(dir, "rev-parse", `${parent}^{tree}`);
    const commit = await git(dir, "commit-tree", tree, "-p", parent, "-m", message);
    await git(dir, "update-ref", `refs/heads/${branch}`, commit);
    return commit;
  }

  async function handleControl(req: http.IncomingMessage, res: http.ServerResponse, path: string) {
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    try {
      const input = req.method === "POST" ? JSON.parse((await readBody(req)).toString("utf8") || "{}") : {};
      const query = new URL(path, "http://x").searchParams;
      if (path === "/__control/repos" && req.method === "POST") return reply(201, await createRepo(input));
      if (path === "/__control/commits" && req.method === "POST") {
        return reply(201, { sha: await addCommit(String(input.owner), String(input.repo), String(input.branch), input.message) });
      }
      if (path.startsWith("/__control/rev-parse?")) {
        return reply(200, { sha: await revParse(query.get("owner") ?? "", query.get("repo") ?? "", query.get("ref") ?? "") });
      }
      reply(404, { error: "unknown control endpoint" });
    } catch (e) {
      reply(400, { error: e instanceof Error ? e.message : String(e) });
    }
  }

  function handleGit(req: http.IncomingMessage, res: http.ServerResponse, rawPath: string) {
    requests++;
    const question = rawPath.indexOf("?");
    let pathInfo = decodeURIComponent(question >= 0 ? rawPath.slice(0, question) : rawPath);
    const query = question >= 0 ? rawPath.slice(question + 1) : "";
    let protocol = req.headers["git-protocol"];
    if (pathInfo.startsWith("/v0/")) {
      pathInfo = pathInfo.slice(3);
      protocol = undefined;
    }
    if (pathInfo.includes("..")) {
      res.writeHead(400).end();
      return;
    }
    const repoKey = /^\/([^/]+)\/([^/]+)\.git\//.exec(pathInfo);
    let remoteUser: string | null = null;
    if (repoKey && privateRepos.has(`${repoKey[1]}/${repoKey[2]}`)) {
      remoteUser = authorized(req.headers.authorization, token);
      if (!remoteUser) {
        res.writeHead(401, { "www-authenticate": 'Basic realm="test git"', "content-type": "text/plain" });
        res.end("Authentication required\n");
        req.resume();
        return;
      }
    }
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      ...GIT_ENV,
      GIT_PROJECT_ROOT: projects,
      GIT_HTTP_EXPORT_ALL: "1",
      PATH_INFO: pathInfo,
      QUERY_STRING: query,
      REQUEST_METHOD: req.method ?? "GET",
      CONTENT_TYPE: req.headers["content-type"] ?? "",
      REMOTE_ADDR: req.socket.remoteAddress ?? "127.0.0.1",
      ...(req.headers["content-length"] ? { CONTENT_LENGTH: req.headers["content-length"] } : {}),
      ...(req.headers["content-encoding"] ? { HTTP_CONTENT_ENCODING: req.headers["content-encoding"] } : {}),
      ...(typeof protocol === "string" ? { GIT_PROTOCOL: protocol } : {}),
      ...(remoteUser ? { REMOTE_USER: remoteUser } : {}),
    };
    const child = spawn(GIT_HTTP_BACKEND, [], { env, stdio: ["pipe", "pipe", "ignore"] });
    req.pipe(child.stdin);
    child.stdin.on("error", () => {});
    let head = Buffer.alloc(0);
    let started = false;
    child.stdout.on("data", (chunk: Buffer) => {
      if (started) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const parsed = parseCgiHead(head);
      if (!parsed) return;
      started = true;
      res.writeHead(parsed.status, parsed.headers.flat());
      res.write(head.subarray(parsed.bodyStart));
    });
    child.stdout.on("end", () => {
      if (!started) res.writeHead(502);
      res.end();
    });
    child.on("error", () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
  }

  /** A v0 advertisement that never ends (one more branch per line) until the client hangs up. */
  function endlessRefs(req: http.IncomingMessage, res: http.ServerResponse) {
    requests++;
    req.resume();
    const pkt = (line: string) => `${(line.length + 4).toString(16).padStart(4, "0")}${line}`;
    const sha = "a".repeat(40);
    res.writeHead(200, { "content-type": "application/x-git-upload-pack-advertisement" });
    res.write(`${pkt("# service=git-upload-pack\n")}0000${pkt(`${sha} HEAD\0symref=HEAD:refs/heads/b0 agent=endless\n`)}`);
    let n = 0;
    let closed = false;
    res.on("close", () => {
      closed = true;
    });
    const pump = () => {
      while (!closed) {
        let chunk = "";
        for (let i = 0; i < 512; i++) chunk += pkt(`${sha} refs/heads/b${n++}\n`);
        if (!res.write(chunk)) return void res.once("drain", pump);
      }
    };
    pump();
  }

  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    const path = req.url ?? "/";
    if (path.startsWith("/__control/")) return void handleControl(req, res, path);
    if (path.startsWith("/down/")) {
      requests++;
      req.socket.destroy();
      return;
    }
    if (path.startsWith("/endless/")) return endlessRefs(req, res);
    if (path.startsWith("/slow/")) return void requests++;
    if (path.startsWith("/moved/")) {
      requests++;
      res.writeHead(301, { location: path.replace("/moved/", "/") }).end();
      return;
    }
    if (path.startsWith("/html/")) {
      requests++;
      res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>Sign in</title>\n");
      return;
    }
    handleGit(req, res, path);
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });

  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, "127.0.0.1", () => {
        server.off("error", reject);
        resolve((server.address() as AddressInfo).port);
      });
    });
  const port = await listen(0);
  const state = { url: `http://127.0.0.1:${port}` };

  const stop = () =>
    new Promise<void>((resolve) => {
      if (!server.listening) return resolve();
      server.close(() => resolve());
      for (const socket of sockets) socket.destroy();
    });

  return {
    url: state.url,
    token,
    root,
    createRepo,
    addCommit,
    revParse,
    requestCount: () => requests,
    resetRequestCount: () => {
      requests = 0;
    },
    stop,
    start: async () => {
      if (!server.listening) await listen(port);
    },
    close: async () => {
      await stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
