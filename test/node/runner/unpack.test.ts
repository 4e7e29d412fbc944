/**
 * Upload artifacts are unpacked under the scan's hostile-archive rules
 * (functions/self-hosted/runner/unpack.ts): `..`, absolute paths, links,
 * devices and duplicates are refused by the unpacker itself (the scan's reader
 * runs first in the pipeline; this checks the second line of defence), and
 * nothing is ever written outside the work directory.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { extractArchive, UnpackError } from "../../../functions/self-hosted/runner/unpack";
import { SCAN_LIMITS } from "../../../shared/storage/limits";
import { useCleanups } from "../../support/cleanups";
import { type FixtureEntry, gzip, tar } from "../../support/tar-fixtures";

const { tempDir } = useCleanups("ws-unpack-");

const stream = (bytes: Uint8Array) => new Blob([bytes as Uint8Array<ArrayBuffer>]).stream();

async function unpack(entries: FixtureEntry[], root = "") {
  const base = tempDir();
  const dest = join(base, "work", "src");
  mkdirSync(dest, { recursive: true });
  const result = await extractArchive(stream(await gzip(tar(entries))), dest, { root, limits: SCAN_LIMITS }).then(
    (r) => ({ ok: true as const, r }),
    (e: unknown) => ({ ok: false as const, e }),
  );
  return { base, dest, result };
}

/** Every path under `dir`, relative. */
function tree(dir: string, prefix = ""): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? [`${prefix}${n}/`, ...tree(p, `${prefix}${n}/`)] : [`${prefix}${n}`];
  });
}

describe("runner: unpacking an upload artifact", () => {
  it("writes files and directories inside the work directory, without the archive's top folder, private modes", async () => {
    const { dest, result } = await unpack(
      [
        { name: "app/", type: "5" },
        { name: "app/package.json", content: '{"name":"x"}' },
        { name: "app/src/", type: "5" },
        { name: "app/src/index.js", content: "console.log(1)" },
      ],
      "app/",
    );
    expect(result).toMatchObject({ ok: true, r: { files: 2 } });
    expect(tree(dest).sort()).toEqual(["package.json", "src/", "src/index.js"]);
    expect(readFileSync(join(dest, "src/index.js"), "utf8")).toBe("console.log(1)");
    expect(statSync(join(dest, "package.json")).mode & 0o077).toBe(0);
    expect(statSync(join(dest, "src")).mode & 0o077).toBe(0);
  });

  const hostile: Array<[string, FixtureEntry[], RegExp]> = [
    [
      "a `..` entry",
      [
        { name: "ok.txt", content: "x" },
        { name: "../escaped.txt", content: "pwned" },
      ],
      /unsafe path/,
    ],
    ["a nested `..` entry", [{ name: "a/../../escaped.txt", content: "pwned" }], /unsafe path/],
    ["an absolute path", [{ name: "/tmp/escaped.txt", content: "pwned" }], /unsafe path/],
    [
      "a symbolic link",
      [
        { name: "link", type: "2", linkname: "../../" },
        { name: "link/escaped.txt", content: "pwned" },
      ],
      /SymbolicLink/,
    ],
    ["a hard link", [{ name: "hard", type: "1", linkname: "/etc/passwd" }], /Link/],
    ["a FIFO", [{ name: "fifo", type: "6" }], /FIFO/],
    [
      "the same file twice",
      [
        { name: "a.txt", content: "1" },
        { name: "a.txt", content: "2" },
      ],
      /twice/,
    ],
  ];
  for (const [what, entries, reason] of hostile) {
    it(`refuses ${what} and writes nothing outside`, async () => {
      const { base, dest, result } = await unpack(entries);
      expect(result.ok).toBe(false);
      if (!result.ok) {
        expect(result.e).toBeInstanceOf(UnpackError);
        expect((result.e as Error).message).toMatch(reason);
      }
      // Outside the destination: only the folders the test made.
      expect(tree(base).sort()).toEqual(["work/", "work/src/", ...tree(dest).map((p) => `work/src/${p}`)].sort());
      expect(existsSync(join(base, "escaped.txt"))).toBe(false);
      expect(existsSync(join(base, "work", "escaped.txt"))).toBe(false);
      expect(existsSync("/tmp/escaped.txt")).toBe(false);
    });
  }

  it("refuses a member outside the archive's single folder and an empty archive", async () => {
    const outside = await unpack(
      [
        { name: "app/a.txt", content: "x" },
        { name: "other.txt", content: "y" },
      ],
      "app/",
    );
    expect(outside.result.ok).toBe(false);
    const base = tempDir();
    await expect(extractArchive(stream(await gzip(tar([]))), base, { root: "", limits: SCAN_LIMITS })).rejects.toThrow(/no files|unreadable/);
  });
});
