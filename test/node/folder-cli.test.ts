/**
 * The `wsp deploy` command against a running self-hosted instance: through the
 * relay, and through presigned object storage (S3_* configured, where the token
 * must not reach the storage); its ignore rules; its errors; the bin itself.
 */
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, inject, it, vi } from "vitest";
import { main, USAGE } from "../../functions/cli/main";
import { listFolder } from "../../functions/cli/pack";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { startSelfHosted, type RunningServer } from "../../functions/self-hosted/start";
import { useCleanups } from "../support/cleanups";

const { cleanups, tempDir } = useCleanups("ws-cli-");
afterEach(() => {
  vi.restoreAllMocks();
});

function folder(files: Record<string, string>): string {
  const dir = tempDir("ws-cli-src-");
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), content);
  }
  return dir;
}

async function start(env: Record<string, string> = {}): Promise<{ server: RunningServer; token: string }> {
  const dir = tempDir();
  // No runner: the deployments these tests queue stay queued (the follow tests: cli-follow.test.ts).
  const server = await startSelfHosted(loadNodeConfig({ PORT: "0", LOG_LEVEL: "silent", DATA_DIR: dir, RUNNER: "off", ...env }), () => {});
  cleanups.push(() => server.close());
  return { server, token: readFileSync(join(dir, "owner-token"), "utf8").trim() };
}

/** A plain HTTP server on a free loopback port. */
async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ origin: string }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function run(argv: string[], env: Record<string, string | undefined> = {}) {
  let out = "";
  let err = "";
  const code = await main(argv, { out: (t) => (out += t), err: (t) => (err += t), env, tty: false });
  return { code, out, err };
}

const COMPOSE_APP = {
  "compose.yaml": "services:\n  web:\n    build: .\n    environment:\n      API_KEY: cli-canary-value\n  db:\n    image: postgres:16\n",
  Dockerfile: "FROM node:22\n",
  ".gitignore": "node_modules/\n*.log\n.env\n",
  ".dockerignore": "tmp/\n",
  ".env": "SECRET=do-not-upload\n",
  "debug.log": "noise",
  "node_modules/left/index.js": "x",
  "tmp/cache.bin": "x",
  "src/index.js": "console.log('hi')",
  "src/.gitignore": "generated/\n",
  "src/generated/out.js": "x",
  "src/kept.log.txt": "kept",
  ".git/HEAD": "ref: refs/heads/main\n",
};

describe("wsp deploy", () => {
  it("packs what the ignore files allow", async () => {
    const dir = folder(COMPOSE_APP);
    symlinkSync("/etc/passwd", join(dir, "link"));
    const listing = await listFolder(dir);
    expect(listing.files).toEqual([".dockerignore", ".gitignore", "Dockerfile", "compose.yaml", "src/.gitignore", "src/index.js", "src/kept.log.txt"]);
    expect(listing.skipped).toEqual(["link"]);
  });

  it("deploys through the relay, then updates the same project", async () => {
    const { server, token } = await start();
    const dir = folder(COMPOSE_APP);
    const first = await run(["deploy", dir, "--api", server.url, "--name", "Compose app", "--no-wait"], { WORKSPACE_TOKEN: token });
    expect(first.err).toMatch(/Packed 7 files into \d+ B\n/);
    expect(first.err).toMatch(/Uploading \[#+\] 100%/);
    expect(first.err).toMatch(/Detected Docker Compose, 2 services\n/);
    expect(first.code, first.err).toBe(0);
    expect(first.out).toMatch(/^Created project Compose app \(prj_[0-9a-z]+\)/);
    expect(first.out).toMatch(/services {4}web, db/);
    expect(first.out + first.err).not.toContain("cli-canary-value");
    const id = /\((prj_[0-9a-z]+)\)/.exec(first.out)![1]!;

    writeFileSync(join(dir, "compose.yaml"), "services:\n  web:\n    build: .\n");
    const second = await run(["deploy", dir, "--api", `${server.url}/api`, "--token", token, "--project", id, "--json", "--no-wait"]);
    expect(second.code, second.err).toBe(0);
    const project = JSON.parse(second.out);
    expect(project).toMatchObject({ id, name: "Compose app", gitProvider: "upload", framework: "compose", services: [{ name: "web" }] });
    expect(project.deployment).toMatchObject({ projectId: id, status: "queued", source: "upload" });

    const list = await (await fetch(`${server.url}/api/projects`, { headers: { authorization: `Bearer ${token}` } })).json();
    expect(list.items).toHaveLength(1);
  }, 60_000);

  it("deploys to presigned object storage without sending the token there", async () => {
    const { server, token } = await start({
      S3_ENDPOINT: inject("s3Endpoint"),
      S3_BUCKET: inject("s3Bucket"),
      S3_ACCESS_KEY_ID: inject("s3AccessKeyId"),
      S3_SECRET_ACCESS_KEY: inject("s3SecretAccessKey"),
    });
    const seen: Array<{ url: string; method: string; authorization: string | null }> = [];
    const realFetch = globalThis.fetch;
    vi.spyOn(globalThis, "fetch").mockImplementation((input, init) => {
      seen.push({ url: String(input), method: init?.method ?? "GET", authorization: new Headers(init?.headers).get("authorization") });
      return realFetch(input, init);
    });
    const dir = folder({ "go.mod": "module example.com/svc\n\nrequire github.com/go-chi/chi/v5 v5.0.12\n", "main.go": "package main\n" });
    const result = await run(["deploy", dir, "--api", server.url, "--no-wait"], { WORKSPACE_TOKEN: token });
    expect(result.code, result.err).toBe(0);
    expect(result.out).toMatch(/framework {3}chi/);
    expect(result.err).toMatch(/Detected chi \(Go\)\n/);
    // (The server's own requests to the bucket go through this process's fetch too: its reads, and the copy to the
    // deployment's artifact, a PUT under artifacts/; the other PUT is the client's.)
    const puts = seen.filter((s) => s.url.startsWith(inject("s3Endpoint")) && s.method === "PUT" && !s.url.includes("/artifacts/"));
    expect(puts.map((s) => s.authorization)).toEqual([null]);
    expect(seen.filter((s) => s.method === "PUT" && s.url.includes("/artifacts/"))).toHaveLength(1);
    expect(seen.filter((s) => s.url.startsWith(server.url)).every((s) => s.authorization === `Bearer ${token}`)).toBe(true);
  }, 60_000);

  it("reports usage and API errors", async () => {
    expect(await run([])).toMatchObject({ code: 2, err: USAGE });
    expect(await run(["--help"])).toMatchObject({ code: 0, out: USAGE });
    expect((await run(["deploy", "."])).err).toMatch(/Missing --api/);
    expect((await run(["deploy", ".", "--api", "http://127.0.0.1:59999"])).err).toMatch(/Missing --token/);
    expect((await run(["ship", "."], { WORKSPACE_API_URL: "http://x", WORKSPACE_TOKEN: "t" })).code).toBe(2);
    expect((await run(["deploy", "/does/not/exist", "--api", "http://127.0.0.1:59999", "--token", "t"])).err).toMatch(/is not a folder/);
    expect((await run(["logs", "x", "--limit", "0", "--api", "http://x", "--token", "t"])).code).toBe(2);

    const { server, token } = await start();
    const empty = folder({ ".gitignore": "*\n" });
    expect((await run(["deploy", empty, "--api", server.url, "--token", token])).err).toMatch(/no files to deploy/);
    const bad = await run(["deploy", folder({ "index.html": "<p>" }), "--api", server.url, "--token", `wsp_${"x".repeat(43)}`]);
    expect(bad).toMatchObject({ code: 1 });
    expect(bad.err).toBe(`Error: The API at ${server.url} refused the token (401): check --token or WORKSPACE_TOKEN\n`);
    const unreachable = await run(["deploy", folder({ "index.html": "<p>" }), "--api", "http://127.0.0.1:59999", "--token", "t"]);
    expect(unreachable.err).toMatch(/Error: GET \/api\/me: .*ECONNREFUSED/);
  }, 60_000);

  it("refuses to send its token to a relay absoluteUrl outside the API's origin", async () => {
    // A fake API whose session points the relay at another origin (a forged Host, a stale PUBLIC_URL).
    const foreignHits: Array<{ url: string; authorization: string | null }> = [];
    const foreign = await listen((req, res) => {
      foreignHits.push({ url: req.url ?? "", authorization: req.headers.authorization ?? null });
      req.resume();
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
    const apiHits: string[] = [];
    let absoluteUrl = "";
    const api = await listen((req, res) => {
      apiHits.push(`${req.method} ${req.url}`);
      req.resume();
      if (req.url === "/api/me") {
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ activeOrganizationId: "org_fake" }));
        return;
      }
      const sessionId = "ups_0000000000000000000000test";
      const url = `/api/projects/folder/upload/${sessionId}`;
      res.writeHead(201, { "content-type": "application/json" }).end(
        JSON.stringify({
          sessionId,
          url,
          absoluteUrl: absoluteUrl + url,
          method: "POST",
          headers: { "Content-Type": "application/gzip" },
          requiresAuth: true,
          expiresAt: new Date().toISOString(),
          maxBytes: 1,
        }),
      );
    });
    const token = `wsp_${"t".repeat(43)}`;
    for (const base of [foreign.origin, `http://localhost:${new URL(api.origin).port}`, "http://[::1]:9"]) {
      absoluteUrl = base;
      const result = await run(["deploy", folder({ "index.html": "<p>hi</p>" }), "--api", api.origin], { WORKSPACE_TOKEN: token });
      expect(result.code, base).toBe(1);
      expect(result.err).toContain(`Error: The upload target ${new URL(base).origin} is not the API's origin ${api.origin}; refusing to send the token there.`);
      expect(result.err).not.toContain(token);
    }
    expect(foreignHits).toEqual([]);
    expect(apiHits).toEqual(Array(3).fill(["GET /api/me", "POST /api/projects/folder/session"]).flat());
  });

  it("the bin runs as a command", async () => {
    const { server, token } = await start();
    const dir = folder({ "requirements.txt": "django\n", "manage.py": "" });
    const child = spawn(process.execPath, [join(process.cwd(), "functions/cli/wsp.mjs"), "deploy", dir, "--api", server.url, "--no-wait"], {
      env: { ...process.env, WORKSPACE_TOKEN: token },
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(code, err).toBe(0);
    expect(out).toMatch(/framework {3}django/);
    expect(out).toMatch(/Deployment dpl_[0-9a-z]+ is queued\. Follow its build with: wsp logs prj_[0-9a-z]+ --deployment dpl_[0-9a-z]+ --follow/);
    expect(out).not.toContain("Start the first build");
    expect(err).toMatch(/Detected Django \(Python, pip\)\n/);
  }, 60_000);
});

describe("wsp installed for use anywhere", () => {
  /** Runs a command to its end; its output and exit code. */
  function exec(command: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }) {
    const child = spawn(command, args, options);
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    return new Promise<{ code: number | null; out: string; err: string }>((resolve) => child.on("close", (code) => resolve({ code, out, err })));
  }

  it("`npm install -g <repository>` links a wsp that runs from another folder, on this Node and the machine's", async () => {
    const { existsSync } = await import("node:fs");
    const prefix = tempDir("ws-cli-prefix-");
    const elsewhere = tempDir("ws-cli-cwd-");
    // What the README says, into a private prefix; scripts skipped: the CLI needs no build.
    const install = await exec("npm", ["install", "-g", "--offline", "--ignore-scripts", "--no-audit", "--no-fund", "--prefix", prefix, process.cwd()], {
      cwd: elsewhere,
      env: process.env,
    });
    expect(install.code, install.err).toBe(0);
    // The bin's `#!/usr/bin/env node` picks the first node on PATH: the project's Node 24, then a system node if there is one.
    const nodeDirs = new Set([dirname(process.execPath), "/usr/bin", "/usr/local/bin"].filter((d) => existsSync(join(d, "node"))));
    for (const nodeDir of nodeDirs) {
      const help = await exec(join(prefix, "bin", "wsp"), ["--help"], { cwd: elsewhere, env: { ...process.env, PATH: `${nodeDir}:/usr/bin:/bin` } });
      expect(help.code, `${nodeDir}/node: ${help.err}`).toBe(0);
      expect(help.out).toBe(USAGE);
    }
  }, 60_000);
});
