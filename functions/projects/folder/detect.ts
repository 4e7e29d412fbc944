/**
 * Build configuration from a folder's listing and root manifests: stack,
 * framework, package manager, install/build/start commands, output directory.
 * Pure functions; the scan route feeds them what the tar reader found.
 *
 * Precedence: a compose file (several services), then a Dockerfile (the image
 * says how to build and start), then the language ecosystems. A Procfile's `web:`
 * line is the start command of any ecosystem. Commands bind to `$PORT`.
 */
import { Command } from "../schema";

export const STACKS = ["compose", "docker", "node", "static", "python", "go", "ruby", "php", "rust", "unknown"] as const;
export type Stack = (typeof STACKS)[number];

export interface Detection {
  stack: Stack;
  /** A framework id as the create body takes it; `auto` = detect at build time. */
  framework: string;
  packageManager: string | null;
  installCommand: string | null;
  buildCommand: string | null;
  startCommand: string | null;
  outputDirectory: string | null;
  dockerfile: string | null;
}

/** Compose files in Docker's order of preference; the override files are merged over the first one found. */
export const COMPOSE_FILES = ["compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml"] as const;
export const COMPOSE_OVERRIDES: Record<string, string> = {
  "compose.yaml": "compose.override.yaml",
  "compose.yml": "compose.override.yml",
  "docker-compose.yaml": "docker-compose.override.yaml",
  "docker-compose.yml": "docker-compose.override.yml",
};

/** Root files whose content the detectors read (everything else only needs to exist). */
export const MANIFEST_NAMES: ReadonlySet<string> = new Set([
  "package.json",
  "requirements.txt",
  "pyproject.toml",
  "Pipfile",
  "manage.py",
  "go.mod",
  "Gemfile",
  "composer.json",
  "Cargo.toml",
  "Procfile",
  ...COMPOSE_FILES,
  ...Object.values(COMPOSE_OVERRIDES),
]);

export interface Folder {
  /** Paths relative to the folder (directories end in `/`). */
  paths: ReadonlySet<string>;
  manifests: ReadonlyMap<string, string>;
}

const NONE: Omit<Detection, "stack" | "framework"> = {
  packageManager: null,
  installCommand: null,
  buildCommand: null,
  startCommand: null,
  outputDirectory: null,
  dockerfile: null,
};

/** A command only when it is one a project can store (one line, at most 1024 characters). */
const command = (c: string | null | undefined) => (c && Command.safeParse(c).success ? c.trim() : null);

// biome-ignore lint/suspicious/noExplicitAny: an uploaded manifest has any shape; every read below checks the type it uses.
function json(text: string | undefined): Record<string, any> {
  if (!text) return {};
  try {
    const value = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}

/*
 * Manifests are untrusted and up to 1 MiB: the detectors read them line by line
 * (one split, then trim / startsWith / short anchored patterns per line), never
 * with multiline patterns whose `\s*` spans lines, which backtrack quadratically.
 */
const lines = (text: string) => text.split("\n").map((l) => l.trim());

/** The rest of `line` after `word` and optional whitespace, when `line` starts with `word` followed by `next`; else null. */
function after(line: string, word: string, next: string): string | null {
  if (!line.startsWith(word)) return null;
  const rest = line.slice(word.length).trimStart();
  return rest.startsWith(next) ? rest.slice(next.length).trimStart() : null;
}

function procfileWeb(text: string | undefined): string | null {
  // `web:` at the very start of a line (an indented one is not a process type).
  const line = text?.split("\n").find((l) => after(l, "web", ":") !== null);
  return line ? command(after(line.trim(), "web", ":")) : null;
}

export function composeFileOf(folder: Folder): string | null {
  return COMPOSE_FILES.find((f) => folder.manifests.has(f)) ?? null;
}

export function detect(folder: Folder): Detection {
  const has = (p: string) => folder.paths.has(p);
  const text = (name: string) => folder.manifests.get(name);
  const dockerfile = has("Dockerfile") ? "Dockerfile" : has("dockerfile") ? "dockerfile" : null;

  if (composeFileOf(folder)) return { ...NONE, stack: "compose", framework: "compose", dockerfile };
  if (dockerfile) return { ...NONE, stack: "docker", framework: "docker", dockerfile };

  const found = detectNode(folder) ?? detectPython(folder) ?? detectGo(folder) ?? detectRuby(folder) ?? detectPhp(folder) ?? detectRust(folder);
  if (found) {
    const web = procfileWeb(text("Procfile"));
    return { ...found, startCommand: web ?? found.startCommand };
  }
  if (has("index.html")) return { ...NONE, stack: "static", framework: "static", outputDirectory: "." };
  return { ...NONE, stack: "unknown", framework: "auto" };
}

const NODE_FRAMEWORKS: Array<[string, string, string | null]> = [
  // [dependency, framework id, output directory]
  ["next", "nextjs", ".next"],
  ["nuxt", "nuxt", ".output"],
  ["@remix-run/node", "remix", "build"],
  ["@sveltejs/kit", "sveltekit", "build"],
  ["astro", "astro", "dist"],
  ["gatsby", "gatsby", "public"],
  ["@angular/core", "angular", "dist"],
  ["react-scripts", "create-react-app", "build"],
  ["vite", "vite", "dist"],
  ["@nestjs/core", "nestjs", "dist"],
  ["express", "express", null],
  ["fastify", "fastify", null],
  ["hono", "hono", null],
  ["koa", "koa", null],
];
/** Frameworks whose build output is static files: nothing to start. */
const STATIC_OUTPUT = new Set(["astro", "gatsby", "angular", "create-react-app", "vite"]);

function detectNode({ paths, manifests }: Folder): Detection | null {
  if (!manifests.has("package.json")) return null;
  const pkg = json(manifests.get("package.json"));
  const scripts: Record<string, unknown> = pkg.scripts && typeof pkg.scripts === "object" ? pkg.scripts : {};
  const deps = { ...(pkg.dependencies ?? {}), ...(pkg.devDependencies ?? {}) } as Record<string, unknown>;
  const declared = typeof pkg.packageManager === "string" ? /^(npm|pnpm|yarn|bun)@/.exec(pkg.packageManager)?.[1] : undefined;
  const pm =
    declared ?? (paths.has("pnpm-lock.yaml") ? "pnpm" : paths.has("yarn.lock") ? "yarn" : paths.has("bun.lockb") || paths.has("bun.lock") ? "bun" : "npm");
  const locked = {
    npm: paths.has("package-lock.json") || paths.has("npm-shrinkwrap.json"),
    pnpm: paths.has("pnpm-lock.yaml"),
    yarn: paths.has("yarn.lock"),
    bun: paths.has("bun.lockb") || paths.has("bun.lock"),
  }[pm];
  const install = {
    npm: locked ? "npm ci" : "npm install",
    pnpm: locked ? "pnpm install --frozen-lockfile" : "pnpm install",
    yarn: !locked ? "yarn install" : paths.has(".yarnrc.yml") ? "yarn install --immutable" : "yarn install --frozen-lockfile",
    bun: locked ? "bun install --frozen-lockfile" : "bun install",
  }[pm]!;
  const run = (script: string) => (pm === "npm" ? `npm run ${script}` : `${pm} run ${script}`);

  const match = NODE_FRAMEWORKS.find(([dep]) => dep in deps || (dep === "@remix-run/node" && Object.keys(deps).some((d) => d.startsWith("@remix-run/"))));
  const framework = match?.[1] ?? "node";
  const build = typeof scripts.build === "string" ? run("build") : null;
  let start: string | null = null;
  if (!STATIC_OUTPUT.has(framework)) {
    if (typeof scripts.start === "string") start = pm === "npm" ? "npm start" : `${pm} start`;
    else if (framework === "nextjs") start = "npx next start -p $PORT";
    else if (framework === "nuxt") start = "node .output/server/index.mjs";
    else if (framework === "sveltekit") start = "node build";
    else if (typeof pkg.main === "string") start = `node ${pkg.main}`;
    else start = ["server.js", "index.js", "app.js", "main.js"].map((f) => (paths.has(f) ? `node ${f}` : null)).find(Boolean) ?? null;
  }
  return {
    stack: "node",
    framework,
    packageManager: pm,
    installCommand: install,
    buildCommand: build,
    startCommand: command(start),
    outputDirectory: match?.[2] ?? null,
    dockerfile: null,
  };
}

/** A dependency named in requirements.txt, pyproject.toml or Pipfile (names compared case-insensitively). */
function pythonDeps(manifests: ReadonlyMap<string, string>): (name: string) => boolean {
  const text = ["requirements.txt", "pyproject.toml", "Pipfile"]
    .map((f) => manifests.get(f) ?? "")
    .join("\n")
    .toLowerCase();
  return (name) => new RegExp(`(^|[\\s"'\\[,=])${name.replace(/[-_.]/g, "[-_.]")}(?![a-z0-9_-])`, "m").test(text);
}

function detectPython({ paths, manifests }: Folder): Detection | null {
  const isPython = ["requirements.txt", "pyproject.toml", "Pipfile", "setup.py"].some((f) => paths.has(f)) || paths.has("manage.py");
  if (!isPython) return null;
  const dep = pythonDeps(manifests);
  const pyproject = manifests.get("pyproject.toml") ?? "";
  const pm = paths.has("uv.lock")
    ? "uv"
    : paths.has("poetry.lock") || pyproject.split("\n").some((l) => l.startsWith("[tool.poetry]"))
      ? "poetry"
      : paths.has("Pipfile")
        ? "pipenv"
        : "pip";
  const install = {
    uv: "uv sync --frozen",
    poetry: "poetry install --no-root",
    pipenv: "pipenv install --deploy",
    pip: paths.has("requirements.txt") ? "pip install -r requirements.txt" : "pip install .",
  }[pm]!;
  const exec = (c: string) => (pm === "pip" ? c : `${pm} run ${c}`);

  let framework = "python";
  let build: string | null = null;
  let start: string | null = null;
  const module = ["main.py", "app.py", "server.py"].find((f) => paths.has(f))?.replace(/\.py$/, "") ?? (paths.has("app/main.py") ? "app.main" : null);
  if (paths.has("manage.py") || dep("django")) {
    framework = "django";
    const settings = /DJANGO_SETTINGS_MODULE["']\s*,\s*["']([\w.]+)\.settings["']/.exec(manifests.get("manage.py") ?? "")?.[1];
    build = exec("python manage.py collectstatic --noinput");
    start = settings && dep("gunicorn") ? exec(`gunicorn ${settings}.wsgi --bind 0.0.0.0:$PORT`) : exec("python manage.py runserver 0.0.0.0:$PORT");
  } else if (dep("fastapi")) {
    framework = "fastapi";
    start = exec(`uvicorn ${module ?? "main"}:app --host 0.0.0.0 --port $PORT`);
  } else if (dep("flask")) {
    framework = "flask";
    start = dep("gunicorn")
      ? exec(`gunicorn ${module ?? "app"}:app --bind 0.0.0.0:$PORT`)
      : exec(`flask --app ${module ?? "app"} run --host 0.0.0.0 --port $PORT`);
  } else if (module) {
    start = exec(`python ${module.replace(/\./g, "/")}.py`);
  }
  return {
    stack: "python",
    framework,
    packageManager: pm,
    installCommand: install,
    buildCommand: build,
    startCommand: command(start),
    outputDirectory: null,
    dockerfile: null,
  };
}

function detectGo({ manifests }: Folder): Detection | null {
  const mod = manifests.get("go.mod");
  if (mod === undefined) return null;
  const frameworks: Array<[string, string]> = [
    ["github.com/gin-gonic/gin", "gin"],
    ["github.com/labstack/echo", "echo"],
    ["github.com/gofiber/fiber", "fiber"],
    ["github.com/go-chi/chi", "chi"],
  ];
  const framework = frameworks.find(([path]) => mod.includes(path))?.[1] ?? "go";
  return {
    stack: "go",
    framework,
    packageManager: "go",
    installCommand: "go mod download",
    buildCommand: "go build -o app .",
    startCommand: "./app",
    outputDirectory: null,
    dockerfile: null,
  };
}

/** Gems named by `gem "name"` / `gem 'name'` lines (comments and other statements ignored). */
function gemNames(gemfile: string): Set<string> {
  const names = new Set<string>();
  for (const line of lines(gemfile)) {
    if (!/^gem\s/.test(line)) continue;
    const rest = line.slice(3).trimStart();
    const quote = rest[0];
    if (quote !== '"' && quote !== "'") continue;
    const end = rest.indexOf(quote, 1);
    if (end > 1) names.add(rest.slice(1, end));
  }
  return names;
}

function detectRuby({ paths, manifests }: Folder): Detection | null {
  const gemfile = manifests.get("Gemfile");
  if (gemfile === undefined) return null;
  const gems = gemNames(gemfile);
  const gem = (name: string) => gems.has(name);
  const base = { stack: "ruby" as const, packageManager: "bundler", installCommand: "bundle install", outputDirectory: null, dockerfile: null };
  if (gem("rails") || paths.has("config/application.rb")) {
    return { ...base, framework: "rails", buildCommand: "bundle exec rails assets:precompile", startCommand: "bundle exec rails server -b 0.0.0.0 -p $PORT" };
  }
  const rack = paths.has("config.ru");
  return {
    ...base,
    framework: gem("sinatra") ? "sinatra" : rack ? "rack" : "ruby",
    buildCommand: null,
    startCommand: rack || gem("sinatra") ? "bundle exec rackup -o 0.0.0.0 -p $PORT" : null,
  };
}

function detectPhp({ paths, manifests }: Folder): Detection | null {
  const composer = manifests.has("composer.json") ? json(manifests.get("composer.json")) : null;
  if (!composer && !paths.has("index.php")) return null;
  const requires = { ...(composer?.require ?? {}), ...(composer?.["require-dev"] ?? {}) } as Record<string, unknown>;
  const docroot = paths.has("public/index.php") || paths.has("public/") ? " -t public" : "";
  let framework = "php";
  let start = `php -S 0.0.0.0:$PORT${docroot}`;
  if (paths.has("artisan") || "laravel/framework" in requires) {
    framework = "laravel";
    start = "php artisan serve --host 0.0.0.0 --port $PORT";
  } else if ("symfony/framework-bundle" in requires) {
    framework = "symfony";
  }
  return {
    stack: "php",
    framework,
    packageManager: composer ? "composer" : null,
    installCommand: composer ? "composer install --no-dev --optimize-autoloader" : null,
    buildCommand: null,
    startCommand: start,
    outputDirectory: null,
    dockerfile: null,
  };
}

/** The first `[package]` table's name and the keys of the first `[dependencies]` table (or `[dependencies.<name>]` tables). */
function cargoManifest(cargo: string): { name: string | undefined; dependencies: Set<string> } {
  let section = "";
  const seen = new Set<string>();
  let name: string | undefined;
  let nameRead = false;
  const dependencies = new Set<string>();
  for (const line of lines(cargo)) {
    if (line.startsWith("[")) {
      // Only the first occurrence of a table counts, as before.
      if (section) seen.add(section);
      const header = line.slice(0, line.indexOf("]") + 1 || undefined);
      section = seen.has(header) ? "(repeated)" : header;
      if (header.startsWith("[dependencies.") && header.endsWith("]")) dependencies.add(header.slice("[dependencies.".length, -1).trim());
      continue;
    }
    if (section === "[package]" && !nameRead) {
      const value = after(line, "name", "=");
      if (value !== null) {
        nameRead = true;
        const end = value.indexOf('"', 1);
        const quoted = value.startsWith('"') && end > 1 ? value.slice(1, end) : "";
        if (/^[A-Za-z0-9_-]+$/.test(quoted)) name = quoted;
      }
    } else if (section === "[dependencies]") {
      const eq = line.indexOf("=");
      if (eq > 0) dependencies.add(line.slice(0, eq).trim());
    }
  }
  return { name, dependencies };
}

function detectRust({ manifests }: Folder): Detection | null {
  const cargo = manifests.get("Cargo.toml");
  if (cargo === undefined) return null;
  const { name, dependencies } = cargoManifest(cargo);
  const framework = ["axum", "actix-web", "rocket", "warp"].find((d) => dependencies.has(d)) ?? "rust";
  return {
    stack: "rust",
    framework,
    packageManager: "cargo",
    installCommand: null,
    buildCommand: "cargo build --release",
    startCommand: name ? `./target/release/${name}` : null,
    outputDirectory: null,
    dockerfile: null,
  };
}
