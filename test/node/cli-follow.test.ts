/**
 * The `wsp` CLI beyond the upload (functions/cli/): the token checked first, the
 * folder's link (.wsp/project.json), --project keeping the name, sizes and
 * detection wording, following the build log to its end (against the real log
 * stream route, with the runner's steps played through the store on the server's
 * own Postgres database, and through a proxy that cuts the stream: Last-Event-ID
 * resumes it), `wsp logs`, and the follow logic against a loopback SSE server.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, request as httpRequest, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join } from "node:path";
import { eq } from "drizzle-orm";
import { describe, expect, inject, it } from "vitest";
import { detectedLine } from "../../functions/cli/detected";
import { LINK_FILE } from "../../functions/cli/link";
import { main } from "../../functions/cli/main";
import { listFolder } from "../../functions/cli/pack";
import { humanSize } from "../../functions/cli/progress";
import { follow } from "../../functions/cli/sse";
import { markReady, markStatus } from "../../functions/deployments/store";
import { appendLogLines } from "../../functions/logs/store";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { type RunningServer, startSelfHosted } from "../../functions/self-hosted/start";
import { deployments } from "../../shared/db/schema";
import { openPostgres, type PostgresDatabase } from "../../shared/db/postgres";
import { useCleanups } from "../support/cleanups";
import { freshDatabase } from "../support/fresh-database";

const { cleanups, tempDir } = useCleanups("ws-cli-follow-");
const FAST = { retryMs: 50, idleMs: 5000 };

function folder(files: Record<string, string>): string {
  const dir = tempDir("ws-cli-src-");
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), content);
  }
  return dir;
}

/** A self-hosted server without a runner (the tests play its steps); on its own Postgres database when `postgres`. */
async function start(opts: { postgres?: boolean } = {}): Promise<{ server: RunningServer; token: string; db?: PostgresDatabase }> {
  const dir = tempDir();
  const env: Record<string, string> = { PORT: "0", LOG_LEVEL: "silent", DATA_DIR: dir, RUNNER: "off" };
  let db: PostgresDatabase | undefined;
  if (opts.postgres) {
    const own = await freshDatabase(inject("pgUrl"), "ws_cli", { migrate: true });
    cleanups.push(() => own.drop());
    env.DATABASE_URL = own.url;
    db = await openPostgres(own.url, { migrate: false, max: 2 });
    cleanups.push(() => db!.close());
  }
  const server = await startSelfHosted(loadNodeConfig(env), () => {});
  cleanups.push(() => server.close());
  return { server, token: readFileSync(join(dir, "owner-token"), "utf8").trim(), db };
}

/** Runs the command; `live()` reads what it has printed so far. */
function launch(argv: string[], env: Record<string, string | undefined> = {}, signal?: AbortSignal) {
  let out = "";
  let err = "";
  const done = main(argv, { out: (t) => (out += t), err: (t) => (err += t), env, tty: false, signal }, { follow: FAST }).then((code) => ({ code, out, err }));
  return { done, live: () => out };
}

const run = (argv: string[], env: Record<string, string | undefined> = {}) => launch(argv, env).done;

const api = (server: RunningServer, token: string, path: string, init: RequestInit = {}) =>
  fetch(`${server.url}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...init.headers } });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(probe: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error("timed out");
    await sleep(50);
  }
}

/** A loopback HTTP server; its origin. */
async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe("wsp: words and sizes", () => {
  it("sizes read as a person says them, never 0.0 MB", () => {
    expect(humanSize(0)).toBe("0 B");
    expect(humanSize(512)).toBe("512 B");
    expect(humanSize(1024)).toBe("1 KB");
    expect(humanSize(1536)).toBe("1.5 KB");
    expect(humanSize(12 * 1024)).toBe("12 KB");
    expect(humanSize(1.4 * 1024 * 1024)).toBe("1.4 MB");
    expect(humanSize(1024 * 1024 - 1)).toBe("1 MB");
    expect(humanSize(300 * 1024 * 1024)).toBe("300 MB");
    expect(humanSize(2.5 * 1024 ** 3)).toBe("2.5 GB");
  });

  it("says what was detected for every stack without repeating itself", () => {
    expect(detectedLine({ stack: "static", framework: "static", packageManager: null })).toBe("Detected static site");
    expect(detectedLine({ stack: "compose", framework: "compose", packageManager: null, services: [{}, {}] })).toBe("Detected Docker Compose, 2 services");
    expect(detectedLine({ stack: "docker", framework: "docker", packageManager: null })).toBe("Detected a Dockerfile");
    expect(detectedLine({ stack: "node", framework: "node", packageManager: "npm" })).toBe("Detected Node.js (npm)");
    expect(detectedLine({ stack: "node", framework: "nextjs", packageManager: "pnpm" })).toBe("Detected Next.js (Node.js, pnpm)");
    expect(detectedLine({ stack: "python", framework: "django", packageManager: "pip" })).toBe("Detected Django (Python, pip)");
    expect(detectedLine({ stack: "python", framework: "python", packageManager: "uv" })).toBe("Detected Python (uv)");
    expect(detectedLine({ stack: "go", framework: "chi", packageManager: "go" })).toBe("Detected chi (Go)");
    expect(detectedLine({ stack: "go", framework: "go", packageManager: "go" })).toBe("Detected Go");
    expect(detectedLine({ stack: "ruby", framework: "rails", packageManager: "bundler" })).toBe("Detected Rails (Ruby)");
    expect(detectedLine({ stack: "php", framework: "laravel", packageManager: "composer" })).toBe("Detected Laravel (PHP)");
    expect(detectedLine({ stack: "rust", framework: "actix-web", packageManager: "cargo" })).toBe("Detected Actix Web (Rust)");
    expect(detectedLine({ stack: "unknown", framework: "auto", packageManager: null })).toBe("Detected no known stack (the build step will try again)");
  });
});

describe("wsp deploy: token, link, name", () => {
  it("a wrong token fails in well under a second, before the folder is read", async () => {
    const { server } = await start();
    // A folder big enough that packing it would take a while.
    const dir = folder(Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`f/${i}.txt`, "x".repeat(4096)])));
    const started = performance.now();
    const bad = await run(["deploy", dir, "--api", server.url, "--token", `wsp_${"x".repeat(43)}`]);
    const ms = performance.now() - started;
    expect(bad.code).toBe(1);
    expect(bad.err).toBe(`Error: The API at ${server.url} refused the token (401): check --token or WORKSPACE_TOKEN\n`);
    expect(ms).toBeLessThan(1000);
  }, 60_000);

  it("links the folder on its first deploy, updates the same project on the next, never uploads the link; a stale link is a clear error", async () => {
    const { server, token } = await start();
    const dir = folder({ "index.html": "<p>hi</p>" });
    const first = await run(["deploy", dir, "--api", server.url, "--no-wait"], { WORKSPACE_TOKEN: token });
    expect(first.code, first.err).toBe(0);
    expect(first.err).toMatch(/Detected static site\n/);
    expect(first.err).toMatch(/Packed 1 file into \d+ B\n/);
    const id = /Created project .* \((prj_[0-9a-z]+)\)/.exec(first.out)![1]!;
    expect(first.err).toContain(`in ${LINK_FILE}: the next wsp deploy of this folder updates this project`);
    const link = JSON.parse(readFileSync(join(dir, LINK_FILE), "utf8"));
    const me = await (await api(server, token, "/api/me")).json();
    expect(link).toEqual({ projectId: id, orgId: me.activeOrganizationId, api: server.url });
    expect(readFileSync(join(dir, LINK_FILE), "utf8")).not.toContain(token);
    expect((await listFolder(dir)).files).toEqual(["index.html"]);

    const second = await run(["deploy", dir, "--api", `${server.url}/api/`, "--no-wait"], { WORKSPACE_TOKEN: token });
    expect(second.code, second.err).toBe(0);
    expect(second.err).toContain(`linked in ${LINK_FILE}`);
    expect(second.err).not.toContain("Linked this folder");
    expect(second.out).toMatch(new RegExp(`^Updated project .* \\(${id}\\)`));
    const list = await (await api(server, token, "/api/projects")).json();
    expect(list.items.map((p: { id: string }) => p.id)).toEqual([id]);
    expect((await (await api(server, token, `/api/projects/${id}/deployments`)).json()).items).toHaveLength(2);

    // The linked project is deleted: the next deploy says so instead of creating another.
    writeFileSync(join(dir, LINK_FILE), JSON.stringify({ ...link, projectId: "prj_00000000000000000000000000" }));
    const stale = await run(["deploy", dir, "--api", server.url, "--no-wait"], { WORKSPACE_TOKEN: token });
    expect(stale.code).toBe(1);
    expect(stale.err).toMatch(/linked to project prj_0+ \(\.wsp\/project\.json\), which no longer exists.*delete \.wsp\/project\.json/);
  }, 60_000);

  it("--project without --name keeps the project's name", async () => {
    const { server, token } = await start();
    const created = await (await api(server, token, "/api/projects", { method: "POST", body: JSON.stringify({ name: "Keep Me" }) })).json();
    const dir = folder({ "index.html": "<p>hi</p>" });
    const result = await run(["deploy", dir, "--api", server.url, "--project", created.id, "--no-wait", "--json"], { WORKSPACE_TOKEN: token });
    expect(result.code, result.err).toBe(0);
    expect(JSON.parse(result.out)).toMatchObject({ id: created.id, name: "Keep Me" });
    expect((await (await api(server, token, `/api/projects/${created.id}`)).json()).name).toBe("Keep Me");
    const renamed = await run(["deploy", dir, "--api", server.url, "--project", created.id, "--name", "New Name", "--no-wait", "--json"], {
      WORKSPACE_TOKEN: token,
    });
    expect(JSON.parse(renamed.out)).toMatchObject({ id: created.id, name: "New Name" });
  }, 60_000);
});

const postgres = it.runIf(inject("pgKind") === "postgres");

describe("wsp deploy: following the build (real log stream, runner steps played through the store)", () => {
  /** Waits for the deployment the CLI queued for the folder's project, then plays the runner on it. */
  async function queuedDeployment(db: PostgresDatabase) {
    return until(async () => (await db.db.select().from(deployments).where(eq(deployments.status, "queued")))[0]);
  }
  const build = (d: { orgId: string; projectId: string; id: string }, message: string) => ({
    orgId: d.orgId,
    projectId: d.projectId,
    deploymentId: d.id,
    kind: "build" as const,
    stream: "stdout" as const,
    at: new Date(),
    message,
  });

  postgres(
    "prints every build line once, resumes a cut stream with Last-Event-ID, exits 0 when ready",
    async () => {
      const { server, token, db } = await start({ postgres: true });
      // A proxy in front of the server that cuts the first build-log stream after two lines.
      const streamRequests: Array<{ authorization?: string; lastEventId?: string }> = [];
      const proxy = await listen((req, res) => {
        const isStream = /\/logs\/stream$/.test(req.url ?? "");
        if (isStream) streamRequests.push({ authorization: req.headers.authorization, lastEventId: req.headers["last-event-id"] as string | undefined });
        const upstream = httpRequest(`${server.url}${req.url}`, { method: req.method, headers: req.headers }, (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          if (!isStream || streamRequests.length > 1) {
            up.pipe(res);
            return;
          }
          let events = 0;
          up.on("data", (chunk: Buffer) => {
            events += chunk.toString().split("event: log").length - 1;
            if (events < 2) {
              res.write(chunk);
              return;
            }
            // Cut once what was sent has left: the client has these lines and must resume after them.
            up.pause();
            res.write(chunk, () => {
              up.destroy();
              res.destroy();
            });
          });
        });
        req.pipe(upstream);
      });
      const dir = folder({ "index.html": "<p>hi</p>" });
      const running = run(["deploy", dir, "--api", proxy], { WORKSPACE_TOKEN: token });
      const d = await queuedDeployment(db!);
      await markStatus(db!.db, d.id, "building", new Date());
      await appendLogLines(db!.db, [build(d, "step 1"), build(d, "step 2"), build(d, "\u001b[32mstep 3\u001b[0m")]);
      await until(async () => (streamRequests.length >= 2 ? true : undefined));
      await appendLogLines(db!.db, [build(d, "step 4")]);
      await markStatus(db!.db, d.id, "deploying", new Date());
      await markReady(db!.db, d.id, new Date());
      const result = await running;
      expect(result.code, result.err).toBe(0);
      expect(result.out).toContain("step 1\nstep 2\n\u001b[32mstep 3\u001b[0m\nstep 4\n");
      expect(result.out.match(/step 2/g)).toHaveLength(1);
      // The app is served on the API's own scheme and port (the self-hosted edge), not an assumed https.
      expect(result.out).toMatch(new RegExp(`Deployment ${d.id} is ready: http://[a-z0-9-]+\\.[a-z0-9.-]+:\\d+\n`));
      expect(result.err, result.err).toMatch(/The log stream dropped .*reconnecting after line \d+/);
      // The read-only session token followed it; the second request resumed after the second line.
      expect(streamRequests[0]!.authorization).toMatch(/^Bearer wsd_/);
      expect(streamRequests[1]!.lastEventId).toMatch(/^\d+$/);
      expect(result.out + result.err).not.toContain(token);
    },
    60_000,
  );

  postgres(
    "a failed build exits 1 with its reason; --no-wait returns at once; wsp logs prints and follows runtime lines",
    async () => {
      const { server, token, db } = await start({ postgres: true });
      const dir = folder({ "index.html": "<p>hi</p>" });
      const running = run(["deploy", dir, "--api", server.url], { WORKSPACE_TOKEN: token });
      const d = await queuedDeployment(db!);
      await markStatus(db!.db, d.id, "building", new Date());
      await appendLogLines(db!.db, [build(d, "npm ERR! missing script: build")]);
      await markStatus(db!.db, d.id, "failed", new Date(), "build: `npm run build` exited with code 1");
      const failed = await running;
      expect(failed.code).toBe(1);
      expect(failed.out).toContain("npm ERR! missing script: build\n");
      expect(failed.err).toContain(`Error: deployment ${d.id} failed: build: \`npm run build\` exited with code 1\n`);

      // The build log of that deployment, read again.
      const name = /Created project (.*) \(prj_/.exec(failed.out)![1]!;
      const buildLog = await run(["logs", name, "--deployment", d.id, "--api", server.url], { WORKSPACE_TOKEN: token });
      expect(buildLog).toMatchObject({ code: 0, out: "npm ERR! missing script: build\n" });

      // Runtime logs, by the project's name: newest last; --follow then streams new ones until stopped.
      const runtime = (message: string, stream: "stdout" | "stderr" = "stdout") => ({ ...build(d, message), kind: "runtime" as const, stream });
      await appendLogLines(db!.db, [runtime("listening on 3000"), runtime("GET / 200"), runtime("oops", "stderr")]);
      const page = await run(["logs", name, "--api", server.url], { WORKSPACE_TOKEN: token });
      expect(page.code, page.err).toBe(0);
      expect(
        page.out
          .trim()
          .split("\n")
          .map((l) => l.replace(/^\S+ \[production dpl_…\w{4}\] /, "")),
      ).toEqual(["listening on 3000", "GET / 200", "[stderr] oops"]);

      const stop = new AbortController();
      const following = launch(["logs", d.projectId, "--follow", "--api", server.url], { WORKSPACE_TOKEN: token }, stop.signal);
      await until(async () => (following.live().includes("[stderr] oops") ? true : undefined));
      await sleep(300);
      await appendLogLines(db!.db, [runtime("GET /later 200")]);
      await until(async () => (following.live().includes("GET /later 200") ? true : undefined));
      stop.abort();
      const followed = await following.done;
      expect(followed.code, followed.err).toBe(0);
      const lines = followed.out.trim().split("\n");
      expect(lines.filter((l) => l.endsWith("GET /later 200"))).toHaveLength(1);
      expect(lines.filter((l) => l.endsWith("GET / 200"))).toHaveLength(1);
      expect(existsSync(join(dir, LINK_FILE))).toBe(true);
    },
    60_000,
  );
});

describe("wsp: the follow logic against a loopback SSE server speaking the contract", () => {
  it("resumes after the last id, skips keep-alives, refreshes an expired token once, returns the end", async () => {
    const requests: Array<{ authorization?: string; lastEventId?: string }> = [];
    const origin = await listen((req, res) => {
      requests.push({ authorization: req.headers.authorization, lastEventId: req.headers["last-event-id"] as string | undefined });
      if (req.headers.authorization === "Bearer old") {
        res.writeHead(401, { "content-type": "application/problem+json" }).end(JSON.stringify({ detail: "expired" }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      const line = (id: number) =>
        `id: ${id}\nevent: log\ndata: ${JSON.stringify({ id: String(id), timestamp: new Date().toISOString(), deploymentId: "dpl_x", stream: "stdout", message: `line ${id}` })}\n\n`;
      if (requests.length === 2) {
        res.write(`: keep-alive\n\n${line(1)}${line(2)}`, () => setTimeout(() => res.destroy(), 50));
        return;
      }
      res.write(`${line(3)}\r\n: keep-alive\r\n\r\nevent: end\ndata: {"status": "canceled", "failureReason": null}\n\n`);
      res.end();
    });
    let token = "old";
    const lines: string[] = [];
    const end = await follow({
      url: `${origin}/api/deployments/dpl_x/logs/stream`,
      token: () => token,
      refresh: async () => {
        token = "new";
      },
      onLine: (l) => lines.push(l.message),
      ...FAST,
    });
    expect(end).toEqual({ status: "canceled", failureReason: null });
    expect(lines).toEqual(["line 1", "line 2", "line 3"]);
    expect(requests.map((r) => [r.authorization, r.lastEventId])).toEqual([
      ["Bearer old", undefined],
      ["Bearer new", undefined],
      ["Bearer new", "2"],
    ]);
  });

  it("gives up with a clear error when the stream keeps failing, and on a 404 at once", async () => {
    let hits = 0;
    const origin = await listen((req, res) => {
      hits++;
      if (req.url?.includes("gone")) res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ detail: "Deployment not found" }));
      else res.writeHead(503).end();
    });
    await expect(follow({ url: `${origin}/x/stream`, token: () => "t", onLine: () => {}, ...FAST, maxFailures: 2 })).rejects.toThrow(
      /GET \/x\/stream: the log stream keeps failing \(HTTP 503\)/,
    );
    expect(hits).toBe(3);
    await expect(follow({ url: `${origin}/gone/stream`, token: () => "t", onLine: () => {}, ...FAST })).rejects.toThrow(
      /GET \/gone\/stream: 404 Deployment not found/,
    );
  });

  it("a stream closed because access was lost is an error saying why, not the build's end, and is not reopened", async () => {
    let hits = 0;
    const origin = await listen((_req, res) => {
      hits++;
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(`event: end\ndata: {"reason": "access revoked", "detail": "The token was revoked"}\n\n`);
    });
    await expect(follow({ url: `${origin}/api/projects/prj_x/logs/stream`, token: () => "t", onLine: () => {}, ...FAST })).rejects.toThrow(
      "GET /api/projects/prj_x/logs/stream: the log stream was closed: The token was revoked",
    );
    expect(hits).toBe(1);
  });
});
