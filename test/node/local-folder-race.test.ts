/**
 * The local-folder snapshot packs nothing from outside its folder, even when
 * the folder changes while it is read (issue 19, part 3): the attack swapped a
 * directory for a link to the data directory 0.3-1 s after POST
 * /api/deployments, between the path check and the snapshot.
 *
 * - The race, end to end (Node adapter on PGlite, LOCAL_ROOTS, runner off): a
 *   child process swaps the project's `sub/` for a link to a folder outside the
 *   root holding a canary (same names, same sizes), and back, staying 0-20 ms
 *   in each state, while 20 POST
 *   /api/deployments each snapshot the folder. Every answer is 201 or a 409
 *   naming `sub`, never a 500, and no stored tarball holds the canary. (The
 *   packer before this walk leaked the canary in about one run in four here:
 *   it listed the names, then opened them by path through the link.)
 * - The walk itself (shared/storage/folder-walk.ts), deterministically: a file
 *   that vanishes between the listing and its open, and one that turns into a
 *   directory, are FolderChangedErrors naming them.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { lstatSync, mkdirSync, mkdtempSync, realpathSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import type { ReadableStream as NodeWebStream } from "node:stream/web";
import { Parser, type ReadEntry } from "tar";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FolderChangedError, walkFolder } from "../../shared/storage/folder-walk";
import type { FolderHarness } from "../support/folder-client";
import { expectStatus, seedTenant } from "../support/harness";
import { openPgliteHarness } from "../support/node-harness";
import { useCleanups } from "../support/cleanups";

const { tempDir } = useCleanups("ws-local-race-");

const CANARY = "data-dir-canary-93e1";
/** The real files' content: as long as the canary. */
const REAL = "r".repeat(CANARY.length);
const RUNS = 20;

/** Every member of a gzipped tarball, with its text. */
async function members(body: ReadableStream<Uint8Array>): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const parser = new Parser({ strict: true });
  parser.on("entry", (entry: ReadEntry) => {
    const chunks: Buffer[] = [];
    entry.on("data", (c: Buffer) => chunks.push(c));
    entry.on("end", () => out.set(entry.path, Buffer.concat(chunks).toString("utf8")));
  });
  const done = new Promise<void>((resolve, reject) => {
    parser.on("close", () => resolve());
    parser.on("error", reject);
  });
  Readable.fromWeb(body as NodeWebStream<Uint8Array>).pipe(parser);
  await done;
  return out;
}

/** Swaps `dir/sub` for a link to `target` and back, forever, in its own process (sync calls: a real concurrent writer). */
const SWAPPER = `
const fs = require("node:fs");
const [dir, target, aside] = process.argv.slice(1);
const sub = dir + "/sub";
const nap = new Int32Array(new SharedArrayBuffer(4));
const sleep = () => Atomics.wait(nap, 0, 0, Math.random() * 20);
for (;;) {
  try { fs.renameSync(sub, aside); fs.symlinkSync(target, sub); } catch {}
  sleep();
  try { fs.unlinkSync(sub); fs.renameSync(aside, sub); } catch {}
  sleep();
}`;

describe("local-folder snapshot: a directory swapped for a link mid-walk", () => {
  let h: FolderHarness;
  let root: string;
  let outside: string;
  beforeAll(async () => {
    root = realpathSync(mkdtempSync(join(tmpdir(), "ws-race-root-")));
    outside = realpathSync(mkdtempSync(join(tmpdir(), "ws-race-data-")));
    h = (await openPgliteHarness(undefined, { LOCAL_ROOTS: root })) as FolderHarness;
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    for (const dir of [root, outside]) if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it(`never packs the canary in ${RUNS} deployments; answers 201 or a 409 naming the folder that changed`, async () => {
    const t = await seedTenant(h);
    const dir = join(root, "proj");
    mkdirSync(join(dir, "sub"), { recursive: true });
    writeFileSync(join(dir, "index.html"), "<h1>site</h1>");
    // Enough files that each walk takes a while, in and around the swapped folder.
    for (let i = 0; i < 200; i++) {
      writeFileSync(join(dir, `page-${String(i).padStart(3, "0")}.html`), `<p>${i}</p>`);
      writeFileSync(join(dir, "sub", `inner-${String(i).padStart(3, "0")}.txt`), REAL);
    }
    // The folder the link leads to: the same names and sizes as the real one (a packer that stats then opens by name sees nothing amiss), the canary as content.
    mkdirSync(join(outside, "secret"));
    writeFileSync(join(outside, "secret", "owner-token"), CANARY);
    for (let i = 0; i < 200; i++) writeFileSync(join(outside, "secret", `inner-${String(i).padStart(3, "0")}.txt`), CANARY);

    const project = await expectStatus<{ id: string }>(
      await h.request("/api/projects/import", { method: "POST", token: t.token, org: t.orgId, json: { path: dir } }),
      201,
    );
    const aside = join(root, "aside");
    const swapper: ChildProcess = spawn(process.execPath, ["-e", SWAPPER, dir, join(outside, "secret"), aside], { stdio: "ignore" });
    const outcomes: string[] = [];
    try {
      // The swapping has begun before the first deployment.
      for (let i = 0; i < 200 && !lstatSync(join(dir, "sub"), { throwIfNoEntry: false })?.isSymbolicLink(); i++) await new Promise((r) => setTimeout(r, 5));
      for (let run = 0; run < RUNS; run++) {
        const res = await h.request("/api/deployments", { method: "POST", token: t.token, org: t.orgId, json: { projectId: project.id } });
        const text = await res.text();
        expect(text).not.toContain(CANARY);
        expect([201, 409], `run ${run}: ${res.status} ${text.slice(0, 300)}`).toContain(res.status);
        if (res.status === 409) {
          expect(res.headers.get("content-type")).toContain("application/problem+json");
          const detail = JSON.parse(text).detail as string;
          expect(detail).toMatch(/changed while it was read: sub\S* (vanished|changed); deploy again$/);
          outcomes.push("409");
          continue;
        }
        const deployment = JSON.parse(text) as { id: string };
        const stored = await h.uploadStore.open(`artifacts/${t.orgId}/${deployment.id}.tar.gz`);
        expect(stored).toBeTruthy();
        const packed = await members(stored!.body);
        expect(packed.get("index.html")).toBe("<h1>site</h1>");
        for (const [name, text] of packed) expect([name, text.includes(CANARY)]).toEqual([name, false]);
        expect(packed.has("sub/owner-token")).toBe(false);
        const inSub = [...packed.keys()].filter((n) => n.startsWith("sub/")).length;
        outcomes.push(inSub === 200 ? "201 with sub" : `201, sub ${inSub === 0 ? "skipped as a link" : `partial (${inSub})`}`);
      }
    } finally {
      swapper.kill("SIGKILL");
      await new Promise((resolve) => swapper.once("exit", resolve));
      // Leave the folder as it was.
      if (lstatSync(join(dir, "sub"), { throwIfNoEntry: false })?.isSymbolicLink()) unlinkSync(join(dir, "sub"));
      if (lstatSync(aside, { throwIfNoEntry: false })) renameSync(aside, join(dir, "sub"));
    }
    console.log(`local-folder race, ${RUNS} runs: ${outcomes.join(", ")}`);
    // The race was met: some walk found sub/ a link or changing (the odds of missing it 20 times are about 2^-20).
    expect(outcomes.some((o) => o !== "201 with sub")).toBe(true);
  }, 120_000);
});

describe("folder walk: names that change between the listing and the open", () => {
  it("a file that vanishes is a FolderChangedError naming it", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "a.txt"), "a");
    mkdirSync(join(dir, "z"));
    writeFileSync(join(dir, "z", "b.txt"), "b");
    writeFileSync(join(dir, "z", "c.txt"), "c");
    const walk = walkFolder(dir, {}, async (rel) => {
      if (rel === "z/b.txt") rmSync(join(dir, "z", "c.txt"));
    });
    await expect(walk).rejects.toThrow(FolderChangedError);
    await expect(walkFolder(dir, {})).resolves.toMatchObject({ files: ["a.txt", "z/b.txt"] });
    const error = await walkFolder(dir, {}, async (rel) => {
      if (rel === "a.txt") rmSync(join(dir, "z"), { recursive: true });
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FolderChangedError);
    expect(error).toMatchObject({ path: "z", how: "vanished" });
  });

  it("a file replaced by a directory, or a directory by a link, is a change naming it; nothing outside is read", async () => {
    const dir = tempDir();
    const elsewhere = tempDir();
    writeFileSync(join(elsewhere, "owner-token"), CANARY);
    writeFileSync(join(dir, "a.txt"), "a");
    writeFileSync(join(dir, "b.txt"), "b");
    mkdirSync(join(dir, "c"));
    writeFileSync(join(dir, "c", "x.txt"), "x");
    const seen: string[] = [];
    const error = await walkFolder(dir, {}, async (rel, handle) => {
      seen.push((await handle.readFile()).toString("utf8"));
      if (rel === "a.txt") {
        rmSync(join(dir, "b.txt"));
        mkdirSync(join(dir, "b.txt"));
        rmSync(join(dir, "c"), { recursive: true });
        // A link where the directory was.
        symlinkSync(elsewhere, join(dir, "c"));
      }
    }).catch((e: unknown) => e);
    expect(error).toMatchObject({ path: "b.txt", how: "changed" });
    expect(seen.join()).not.toContain(CANARY);
    rmSync(join(dir, "b.txt"), { recursive: true });
    const again = await walkFolder(dir, {}, async (_rel, handle) => {
      seen.push((await handle.readFile()).toString("utf8"));
    });
    // The link is listed as skipped, never entered.
    expect(again).toMatchObject({ files: ["a.txt"], skipped: ["c"] });
    expect(seen.join()).not.toContain(CANARY);
  });
});
