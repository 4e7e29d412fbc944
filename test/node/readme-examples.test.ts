/**
 * The API reference's "First steps" (docs/api.md, linked from the README) are what the API takes:
 * every block fenced as ```sh whose first line is `# example: <name>` runs, in document order, in one `bash -euo pipefail` script against
 * a real self-hosted server (the function `npm start` uses) on a fresh data directory, and
 * every `curl` in them must answer 2xx.
 *
 * The script runs in a temporary folder whose `data/` is the server's DATA_DIR, so the setup
 * block's `cat data/owner-token` reads the real token; the server listens on a free port, so
 * the setup block's `API=http://127.0.0.1:8787` line is the one line changed (to that port). Nothing here reaches the internet: the
 * example channels stay unverified, so the example event makes no outbound send (checked).
 * The runner is off: the folder-upload block's deployment is queued, not built (the README's
 * walkthrough, test/node/readme-walkthrough.test.ts, builds and serves one).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadNodeConfig } from "../../functions/self-hosted/config";
import { startSelfHosted, type RunningServer } from "../../functions/self-hosted/start";

interface Example {
  name: string;
  code: string;
}

/** The marked ```sh blocks of a Markdown text, in order (line by line: linear, no regex over the whole text). */
function runnableExamples(markdown: string): Example[] {
  const lines = markdown.split("\n");
  const examples: Example[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== "```sh") continue;
    const marker = /^# example: ([a-z0-9-]+)$/.exec(lines[i + 1] ?? "");
    const end = lines.indexOf("```", i + 1);
    if (end < 0) throw new Error(`${DOC} line ${i + 1}: unclosed code block`);
    if (marker) examples.push({ name: marker[1]!, code: lines.slice(i + 2, end).join("\n") });
    i = end;
  }
  return examples;
}

/** The `curl` commands of a block: continued lines joined, then each command-position `curl` (line start, after `|`, `$(`, `&&` or `;`) up to the next. */
function curlCommands(code: string): string[] {
  const commands: string[] = [];
  for (const line of code.replaceAll("\\\n", " ").split("\n")) {
    const starts = [...line.matchAll(/(?:^|\||\$\(|&&|;)\s*curl\s/g)].map((m) => m.index);
    for (const [n, at] of starts.entries()) commands.push(line.slice(at, starts[n + 1]));
  }
  return commands;
}

const DOC = "docs/api.md";
const examples = runnableExamples(readFileSync(join(process.cwd(), DOC), "utf8"));

let dir: string;
let server: RunningServer;
let token: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "ws-readme-"));
  server = await startSelfHosted(
    loadNodeConfig({ PORT: "0", LOG_LEVEL: "silent", DATA_DIR: join(dir, "data"), OUTBOUND_ALLOW_PRIVATE: "false", RUNNER: "off" }),
    () => {},
  );
  token = readFileSync(join(dir, "data", "owner-token"), "utf8").trim();
}, 120_000);

afterAll(async () => {
  await server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function runBash(script: string, cwd: string): Promise<{ code: number | null; out: string; err: string }> {
  const file = join(cwd, "examples.sh");
  writeFileSync(file, script);
  // A clean environment: no ~/.curlrc (HOME is the temp folder), no proxy for the loopback server.
  const child = spawn("bash", ["-euo", "pipefail", file], {
    cwd,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: cwd, NO_PROXY: "*", LC_ALL: "C" },
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  return new Promise((resolve) => child.on("close", (code) => resolve({ code, out, err })));
}

describe("docs/api.md examples", () => {
  it("are found, start with the setup block, and every curl fails on an error status", () => {
    expect(examples.length, `no \`\`\`sh block starting with '# example: <name>' in ${DOC}`).toBeGreaterThan(0);
    expect(examples[0]!.name).toBe("setup");
    expect(new Set(examples.map((e) => e.name)).size, "example names are unique").toBe(examples.length);
    for (const { name, code } of examples) {
      for (const command of curlCommands(code)) {
        expect(command, `example ${name}: a curl without --fail-with-body would let a 4xx pass`).toMatch(/\s--fail-with-body\s/);
      }
    }
  });

  it("run as they are against a real server, every curl answering 2xx", async () => {
    const expectedCurls = examples.reduce((n, e) => n + curlCommands(e.code).length, 0);
    expect(expectedCurls).toBeGreaterThan(0);
    // Every curl reports its status on stderr; the blocks' own output stays on stdout.
    const prelude = `curl() { command curl -w '%{stderr}curl-status %{http_code}\\n' "$@"; }\n`;
    // The one change: the setup block's API line names this server's port instead of 8787.
    const apiLine = "API=http://127.0.0.1:8787";
    expect(examples[0]!.code.split("\n")).toContain(apiLine);
    const parts = examples.map((e) => {
      const code = e.name === "setup" ? e.code.replace(apiLine, `API=${server.url}`) : e.code;
      return `echo '--- example: ${e.name}' >&2\n${code}\n`;
    });
    const { code, out, err } = await runBash(prelude + parts.join("\n"), dir);
    expect(code, `the examples failed (the last '--- example' line names the block):\n${err}\n${out}`).toBe(0);

    const statuses = [...err.matchAll(/^curl-status (\d{3})$/gm)].map((m) => Number(m[1]));
    expect(statuses.length, err).toBe(expectedCurls);
    for (const status of statuses) expect(status, err).toBeGreaterThanOrEqual(200);
    for (const status of statuses) expect(status, err).toBeLessThan(300);

    // What the prose promises: the secret reads back masked; the channels exist with their labels.
    expect(out).toContain('"key":"DATABASE_PASSWORD","value":"••••••••","isSecret":true');
    expect(out).not.toContain("change-me");
    const headers = { authorization: `Bearer ${token}` };
    const channels = (await (await fetch(`${server.url}/api/notifications/channels`, { headers })).json()) as {
      items: Array<{ kind: string; label: string; verified: boolean }>;
    };
    expect(channels.items.filter((c) => c.kind !== "in_app").map((c) => [c.kind, c.label, c.verified])).toEqual([
      ["webhook", "Deploys", false],
      ["email", "My inbox", false],
    ]);
    // The event reached the in-app feed and made no outbound send (nothing leaves the machine).
    const feed = (await (await fetch(`${server.url}/api/notifications/deliveries`, { headers })).json()) as {
      items: Array<{ category: string; sends: unknown[] }>;
    };
    expect(feed.items.map((d) => [d.category, d.sends.length])).toEqual([["deploy.failed", 0]]);
  }, 120_000);
});
