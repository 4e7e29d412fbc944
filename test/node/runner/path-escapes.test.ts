/**
 * No path escapes the work directory (issue 19, part 3), at unit level on temp
 * trees: a data directory beside the work directory holds a canary
 * `owner-token`, and links of every kind point at it.
 *
 * - The static server: an output directory that is a link, or passes through
 *   one, refuses to start; a link to a file or a directory inside the site, the
 *   site's 404.html as a link, and links swapped in after the server started
 *   (the output directory itself, or a folder in it) answer 404, never the
 *   canary; a FIFO is a 404 that does not hang.
 * - The plan: rootDirectory, outputDirectory and a compose build context that
 *   are or pass through a link fail with a reason naming the option; a manifest
 *   that is a link is not read.
 * - Unpacking: a link already in the destination is never written through.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, renameSync, symlinkSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { folderOf, PlanError, planOf } from "../../../functions/self-hosted/runner/commands";
import { startStaticServer } from "../../../functions/self-hosted/runner/static-server";
import { extractArchive, UnpackError } from "../../../functions/self-hosted/runner/unpack";
import { SCAN_LIMITS } from "../../../shared/storage/limits";
import { useCleanups } from "../../support/cleanups";
import { gzip, tar } from "../../support/tar-fixtures";

const { cleanups, tempDir } = useCleanups("ws-path-escapes-");

const CANARY = "owner-token-canary-4b1d";

/** A data directory with the canary, and a work directory's empty `src` beside it. */
function layout() {
  const top = tempDir();
  const data = join(top, "data");
  mkdirSync(data);
  writeFileSync(join(data, "owner-token"), CANARY);
  writeFileSync(join(data, "index.html"), CANARY);
  writeFileSync(join(data, "404.html"), CANARY);
  writeFileSync(join(data, "package.json"), JSON.stringify({ name: CANARY, scripts: { start: `echo ${CANARY}` } }));
  const src = join(top, "work", "src");
  mkdirSync(src, { recursive: true });
  return { data, src };
}

function get(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, agent: false, timeout: 5000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        body += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on("error", reject);
    req.end();
  });
}

async function serve(dir: string, base: string) {
  const server = await startStaticServer(dir, base);
  cleanups.push(() => server.close());
  return server.port;
}

describe("static server: links never lead out", () => {
  it("refuses to start on an output directory that is a link, or passes through one", async () => {
    const { data, src } = layout();
    symlinkSync(data, join(src, "dist"));
    await expect(startStaticServer(join(src, "dist"), src)).rejects.toThrow(/output directory dist is, or passes through, a symbolic link/);
    await expect(startStaticServer(join(src, "dist"))).rejects.toThrow(/symbolic link/);
    mkdirSync(join(data, "public"));
    symlinkSync(data, join(src, "site"));
    await expect(startStaticServer(join(src, "site", "public"), src)).rejects.toThrow(/output directory site\/public is, or passes through, a symbolic link/);
    await expect(startStaticServer(join(src, ".."), src)).rejects.toThrow(/outside/);
  });

  it("answers 404 for links to files and folders outside, a linked 404.html, and a FIFO", async () => {
    const { data, src } = layout();
    const dist = join(src, "dist");
    mkdirSync(join(dist, "assets"), { recursive: true });
    writeFileSync(join(dist, "index.html"), "<h1>site</h1>");
    writeFileSync(join(dist, "assets", "app.css"), "body{}");
    symlinkSync(join(data, "owner-token"), join(dist, "token.txt"));
    symlinkSync(data, join(dist, "data"));
    symlinkSync(join(data, "404.html"), join(dist, "404.html"));
    mkdirSync(join(dist, "empty"));
    symlinkSync(join(data, "index.html"), join(dist, "empty", "index.html"));
    execFileSync("mkfifo", [join(dist, "pipe")]);
    const port = await serve(dist, src);
    expect(await get(port, "/")).toEqual({ status: 200, body: "<h1>site</h1>" });
    expect(await get(port, "/assets/app.css")).toEqual({ status: 200, body: "body{}" });
    for (const path of ["/token.txt", "/data/owner-token", "/data/", "/data", "/empty/", "/nope", "/pipe"]) {
      const res = await get(port, path);
      expect([path, res.status, res.body.includes(CANARY)]).toEqual([path, 404, false]);
    }
  });

  it("keeps serving the directory it opened: links swapped in after start are 404, never the canary", async () => {
    const { data, src } = layout();
    const dist = join(src, "dist");
    mkdirSync(join(dist, "assets"), { recursive: true });
    writeFileSync(join(dist, "index.html"), "<h1>site</h1>");
    writeFileSync(join(dist, "assets", "owner-token"), "public asset");
    const port = await serve(dist, src);
    // A folder inside the site becomes a link to the data directory.
    renameSync(join(dist, "assets"), join(src, "assets-away"));
    symlinkSync(data, join(dist, "assets"));
    const asset = await get(port, "/assets/owner-token");
    expect(asset.status).toBe(404);
    expect(asset.body).not.toContain(CANARY);
    // The output directory itself is swapped for a link: the server still reads the directory it opened.
    renameSync(dist, join(src, "dist-away"));
    symlinkSync(data, dist);
    for (const path of ["/", "/owner-token", "/index.html"]) {
      const res = await get(port, path);
      expect([path, res.body.includes(CANARY)]).toEqual([path, false]);
    }
    expect(await get(port, "/")).toEqual({ status: 200, body: "<h1>site</h1>" });
  });
});

describe("plan: options that are links fail naming the option", () => {
  it("refuses a linked rootDirectory, one passing through a link, a linked outputDirectory and build context", async () => {
    const { data, src } = layout();
    symlinkSync(data, join(src, "app"));
    await expect(planOf(src, { rootDirectory: "app" }, null)).rejects.toThrow(PlanError);
    await expect(planOf(src, { rootDirectory: "app" }, null)).rejects.toThrow(/rootDirectory 'app' is a symbolic link/);
    await expect(planOf(src, { rootDirectory: "app/sub" }, null)).rejects.toThrow(/rootDirectory 'app\/sub' passes through a symbolic link \(app\)/);
    await expect(planOf(src, { rootDirectory: "../.." }, null)).rejects.toThrow(/rootDirectory '..\/..' points outside the source/);

    symlinkSync(data, join(src, "dist"));
    await expect(planOf(src, { outputDirectory: "dist" }, null)).rejects.toThrow(/outputDirectory 'dist' is a symbolic link/);
    await expect(planOf(src, { outputDirectory: "dist/public" }, null)).rejects.toThrow(/outputDirectory 'dist\/public' passes through a symbolic link/);

    const services = { web: { image: null, build: { context: "app" }, command: "node x.js", ports: ["80"] } };
    await expect(planOf(src, {}, services as never)).rejects.toThrow(/build context 'app' is a symbolic link/);

    // Not yet created (the build makes it): accepted, checked again where it is served.
    mkdirSync(join(src, "real"));
    expect(await planOf(src, { rootDirectory: "real", outputDirectory: "build/out" }, null)).toMatchObject({
      kind: "static",
      dir: join(src, "real", "build", "out"),
    });
  });

  it("never reads a manifest through a link", async () => {
    const { data, src } = layout();
    symlinkSync(join(data, "package.json"), join(src, "package.json"));
    writeFileSync(join(src, "index.html"), "<h1>x</h1>");
    const folder = await folderOf(src);
    expect(folder.manifests.has("package.json")).toBe(false);
    expect(JSON.stringify([...folder.manifests.values()])).not.toContain(CANARY);
    expect(await planOf(src, {}, null)).toMatchObject({ kind: "static", stack: "static" });
  });
});

describe("unpacking: a link in the destination is never written through", () => {
  it("refuses a member whose folder is a link, and writes nothing outside", async () => {
    const { data, src } = layout();
    symlinkSync(data, join(src, "f"));
    const archive = await gzip(
      tar([
        { name: "ok.txt", content: "fine" },
        { name: "f/planted.txt", content: "pwned" },
      ]),
    );
    const run = extractArchive(new Blob([archive as Uint8Array<ArrayBuffer>]).stream(), src, { root: "", limits: SCAN_LIMITS });
    await expect(run).rejects.toThrow(UnpackError);
    await expect(run).rejects.toThrow(/f\/planted\.txt.*symbolic link/);
    expect(existsSync(join(data, "planted.txt"))).toBe(false);
    expect(readdirSync(data).sort()).toEqual(["404.html", "index.html", "owner-token", "package.json"]);
  });
});
