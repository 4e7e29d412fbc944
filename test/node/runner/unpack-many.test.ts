/**
 * Unpacking writes one member at a time: a 100,000-entry tarball of empty files
 * unpacks with no EMFILE, the process's open descriptors stay a handful above
 * where they were (counted in /proc/self/fd while it runs), and a loopback HTTP
 * server in the same process keeps answering within 200 ms meanwhile (the
 * attack this answers: 60,000 empty files exhausted the server's descriptors and
 * froze the API for 5 s). Unpacked onto tmpfs where there is one, so the run
 * takes seconds whatever other suites do to the disk.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { extractArchive } from "../../../functions/self-hosted/runner/unpack";
import { SCAN_LIMITS } from "../../../shared/storage/limits";
import { useCleanups } from "../../support/cleanups";
import { gzip, manyEntriesArchive } from "../../support/tar-fixtures";

const { cleanups } = useCleanups("ws-unpack-many-");

/** On tmpfs where there is one: what is measured is the unpacker, not a disk other suites keep busy (creating a file on it took 0.7 ms under load). */
function destination(): string {
  const dir = mkdtempSync(join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), "ws-unpack-many-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const COUNT = 100_000;
const openDescriptors = () => readdirSync("/proc/self/fd").length;

/** One GET over a fresh connection, timed from send to the last byte. */
function timedGet(port: number): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path: "/", agent: false }, (res) => {
      res.resume();
      res.on("end", () => resolve(performance.now() - started));
    });
    req.on("error", reject);
    req.end();
  });
}

describe("runner: unpacking a tarball of 100,000 entries", () => {
  it("keeps descriptors bounded and the process answering within 200 ms", async () => {
    const archive = await gzip(manyEntriesArchive(COUNT));
    const dest = destination();
    const server = createServer((_req, res) => res.end("ok"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    const port = (server.address() as AddressInfo).port;

    const baseline = openDescriptors();
    let done = false;
    let maxDescriptors = baseline;
    const latencies: number[] = [];
    const probe = (async () => {
      while (!done) {
        maxDescriptors = Math.max(maxDescriptors, openDescriptors());
        latencies.push(await timedGet(port));
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    })();

    const started = performance.now();
    const body = new Blob([archive as Uint8Array<ArrayBuffer>]).stream();
    const result = await extractArchive(body, dest, { root: "", limits: SCAN_LIMITS }).finally(() => {
      done = true;
    });
    const ms = performance.now() - started;
    await probe;

    expect(result.files).toBe(COUNT);
    expect(readdirSync(join(dest, "f")).length).toBe(COUNT);
    const worst = Math.max(...latencies);
    console.log(
      `unpacked ${COUNT} entries in ${Math.round(ms)} ms; ${latencies.length} probes, worst ${Math.round(worst)} ms; descriptors +${maxDescriptors - baseline} at most`,
    );
    expect(latencies.length).toBeGreaterThanOrEqual(10);
    expect(worst).toBeLessThan(200);
    // The destination, one directory, one file, and the probe's own socket(s).
    expect(maxDescriptors - baseline).toBeLessThan(16);
  }, 120_000);
});
