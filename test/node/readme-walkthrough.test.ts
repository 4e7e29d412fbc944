/**
 * The README's "Deploy your first app" works as written: every ```sh block whose first line is
 * `# walkthrough: <name>` runs, in README order, in one `bash -euo pipefail` script against a
 * real self-hosted server on a fresh data directory (the embedded database, runner and sandbox
 * on, as `npm start` runs it), with the git host the README starts (docs/examples/git-host.mjs,
 * run with the README's own command line) and the server started with the variables of the
 * README's restart line. The path a newcomer takes: `wsp login`, `wsp deploy` of a folder to a
 * 200 through the edge, push-to-deploy through the repository's post-receive hook, a custom
 * domain, a rollback, and the in-app notification of a failed deploy. Nothing reaches the
 * internet.
 *
 * What differs from a newcomer's machine, and only that: the server and the git host listen on
 * free ports (`127.0.0.1:8787` and `127.0.0.1:8790` in the blocks are rewritten to them, and
 * WORKSPACE_API_URL points `wsp` at the server); `npm link` is a no-op and `wsp` runs this
 * checkout's CLI; HOME is a temporary folder whose `data/` is the server's DATA_DIR and whose
 * `docs` links to this repository's; git gets an author from the environment; the smoke window
 * and stop grace are shortened to keep the run short.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { type RunningServer, startSelfHosted } from "../../functions/self-hosted/start";

const README = readFileSync(join(process.cwd(), "README.md"), "utf8");
const ORDER = ["login", "folder", "git", "push", "domain", "rollback", "failure"];

interface Block {
  name: string;
  code: string;
}

/** The ```sh blocks of a Markdown text in order, each with its marker name (null when unmarked); line by line. */
function shBlocks(markdown: string): Array<{ marker: string | null; lines: string[] }> {
  const lines = markdown.split("\n");
  const blocks: Array<{ marker: string | null; lines: string[] }> = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== "```sh") continue;
    const end = lines.indexOf("```", i + 1);
    if (end < 0) throw new Error(`README line ${i + 1}: unclosed code block`);
    const marker = /^# walkthrough: ([a-z0-9-]+)$/.exec(lines[i + 1] ?? "");
    blocks.push({ marker: marker ? marker[1]! : null, lines: lines.slice(marker ? i + 2 : i + 1, end) });
    i = end;
  }
  return blocks;
}

const blocks = shBlocks(README);
const walkthrough: Block[] = blocks.filter((b) => b.marker !== null).map((b) => ({ name: b.marker!, code: b.lines.join("\n") }));
const unmarked = blocks.filter((b) => b.marker === null).flatMap((b) => b.lines);
/** The README's command that starts the git host, and its restart line with the git host's variables. */
const gitHostLine = unmarked.find((l) => l.startsWith("node docs/examples/git-host.mjs"));
const restartLine = unmarked.find((l) => / npm start$/.test(l) && l.includes("GIT_GITEA_URL="));

const DEFAULT_API = "http://127.0.0.1:8787";
const DEFAULT_GIT = "127.0.0.1:8790";

let dir: string;
let server: RunningServer;
let gitHost: ChildProcess | undefined;
let gitPort: number;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** The environment every process of the walkthrough gets: a clean one, HOME the temp folder. */
function shellEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: `${join(dir, "bin")}:${dirname(process.execPath)}:${process.env.PATH ?? "/usr/bin:/bin"}`,
    HOME: dir,
    NO_PROXY: "*",
    LC_ALL: "C",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_AUTHOR_NAME: "Newcomer",
    GIT_AUTHOR_EMAIL: "newcomer@example.test",
    GIT_COMMITTER_NAME: "Newcomer",
    GIT_COMMITTER_EMAIL: "newcomer@example.test",
    GIT_TERMINAL_PROMPT: "0",
    ...extra,
  };
}

beforeAll(async () => {
  if (!gitHostLine || !restartLine) return;
  dir = mkdtempSync(join(tmpdir(), "ws-walkthrough-"));
  symlinkSync(join(process.cwd(), "docs"), join(dir, "docs"));
  // `npm link` puts this checkout's `wsp` on the PATH; here a shim does, and `npm link` does nothing.
  mkdirSync(join(dir, "bin"));
  writeFileSync(join(dir, "bin", "wsp"), `#!/bin/sh\nexec node ${JSON.stringify(join(process.cwd(), "functions/cli/wsp.mjs"))} "$@"\n`);
  writeFileSync(join(dir, "bin", "npm"), `#!/bin/sh\n[ "$1" = link ] && exit 0\necho "npm $* is not part of the walkthrough" >&2\nexit 1\n`);
  chmodSync(join(dir, "bin", "wsp"), 0o755);
  chmodSync(join(dir, "bin", "npm"), 0o755);

  gitPort = await freePort();
  const command = gitHostLine.replace(/\s+#.*$/, "");
  gitHost = spawn("bash", ["-c", `exec ${command}`], { cwd: dir, env: shellEnv({ GIT_HOST_PORT: String(gitPort) }), stdio: ["ignore", "pipe", "inherit"] });
  await new Promise<void>((resolve, reject) => {
    gitHost!.once("exit", (code) => reject(new Error(`the git host exited (${code})`)));
    gitHost!.stdout!.once("data", () => resolve());
  });

  // The restart line's variables, with the git host's port.
  const readmeEnv = Object.fromEntries(
    [...restartLine.replace(" npm start", "").matchAll(/([A-Z_]+)=(\S+)/g)].map((m) => [m[1]!, m[2]!.replace(DEFAULT_GIT, `127.0.0.1:${gitPort}`)]),
  );
  server = await startSelfHosted(
    loadNodeConfig({ PORT: "0", LOG_LEVEL: "silent", DATA_DIR: join(dir, "data"), SMOKE_WINDOW: "1s", STOP_GRACE: "1s", ...readmeEnv }),
    () => {},
  );
}, 120_000);

afterAll(async () => {
  await server?.close();
  gitHost?.kill("SIGTERM");
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function runBash(script: string, timeoutMs: number): Promise<{ code: number | null; out: string; err: string }> {
  const file = join(dir, "walkthrough.sh");
  writeFileSync(file, script);
  const child = spawn("bash", ["-euo", "pipefail", file], { cwd: dir, env: shellEnv({ WORKSPACE_API_URL: server.url }), detached: true });
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  // A step that hangs (a wait loop that never ends) fails the test with what ran so far.
  const timer = setTimeout(() => process.kill(-child.pid!, "SIGKILL"), timeoutMs);
  return new Promise((resolve) =>
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    }),
  );
}

describe("README walkthrough", () => {
  it("has its blocks in order, the git host's command and the restart line with its variables", () => {
    expect(walkthrough.map((b) => b.name)).toEqual(ORDER);
    expect(gitHostLine, "a ```sh line starting the git host: node docs/examples/git-host.mjs …").toBeDefined();
    expect(restartLine).toMatch(new RegExp(`GIT_GITEA_URL=http://${DEFAULT_GIT.replaceAll(".", "\\.")}\\b`));
    expect(restartLine).toContain("OUTBOUND_ALLOW_PRIVATE=true");
    expect(walkthrough[0]!.code).toContain(`API=${DEFAULT_API}`);
  });

  it("runs as written: a folder deploy answers through the edge, a push deploys, a domain serves, a rollback switches back, a failed deploy is in the feed", async () => {
    const parts = walkthrough.map(
      ({ name, code }) => `echo '--- walkthrough: ${name}' >&2\n${code.replaceAll(DEFAULT_API, server.url).replaceAll(DEFAULT_GIT, `127.0.0.1:${gitPort}`)}\n`,
    );
    const { code, out, err } = await runBash(parts.join("\n"), 360_000);
    expect(code, `the walkthrough failed (the last '--- walkthrough' line names the block):\n${err}\n${out}`).toBe(0);

    const token = readFileSync(join(dir, "data", "owner-token"), "utf8").trim();
    const api = async <T>(path: string) => {
      const res = await fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
      expect(res.status, path).toBe(200);
      return (await res.json()) as T;
    };
    const section = (name: string) => {
      const from = err.indexOf(`--- walkthrough: ${name}`);
      const next = ORDER[ORDER.indexOf(name) + 1];
      return err.slice(from, next ? err.indexOf(`--- walkthrough: ${next}`) : undefined);
    };
    // The push went through the hook to the API and queued a deployment.
    expect(section("push")).toContain('"outcome":"deploy_queued"');

    const projects = await api<{ items: Array<{ id: string; slug: string }> }>("/api/projects");
    expect(projects.items.map((p) => p.slug)).toEqual(["hello"]);
    const project = projects.items[0]!;
    const deployments = await api<{ items: Array<{ id: string; status: string; current: boolean; source: string; commitSha: string | null }> }>(
      `/api/projects/${project.id}/deployments`,
    );
    // Newest first: the broken push failed; v2 (the push) and v1 (the folder) are ready, v1 current after the rollback.
    expect(deployments.items.map((d) => [d.source, d.status, d.current])).toEqual([
      ["git", "failed", false],
      ["git", "ready", false],
      ["upload", "ready", true],
    ]);
    expect(deployments.items[1]!.commitSha).toMatch(/^[0-9a-f]{40}$/);

    // What the blocks printed: v1 through the edge, v2 after the push and on the domain, v1 still after the failure.
    expect(out.match(/^hello v1$/gm)?.length, out).toBe(2);
    expect(out.match(/^hello v2$/gm)?.length, out).toBe(2);
    const domains = await api<{ items: Array<{ hostname: string; routing: { state: string } }> }>(`/api/projects/${project.id}/domains`);
    expect(domains.items.map((d) => [d.hostname, d.routing.state])).toEqual([["hello.example.test", "synced"]]);

    // The feed the failure block read: one deploy.failed for this project, with the reason.
    const feed = JSON.parse(out.trim().split("\n").at(-1)!) as { items: Array<{ category: string; projectId: string; message: string }> };
    expect(feed.items.map((d) => [d.category, d.projectId])).toEqual([["deploy.failed", project.id]]);
  }, 420_000);
});
