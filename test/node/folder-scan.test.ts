/**
 * The scan's parts on their own: the tar reader against archives written by
 * real tools (GNU tar in its ustar, gnu and posix formats, node-tar) with long
 * and non-ASCII names, the detectors per ecosystem, and the compose parser.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { create } from "tar";
import { afterAll, describe, expect, it } from "vitest";
import { parseCompose } from "../../functions/projects/folder/compose";
import { detect, MANIFEST_NAMES } from "../../functions/projects/folder/detect";
import { restoreEnvironment } from "../../functions/projects/folder/services";
import { readArchive } from "../../functions/projects/folder/tar-reader";
import { webGunzip, type Gunzip } from "../../shared/storage/gunzip";
import { nodeGunzip } from "../../shared/storage/gunzip-node";
import { SCAN_LIMITS } from "../../shared/storage/limits";
import { gzip, tar, zerosArchive } from "../support/tar-fixtures";

const work = mkdtempSync(join(tmpdir(), "ws-scan-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function folder(files: Record<string, string>): string {
  const dir = mkdtempSync(join(work, "src-"));
  for (const [name, content] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), content);
  }
  return dir;
}

const read = (bytes: Uint8Array, gunzip: Gunzip = nodeGunzip) =>
  readArchive(new Blob([bytes as Uint8Array<ArrayBuffer>]).stream(), { limits: SCAN_LIMITS, manifestNames: MANIFEST_NAMES, gunzip });

const LONG = `${"deep-directory-name/".repeat(8)}${"a-rather-long-file-name-".repeat(4)}.txt`;
const FILES = {
  "package.json": JSON.stringify({ dependencies: { express: "4" }, scripts: { start: "node server.js" } }),
  "server.js": "require('express')",
  [LONG]: "long",
  "données/café ☕.txt": "unicode",
  "src/lib/util.js": "x",
};

describe("tar reader: archives written by real tools", () => {
  for (const format of ["ustar", "gnu", "posix"] as const) {
    it(`lists a GNU tar --format=${format} archive like tar -tzf`, async () => {
      const dir = folder(FILES);
      const file = join(work, `gnu-${format}.tgz`);
      // ustar cannot store the long name: leave it out there.
      const names = format === "ustar" ? Object.keys(FILES).filter((n) => n !== LONG) : Object.keys(FILES);
      execFileSync("tar", [`--format=${format}`, "-czf", file, "-C", dir, ...names]);
      const listed = execFileSync("tar", ["-tzf", file], { encoding: "utf8" }).trim().split("\n");
      const archive = await read(readFileSync(file));
      expect(archive.files).toBe(listed.length);
      expect(archive.root).toBe("");
      expect(archive.manifests.get("package.json")).toBe(FILES["package.json"]);
      expect([...archive.paths].filter((p) => !p.endsWith("/")).sort()).toEqual(listed.filter((p) => p.split("/").length <= 4).sort());
      expect(detect(archive)).toMatchObject({ stack: "node", framework: "express", startCommand: "npm start" });
    });
  }

  it("reads node-tar's portable PAX archives, `./` prefixes and a single top-level folder", async () => {
    const dir = folder(Object.fromEntries(Object.entries(FILES).map(([k, v]) => [`my-app/${k}`, v])));
    const file = join(work, "node-tar.tgz");
    await create({ gzip: true, portable: true, cwd: dir, file }, ["my-app"]);
    const archive = await read(readFileSync(file));
    expect(archive.root).toBe("my-app/");
    expect(archive.files).toBe(Object.keys(FILES).length);
    expect(archive.paths.has("données/café ☕.txt")).toBe(true);
    expect(archive.manifests.has("package.json")).toBe(true);

    const dotted = join(work, "dotted.tgz");
    execFileSync("tar", ["-czf", dotted, "-C", join(dir, "my-app"), "."]);
    const fromDot = await read(readFileSync(dotted));
    expect(fromDot.root).toBe("");
    expect(fromDot.manifests.has("package.json")).toBe(true);
    expect(fromDot.paths.has("server.js")).toBe(true);
  });

  it("reads `\\` as a separator, keeps `a:b.txt` (not a drive path), and skips a directory's declared data", async () => {
    const archive = await read(
      await gzip(
        tar([
          { name: "a:b.txt", content: "x" },
          { name: "dir/", type: "5", content: "ignored" },
          { name: "c\\d.txt", content: "y" },
        ]),
      ),
    );
    expect([...archive.paths].sort()).toEqual(["a:b.txt", "c/d.txt", "dir/"]);
    expect(archive.files).toBe(2);
  });

  it("a manifest deep in a subfolder is neither read nor refused for its size", async () => {
    const dir = folder({ "index.html": "<p>", "docs/package.json": "x".repeat(2 * 1024 * 1024) });
    const file = join(work, "deep.tgz");
    execFileSync("tar", ["-czf", file, "-C", dir, "index.html", "docs"]);
    const archive = await read(readFileSync(file));
    expect(archive.manifests.size).toBe(0);
    expect(detect(archive).stack).toBe("static");
  });
});

describe("the two gunzips agree (zlib on Node, DecompressionStream on the Worker)", () => {
  const cases: Array<[string, () => Promise<Uint8Array>]> = [
    ["a folder", async () => gzip(tar(Object.entries(FILES).map(([name, content]) => ({ name, content }))))],
    ["a gzip bomb", () => gzip(zerosArchive(100 * 1024 * 1024))],
    ["bytes that are not gzip", async () => new TextEncoder().encode("not gzip at all")],
    ["a truncated gzip", async () => (await gzip(crypto.getRandomValues(new Uint8Array(50_000)))).subarray(0, 20_000)],
    ["gzip with trailing garbage", async () => new Uint8Array([...(await gzip(tar([{ name: "a.txt", content: "a" }]))), 1, 2, 3])],
  ];
  for (const [label, build] of cases) {
    it(label, async () => {
      const bytes = await build();
      const outcome = async (gunzip: Gunzip) => {
        try {
          const a = await read(bytes, gunzip);
          return { files: a.files, paths: [...a.paths].sort(), manifests: [...a.manifests.keys()] };
        } catch (e) {
          return { error: (e as Error).message };
        }
      };
      const [viaZlib, viaWeb] = [await outcome(nodeGunzip), await outcome(webGunzip)];
      expect(viaWeb).toEqual(viaZlib);
      if (label === "a folder") expect(viaZlib).toMatchObject({ files: 5 });
      else if (label !== "gzip with trailing garbage") expect(viaZlib).toHaveProperty("error");
    });
  }
});

describe("detection per ecosystem", () => {
  const scan = (files: Record<string, string>) =>
    detect({ paths: new Set(Object.keys(files)), manifests: new Map(Object.entries(files).filter(([k]) => MANIFEST_NAMES.has(k))) });
  const pkg = (deps: Record<string, string>, scripts: Record<string, string> = {}, extra: Record<string, unknown> = {}) =>
    JSON.stringify({ dependencies: deps, scripts, ...extra });

  it.each([
    [
      { "package.json": pkg({ next: "15" }, { build: "next build" }), "package-lock.json": "" },
      {
        framework: "nextjs",
        packageManager: "npm",
        installCommand: "npm ci",
        buildCommand: "npm run build",
        startCommand: "npx next start -p $PORT",
        outputDirectory: ".next",
      },
    ],
    [
      { "package.json": pkg({ vite: "5" }, { build: "vite build" }), "yarn.lock": "", ".yarnrc.yml": "" },
      {
        framework: "vite",
        packageManager: "yarn",
        installCommand: "yarn install --immutable",
        buildCommand: "yarn run build",
        startCommand: null,
        outputDirectory: "dist",
      },
    ],
    [
      { "package.json": pkg({ "react-scripts": "5" }, { build: "react-scripts build" }), "bun.lockb": "" },
      { framework: "create-react-app", packageManager: "bun", installCommand: "bun install --frozen-lockfile", outputDirectory: "build" },
    ],
    [
      { "package.json": pkg({ "@remix-run/react": "2" }, { build: "remix build", start: "remix-serve build" }, { packageManager: "pnpm@9.1.0" }) },
      { framework: "remix", packageManager: "pnpm", installCommand: "pnpm install", startCommand: "pnpm start" },
    ],
    [{ "package.json": pkg({ "@sveltejs/kit": "2" }, { build: "vite build" }) }, { framework: "sveltekit", startCommand: "node build" }],
    [{ "package.json": pkg({ nuxt: "3" }, { build: "nuxt build" }) }, { framework: "nuxt", startCommand: "node .output/server/index.mjs" }],
    [{ "package.json": pkg({ "@nestjs/core": "10" }, { build: "nest build", start: "node dist/main" }) }, { framework: "nestjs", startCommand: "npm start" }],
    [{ "package.json": pkg({ hono: "4" }, {}, { main: "src/index.js" }) }, { framework: "hono", startCommand: "node src/index.js" }],
    [
      { "package.json": "{ not json", "index.js": "" },
      { stack: "node", framework: "node", startCommand: "node index.js" },
    ],
    [{ "index.html": "<p>" }, { stack: "static", framework: "static", outputDirectory: "." }],
    [
      { "manage.py": 'os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")', "requirements.txt": "Django==5.0\ngunicorn\n" },
      {
        stack: "python",
        framework: "django",
        packageManager: "pip",
        installCommand: "pip install -r requirements.txt",
        buildCommand: "python manage.py collectstatic --noinput",
        startCommand: "gunicorn mysite.wsgi --bind 0.0.0.0:$PORT",
      },
    ],
    [
      { "pyproject.toml": '[tool.poetry]\nname="x"\n[tool.poetry.dependencies]\nflask = "^3"\n', "poetry.lock": "", "app.py": "" },
      {
        framework: "flask",
        packageManager: "poetry",
        installCommand: "poetry install --no-root",
        startCommand: "poetry run flask --app app run --host 0.0.0.0 --port $PORT",
      },
    ],
    [
      { "pyproject.toml": '[project]\ndependencies = ["fastapi>=0.110", "uvicorn"]\n', "uv.lock": "", "app/main.py": "" },
      {
        framework: "fastapi",
        packageManager: "uv",
        installCommand: "uv sync --frozen",
        startCommand: "uv run uvicorn app.main:app --host 0.0.0.0 --port $PORT",
      },
    ],
    [
      { Pipfile: '[packages]\nrequests = "*"\n', "main.py": "" },
      { framework: "python", packageManager: "pipenv", startCommand: "pipenv run python main.py" },
    ],
    [
      { "go.mod": "module x\n\nrequire github.com/labstack/echo/v4 v4.12.0\n", "main.go": "" },
      { stack: "go", framework: "echo", buildCommand: "go build -o app .", startCommand: "./app" },
    ],
    [
      { Gemfile: "gem 'sinatra'\n", "config.ru": "" },
      { stack: "ruby", framework: "sinatra", startCommand: "bundle exec rackup -o 0.0.0.0 -p $PORT" },
    ],
    [
      { "composer.json": JSON.stringify({ require: { "laravel/framework": "^11" } }), artisan: "" },
      {
        stack: "php",
        framework: "laravel",
        installCommand: "composer install --no-dev --optimize-autoloader",
        startCommand: "php artisan serve --host 0.0.0.0 --port $PORT",
      },
    ],
    [
      { "index.php": "<?php", "public/index.php": "" },
      { stack: "php", framework: "php", packageManager: null, startCommand: "php -S 0.0.0.0:$PORT -t public" },
    ],
    [
      { "Cargo.toml": '[package]\nname = "api-server"\nversion = "0.1.0"\n\n[dependencies]\naxum = "0.7"\ntokio = { version = "1" }\n' },
      { stack: "rust", framework: "axum", buildCommand: "cargo build --release", startCommand: "./target/release/api-server" },
    ],
    [
      { Dockerfile: "FROM alpine", "package.json": pkg({ next: "15" }) },
      { stack: "docker", framework: "docker", dockerfile: "Dockerfile", startCommand: null },
    ],
    [
      { "requirements.txt": "flask\n", Procfile: "web: gunicorn wsgi:app --workers 2\nworker: celery -A tasks worker\n" },
      { framework: "flask", startCommand: "gunicorn wsgi:app --workers 2" },
    ],
    [{ "README.md": "hi" }, { stack: "unknown", framework: "auto" }],
  ] as Array<[Record<string, string>, Record<string, unknown>]>)("%j", (files, expected) => {
    expect(scan(files)).toMatchObject(expected);
  });
});

describe("compose parsing", () => {
  it("reads list and mapping environments, long port syntax, build objects, and merges the override", () => {
    const { services, captured } = parseCompose(
      {
        file: "docker-compose.yml",
        text: [
          "services:",
          "  api:",
          "    build: { context: ./api, dockerfile: Dockerfile.prod }",
          "    ports: [{ target: 8080, published: 80 }, { target: 53, protocol: udp }, 9000]",
          "    environment: [A=1, B=x=y, EMPTY]",
          "    depends_on: { cache: { condition: service_started } }",
          "  cache:",
          "    image: redis:7",
          "    environment: { PORT: 6379, FLAG: true, NULLED: null }",
        ].join("\n"),
      },
      { file: "docker-compose.override.yml", text: "services:\n  api:\n    environment:\n      B: overridden\n    command: npm run dev\n" },
    );
    expect(services).toEqual([
      {
        name: "api",
        image: null,
        build: { context: "./api", dockerfile: "Dockerfile.prod" },
        command: "npm run dev",
        ports: ["80:8080", "53/udp", "9000"],
        dependsOn: ["cache"],
        envKeys: ["A", "B", "EMPTY"],
      },
      { name: "cache", image: "redis:7", build: null, command: null, ports: [], dependsOn: [], envKeys: ["PORT", "FLAG", "NULLED"] },
    ]);
    expect(captured).toEqual({ api: { A: "1", B: "overridden", EMPTY: "" }, cache: { PORT: "6379", FLAG: "true", NULLED: "" } });
  });

  it("restores masked values by service and key only (own keys; `constructor` is just a name)", () => {
    const captured = { web: { SECRET: "s3cret", constructor: "c" } };
    expect(restoreEnvironment("web", { SECRET: "•", constructor: "••", OTHER: "•••", CLEAR: "v" }, captured)).toEqual({
      SECRET: "s3cret",
      constructor: "c",
      CLEAR: "v",
    });
    expect(restoreEnvironment("constructor", { name: "••" }, captured)).toEqual({});
    expect(restoreEnvironment("web", { toString: "••", __proto__: "x" } as Record<string, string>, undefined)).toEqual({});
    expect(restoreEnvironment("web", { SECRET: "•" }, undefined)).toEqual({});
  });
});
