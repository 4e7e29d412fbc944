/**
 * Hostile uploads on every runtime: each one gets a clear 400 from the scan and
 * nothing else happens (no scan recorded, no project, the session still usable).
 * The fixtures are built here, gzip bomb and a million entries included.
 */
import { describe, expect, it } from "vitest";
import { ScanResultSchema } from "../../../functions/projects/folder/schema";
import { folderClient } from "../../support/folder-client";
import { expectBody, expectProblem, seedTenant } from "../../support/harness";
import { gzip, manyEntriesArchive, paxFloodArchive, tar, tgz, zerosArchive, type FixtureEntry } from "../../support/tar-fixtures";
import { useRuntimeHarness } from "../../support/runtime";

const encoder = new TextEncoder();
const file = (name: string, content = "x"): FixtureEntry => ({ name, content });

const CASES: Array<[string, () => Promise<Uint8Array>, RegExp]> = [
  ["an absolute path", () => gzip(tar([file("ok.txt"), file("/etc/cron.d/evil")])), /absolute path/],
  ["a Windows drive path", () => gzip(tar([file("C:/evil.txt")])), /absolute path/],
  ["a path with ..", () => gzip(tar([file("app/../../outside.txt")])), /'\.\.'/],
  [
    "a long PAX path with ..",
    () =>
      gzip(
        tar([
          file(
            `${"d/".repeat(60)}../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../evil`,
          ),
        ]),
      ),
    /'\.\.'/,
  ],
  ["a symbolic link", () => gzip(tar([file("index.js"), { name: "secrets", type: "2", linkname: "/etc/shadow" }])), /symbolic link/],
  ["a hard link", () => gzip(tar([file("a.txt"), { name: "b.txt", type: "1", linkname: "a.txt" }])), /hard link/],
  ["a character device", () => gzip(tar([{ name: "null", type: "3" }])), /character device/],
  ["a block device", () => gzip(tar([{ name: "sda", type: "4" }])), /block device/],
  ["a FIFO", () => gzip(tar([{ name: "pipe", type: "6" }])), /FIFO/],
  ["an unsupported entry type", () => gzip(tar([{ name: "sparse", type: "S" }])), /unsupported type 'S'/],
  [
    "a PAX path with a NUL character",
    () => gzip(tar([file("index.html"), { name: "evil.txt", content: "x", pax: { path: "evil\u0000.txt" } }])),
    /path with a NUL character or an unpaired surrogate \("evil\\u0000\.txt"\)/,
  ],
  [
    "a PAX record over 64 KiB",
    () => gzip(tar([{ name: "a.txt", content: "x", pax: { comment: "a".repeat(70_000) } }])),
    /PAX record of 70015 bytes is over the 65536-byte limit/,
  ],
  // Headers are charged before their payload streams: the scan stops at the limit, not at the end.
  ["PAX records adding up to more than 1 GiB", () => gzip(paxFloodArchive(1024 * 1024 * 1024)), /unpacks to more than 1024 MiB/],
  [
    "a compose image with an unpaired surrogate",
    () => tgz({ "compose.yaml": 'services:\n  web:\n    image: "nginx\\ud800"\n' }),
    /service "web": image is not valid/,
  ],
  [
    "a compose command with NUL",
    () => tgz({ "compose.yaml": 'services:\n  web:\n    image: nginx\n    command: "run\\0"\n' }),
    /command must not contain NUL characters or unpaired surrogates/,
  ],
  [
    "a compose file over 64 KiB",
    () => tgz({ "compose.yaml": `services:\n  web:\n    image: nginx\n${"# padding\n".repeat(7000)}` }),
    /compose\.yaml: is 69 KiB; compose files over 64 KiB are refused/,
  ],
  [
    "a huge manifest",
    () => gzip(tar([file("package.json", JSON.stringify({ name: "x", description: "a".repeat(2 * 1024 * 1024) }))])),
    /package\.json is 2\.0 MiB; manifests over 1\.0 MiB/,
  ],
  ["a gzip bomb", () => gzip(zerosArchive(200 * 1024 * 1024)), /gzip bomb/],
  ["a million entries", () => gzip(manyEntriesArchive(1_000_000)), /more than 100000 entries/],
  ["a file over the per-file limit", () => gzip(tar([{ name: "big.bin", size: 600 * 1024 * 1024 }])), /big\.bin is 600 MiB; files over 512 MiB/],
  ["gzip data that is not a tar", () => gzip(encoder.encode("just some text, not an archive\n".repeat(100))), /not a tar archive/],
  ["bytes that are not gzip", async () => encoder.encode("PK\u0003\u0004 this is a zip, not a gzip"), /not gzip data/],
  ["a truncated archive", async () => (await tgz({ "a.bin": crypto.getRandomValues(new Uint8Array(60_000)) })).subarray(0, 30_000), /truncated/],
  ["a truncated tar inside complete gzip", async () => gzip(tar([file("a.txt", "a".repeat(5000))]).subarray(0, 1536)), /truncated/],
  ["an empty archive", () => gzip(new Uint8Array(1024)), /no files/],
  [
    "a corrupt header",
    async () => {
      const t = tar([file("a.txt"), file("b.txt")]);
      t[1024 + 10] = t[1024 + 10]! ^ 0xff; // inside the second header
      return gzip(t);
    },
    /corrupt/,
  ],
];

const h = useRuntimeHarness();
const c = folderClient(h);

describe("folder upload: hostile archives", () => {
  for (const [label, build, detail] of CASES) {
    it(`refuses ${label} with a clear 400, and nothing else happens`, async () => {
      const t = await seedTenant(h);
      const bytes = await build();
      const target = await c.openSession(t);
      await c.upload(t, target, bytes);
      const problem = await expectProblem(await c.scan(t, target.sessionId), 400);
      expect(problem.detail).toMatch(detail);
      const row = await c.sessionRow(target.sessionId);
      expect(row).toMatchObject({ scan: null, scannedAt: null, servicesCiphertext: null, projectId: null });
      await expectProblem(await c.ensure(t, { name: "x", uploadSessionId: target.sessionId }), 400, "uploadSessionId");
      expect(await c.projectCount(t.orgId)).toBe(0);

      // The session is still usable: a good upload replaces the bad one.
      await c.upload(t, target, await tgz({ "index.html": "<p>ok</p>" }));
      expect(await expectBody(await c.scan(t, target.sessionId), 200, ScanResultSchema)).toMatchObject({ framework: "static" });
    }, 120_000);
  }
});
