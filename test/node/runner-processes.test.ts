/**
 * The runner's child processes (functions/self-hosted/runner/processes.ts), with
 * real processes: the environment is exactly what is given, output arrives as
 * lines (long lines cut with the marker, "\r" and ANSI kept, the last unterminated
 * line emitted), stop ends the whole process group (SIGKILL after the grace for
 * what ignores SIGTERM), and the memory watchdog kills a group over its limit
 * while a normal Node server under it runs.
 */
import { afterEach, describe, expect, it } from "vitest";
import { MAX_LINE_CHARS, TRUNCATED_MARKER } from "../../functions/logs/store";
import { type SpawnedProcess, spawnProcess } from "../../functions/self-hosted/runner/processes";
import { baseEnv, FIXTURES, isAlive, nodeCommand, waitFor, waitReaped } from "../fixtures/runner/helpers";

type Line = [stream: "stdout" | "stderr", text: string];

const started: SpawnedProcess[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((p) => p.stop(0)));
});

function run(command: string, extra: { env?: Record<string, string>; memoryMb?: number; cwd?: string } = {}) {
  const lines: Line[] = [];
  const proc = spawnProcess({
    command,
    cwd: extra.cwd ?? FIXTURES,
    env: extra.env ?? baseEnv(),
    memoryMb: extra.memoryMb,
    onLine: (stream, text) => lines.push([stream, text]),
  });
  started.push(proc);
  return { proc, lines };
}

const pidsIn = (lines: Line[]) => lines.flatMap(([, text]) => (/^pid (\d+)$/.exec(text) ? [Number(/^pid (\d+)$/.exec(text)![1])] : []));

describe("spawnProcess", () => {
  it("passes exactly the given environment and reports the exit code", async () => {
    process.env.RUNNER_TEST_SERVER_ONLY = "leaked";
    try {
      const { proc, lines } = run('echo "greeting=$GREETING"; echo "leak=[$RUNNER_TEST_SERVER_ONLY]"; pwd; echo oops >&2; exit 7', {
        env: baseEnv({ GREETING: "hello there" }),
      });
      const exit = await proc.exited;
      expect(exit).toEqual({ code: 7, signal: null });
      expect(lines).toEqual([
        ["stdout", "greeting=hello there"],
        ["stdout", "leak=[]"],
        ["stdout", FIXTURES],
        ["stderr", "oops"],
      ]);
      expect(proc.pid).toBeGreaterThan(0);
    } finally {
      delete process.env.RUNNER_TEST_SERVER_ONLY;
    }
  });

  it("cuts a 20 KiB line to 16 KiB plus the marker, keeps \\r and ANSI, and emits the last unterminated line", async () => {
    const { proc, lines } = run(nodeCommand("long-line.mjs"));
    await proc.exited;
    expect(lines.map(([s]) => s)).toEqual(["stdout", "stdout", "stdout", "stdout"]);
    expect(lines[0]![1]).toBe("x".repeat(MAX_LINE_CHARS) + TRUNCATED_MARKER);
    expect(lines.slice(1).map(([, t]) => t)).toEqual(["after the long line\r", "\u001b[31mred\u001b[0m", "no newline at the end"]);
  });

  it("never holds more than one line's limit: 5 MB without a newline becomes one cut line", async () => {
    const { proc, lines } = run("head -c 5000000 /dev/zero | tr '\\0' 'y'; echo; echo next");
    await proc.exited;
    expect(lines.length).toBe(2);
    expect(lines[0]![1]).toBe("y".repeat(MAX_LINE_CHARS) + TRUNCATED_MARKER);
    expect(lines[1]).toEqual(["stdout", "next"]);
  });

  it("keeps multi-byte characters whole across reads and lines exactly at the limit uncut", async () => {
    const { proc, lines } = run(
      `printf 'h\\303'; sleep 0.1; printf '\\251llo \\360\\237\\230'; sleep 0.1; printf '\\200\\n'; head -c ${MAX_LINE_CHARS} /dev/zero | tr '\\0' 'z'; echo`,
    );
    await proc.exited;
    expect(lines).toEqual([
      ["stdout", "héllo 😀"],
      ["stdout", "z".repeat(MAX_LINE_CHARS)],
    ]);
  });

  it("stop ends the whole group: a shell with two Node children leaves nothing behind", async () => {
    const { proc, lines } = run(`${nodeCommand("idle.mjs")} & ${nodeCommand("idle.mjs")}; wait`);
    await waitFor(() => pidsIn(lines).length === 2, 10_000, "both children started");
    const pids = pidsIn(lines);
    expect(pids.every(isAlive)).toBe(true);
    const exit = await proc.stop(2000);
    expect(exit.signal).toBe("SIGTERM");
    for (const pid of [proc.pid, ...pids]) {
      expect(isAlive(pid)).toBe(false);
      expect(await waitReaped(pid)).toBe(true);
      expect(() => process.kill(pid, 0)).toThrow();
    }
  });

  it("stop sends SIGKILL after the grace period to a group member that ignores SIGTERM", async () => {
    const { proc, lines } = run(`${nodeCommand("idle.mjs")}; echo unreachable`, { env: baseEnv({ IGNORE_SIGTERM: "1" }) });
    await waitFor(() => pidsIn(lines).length === 1, 10_000, "child started");
    const [pid] = pidsIn(lines);
    const t0 = Date.now();
    await proc.stop(700);
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(650);
    expect(took).toBeLessThan(4000);
    expect(lines.some(([, t]) => t === `pid ${pid} ignoring SIGTERM`)).toBe(true);
    expect(isAlive(pid!)).toBe(false);
    expect(await waitReaped(pid!)).toBe(true);
  });

  it("exited resolves although a background child still holds the pipes, and stop then ends that child", async () => {
    const { proc, lines } = run(`${nodeCommand("idle.mjs")} & echo leader done`);
    const exit = await proc.exited;
    expect(exit.code).toBe(0);
    await waitFor(() => pidsIn(lines).length === 1, 10_000, "background child started");
    const [pid] = pidsIn(lines);
    expect(isAlive(pid!)).toBe(true);
    await proc.stop(1000);
    expect(isAlive(pid!)).toBe(false);
  });

  it("reports a spawn failure (missing cwd) as an exit with an error", async () => {
    const { proc } = run("echo hi", { cwd: `${FIXTURES}/does-not-exist` });
    const exit = await proc.exited;
    expect(exit.code).toBeNull();
    expect(exit.error).toMatch(/ENOENT/);
    await proc.stop(100);
  });
});

describe("memory limit", () => {
  it("kills a group whose resident memory goes over memoryMb", async () => {
    const { proc, lines } = run(nodeCommand("alloc.mjs"), { memoryMb: 128, env: baseEnv({ ALLOC_MB: "512" }) });
    const exit = await proc.exited;
    expect(exit).toMatchObject({ signal: "SIGKILL", memoryExceeded: true });
    expect(lines.some(([, t]) => t.startsWith("allocated"))).toBe(false);
  });

  it("lets a Node process under the limit run (an http server, and 32 MiB allocated)", async () => {
    const port = 20000 + Math.floor(Math.random() * 20000);
    const server = run(nodeCommand("http-app.mjs"), { memoryMb: 128, env: baseEnv({ PORT: String(port), GREETING: "small" }) });
    await waitFor(() => server.lines.some(([, t]) => t === `listening on ${port}`), 10_000, "server listening");
    const answer = await (await fetch(`http://127.0.0.1:${port}/`)).json();
    expect(answer.greeting).toBe("small");
    const small = run(nodeCommand("alloc.mjs"), { memoryMb: 128, env: baseEnv({ ALLOC_MB: "32" }) });
    await waitFor(() => small.lines.some(([, t]) => t === "allocated 32 MiB"), 10_000, "allocation done");
    // Several watchdog samples later both are still alive.
    await new Promise((r) => setTimeout(r, 800));
    expect(isAlive(server.proc.pid)).toBe(true);
    expect(isAlive(small.proc.pid)).toBe(true);
    await server.proc.stop(1000);
    await small.proc.stop(1000);
  });
});
