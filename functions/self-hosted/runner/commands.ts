/**
 * Which commands build and start a deployment: the project's options first
 * (rootDirectory, installCommand, buildCommand, startCommand, outputDirectory),
 * else what the folder scan detects (functions/projects/folder/detect.ts, the
 * same detector, fed the work directory's listing and root manifests).
 *
 * - A static site (an output directory and no start command, or the static
 *   stack): the adapter serves the directory itself (AppSpec kind "static").
 * - Compose (the deployment carries services): there is no container engine on
 *   these machines, so each service with a build context or a command runs as
 *   its own process (command from the service, else detected in its build
 *   context, its compose file and Dockerfile aside; cwd = its build context, else
 *   the app directory). The web process is
 *   the first service with ports. A service with only an image fails the
 *   deployment, naming the service.
 * - A Dockerfile project or a stack with nothing to start fails with a reason
 *   saying which option to set.
 * - Paths the project names (rootDirectory, outputDirectory, a service's build
 *   context) stay inside the source: lexically, and no component that exists
 *   yet, from the source down to the target, may be a symbolic link (a
 *   repository could otherwise point its output directory at the server's data
 *   directory). What the build creates later is checked again where it is used
 *   (the static server walks its directory without following links).
 * - Manifests are read with O_NOFOLLOW and only when the opened descriptor is a
 *   regular file within the size cap; the listing never descends into a link.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, readSync } from "node:fs";
import { lstat, opendir } from "node:fs/promises";
import { join, relative, resolve, sep } from "node:path";
import type { ProjectOptions, ServiceSpec } from "../../../shared/db/schema";
import { COMPOSE_FILES, detect, type Folder, MANIFEST_NAMES } from "../../projects/folder/detect";

export class PlanError extends Error {}

/** One process to start, with the install/build steps that prepare it. */
export interface PlannedProcess {
  name: string;
  command: string;
  /** Absolute, inside the work directory. */
  cwd: string;
  http: boolean;
  install: string | null;
  build: string | null;
}

/** The resolved build and run plan; written to the work directory (no environment values in it) so a restart or a promote can launch without a rebuild. */
export type Plan = { stack: string; appDir: string } & (
  | { kind: "processes"; processes: PlannedProcess[] }
  | { kind: "static"; dir: string; install: string | null; build: string | null }
);

const MAX_LISTED = 20_000;
const MAX_DEPTH = 4;
const MAX_MANIFEST = 1024 * 1024;
const SKIPPED = new Set([".git", "node_modules"]);

/**
 * A path inside `base` (relative, no escape, no symbolic link at any component
 * that exists from `base` down), else PlanError naming the option. Components
 * that do not exist yet are left for the build to create.
 */
export function inside(base: string, rel: string, what: string): string {
  const target = resolve(base, rel);
  if (target !== base && !target.startsWith(base + sep)) throw new PlanError(`${what} '${rel}' points outside the source`);
  const segments = relative(base, target)
    .split(sep)
    .filter((s) => s !== "");
  let current = base;
  for (const [i, segment] of segments.entries()) {
    current = join(current, segment);
    const info = lstatSync(current, { throwIfNoEntry: false });
    if (!info) break;
    if (info.isSymbolicLink()) {
      throw new PlanError(
        i === segments.length - 1
          ? `${what} '${rel}' is a symbolic link; links are not followed`
          : `${what} '${rel}' passes through a symbolic link (${segments.slice(0, i + 1).join("/")}); links are not followed`,
      );
    }
    if (!info.isDirectory()) break;
  }
  return target;
}

/** A manifest's text: the descriptor opened without following a link must be a regular file within the cap; else undefined. */
function readManifest(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const info = fstatSync(fd);
    if (!info.isFile() || info.size > MAX_MANIFEST) return undefined;
    const buffer = Buffer.alloc(info.size);
    let read = 0;
    while (read < buffer.length) {
      const n = readSync(fd, buffer, read, buffer.length - read, read);
      if (n === 0) break;
      read += n;
    }
    return buffer.subarray(0, read).toString("utf8");
  } finally {
    closeSync(fd);
  }
}

/**
 * The detector's input, built from a directory the way the scan builds it from
 * an archive. Asynchronous and bounded: a source of 100,000 files must not hold
 * the server's event loop (directories are read as streams, at most MAX_LISTED
 * names in all, each directory's names sorted among those read).
 */
export async function folderOf(dir: string): Promise<Folder> {
  const paths = new Set<string>();
  const manifests = new Map<string, string>();
  const walk = async (abs: string, rel: string, depth: number) => {
    const names: string[] = [];
    try {
      for await (const entry of await opendir(abs, { bufferSize: 256 })) {
        if (depth === 0 && SKIPPED.has(entry.name)) continue;
        names.push(entry.name);
        if (paths.size + names.length >= MAX_LISTED) break;
      }
    } catch {
      return;
    }
    for (const name of names.sort()) {
      if (paths.size >= MAX_LISTED) return;
      const path = rel ? `${rel}/${name}` : name;
      const st = await lstat(join(abs, name)).catch(() => undefined);
      if (!st) continue;
      if (st.isDirectory()) {
        paths.add(`${path}/`);
        if (depth + 1 < MAX_DEPTH) await walk(join(abs, name), path, depth + 1);
      } else if (st.isFile()) {
        paths.add(path);
        if (depth === 0 && MANIFEST_NAMES.has(name)) {
          const text = readManifest(join(abs, name));
          if (text !== undefined) manifests.set(name, text);
        }
      }
    }
  };
  await walk(dir, "", 0);
  return { paths, manifests };
}

/** The plan for a materialized source at `srcDir`. */
export async function planOf(srcDir: string, options: ProjectOptions, services: Record<string, ServiceSpec> | null): Promise<Plan> {
  const appDir = options.rootDirectory ? inside(srcDir, options.rootDirectory, "rootDirectory") : srcDir;
  if (services && Object.keys(services).length > 0) return composePlan(appDir, services);

  const found = detect(await folderOf(appDir));
  const install = options.installCommand ?? found.installCommand;
  const build = options.buildCommand ?? found.buildCommand;
  const start = options.startCommand ?? found.startCommand;
  const output = options.outputDirectory ?? found.outputDirectory;
  if (!start && (output || found.stack === "static")) {
    return { kind: "static", stack: found.stack, appDir, dir: inside(appDir, output ?? ".", "outputDirectory"), install, build };
  }
  if (!start) {
    if (found.stack === "docker")
      throw new PlanError("The source has a Dockerfile and no start command: this server has no container engine; set startCommand in the project options");
    throw new PlanError(
      `No start command ${found.stack === "unknown" ? "(no known stack detected)" : `detected for the ${found.stack} stack`}: set startCommand (or outputDirectory for a static site) with POST /api/projects/{id}/options`,
    );
  }
  return { kind: "processes", stack: found.stack, appDir, processes: [{ name: "web", command: start, cwd: appDir, http: true, install, build }] };
}

/**
 * A build context as the detector should see it here: without the compose file and
 * the Dockerfile, which would make it answer `compose` or `docker` (nothing to
 * start) for the usual layout, a compose file and a Dockerfile next to the app's
 * own manifest. What is left is the language stack the process runs on.
 */
function withoutContainerFiles(folder: Folder): Folder {
  const dropped = new Set<string>([...COMPOSE_FILES, "Dockerfile", "dockerfile"]);
  const paths = new Set([...folder.paths].filter((p) => !dropped.has(p)));
  const manifests = new Map([...folder.manifests].filter(([name]) => !dropped.has(name)));
  return { paths, manifests };
}

async function composePlan(appDir: string, services: Record<string, ServiceSpec>): Promise<Plan> {
  const processes: PlannedProcess[] = [];
  let web = false;
  for (const [name, spec] of Object.entries(services)) {
    if (!spec.build && !spec.command) {
      throw new PlanError(`Service '${name}' has only an image (${spec.image ?? "none"}): it needs a container engine, none here`);
    }
    const cwd = spec.build ? inside(appDir, spec.build.context || ".", `Service '${name}' build context`) : appDir;
    const found = spec.build ? detect(withoutContainerFiles(await folderOf(cwd))) : undefined;
    const command = spec.command ?? found?.startCommand;
    if (!command) throw new PlanError(`Service '${name}' has no command and none was detected in its build context`);
    const http: boolean = !web && spec.ports.length > 0;
    web ||= http;
    processes.push({ name, command, cwd, http, install: found?.installCommand ?? null, build: found?.buildCommand ?? null });
  }
  return { kind: "processes", stack: "compose", appDir, processes };
}
