#!/usr/bin/env node
/**
 * A git host on this machine for trying push-to-deploy without GitHub or Gitea:
 * git's own smart-HTTP server (`git http-backend`, run once per request) over the
 * bare repositories under one folder, on 127.0.0.1 only.
 *
 *   node docs/examples/git-host.mjs ~/git        # http://127.0.0.1:8790/<owner>/<repo>.git
 *
 * GIT_HOST_PORT picks another port. Pushes are accepted from anyone who can reach
 * the port (it listens on loopback only), so keep it for local trials. A push runs
 * the repository's own hooks: docs/examples/post-receive calls the service's push
 * webhook the way a Gitea host does.
 */
import { spawn } from "node:child_process";
import { mkdirSync, realpathSync } from "node:fs";
import http from "node:http";
import { resolve } from "node:path";

const root = resolve(process.argv[2] ?? "git");
mkdirSync(root, { recursive: true });
const projects = realpathSync(root);
const port = Number(process.env.GIT_HOST_PORT ?? 8790);

/** The CGI answer's head (`Status:` and headers up to a blank line), or null while incomplete. */
function cgiHead(buffer) {
  const text = buffer.toString("latin1");
  const end = text.search(/\r?\n\r?\n/);
  if (end < 0) return null;
  let status = 200;
  const headers = [];
  for (const line of text.slice(0, end).split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === "status") status = Number.parseInt(value, 10) || 200;
    else headers.push([name, value]);
  }
  const bodyStart = end + (text.slice(end).match(/^\r?\n\r?\n/)?.[0].length ?? 2);
  return { status, headers, bodyStart };
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url ?? "/", "http://localhost");
  const env = {
    PATH: process.env.PATH,
    GIT_PROJECT_ROOT: projects,
    GIT_HTTP_EXPORT_ALL: "1",
    // A named user enables `git push` (receive-pack) without per-repository configuration.
    REMOTE_USER: "local",
    PATH_INFO: decodeURIComponent(url.pathname),
    QUERY_STRING: url.search.slice(1),
    REQUEST_METHOD: req.method ?? "GET",
    CONTENT_TYPE: req.headers["content-type"] ?? "",
    REMOTE_ADDR: req.socket.remoteAddress ?? "127.0.0.1",
    ...(req.headers["content-length"] ? { CONTENT_LENGTH: req.headers["content-length"] } : {}),
    ...(req.headers["content-encoding"] ? { HTTP_CONTENT_ENCODING: req.headers["content-encoding"] } : {}),
    ...(typeof req.headers["git-protocol"] === "string" ? { GIT_PROTOCOL: req.headers["git-protocol"] } : {}),
  };
  const child = spawn("git", ["http-backend"], { env, stdio: ["pipe", "pipe", "inherit"] });
  req.pipe(child.stdin);
  child.stdin.on("error", () => {});
  let head = Buffer.alloc(0);
  let started = false;
  child.stdout.on("data", (chunk) => {
    if (started) return void res.write(chunk);
    head = Buffer.concat([head, chunk]);
    const parsed = cgiHead(head);
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
});

server.listen(port, "127.0.0.1", () => {
  console.log(`git host: http://127.0.0.1:${port}/<owner>/<repo>.git, repositories under ${projects}`);
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => server.close(() => process.exit(0)));
