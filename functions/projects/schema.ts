/** Wire shapes shared by the Projects routes (the spec's "Project" and its read form). */
import { z } from "@hono/zod-openapi";
import { GIT_PROVIDERS as HOST_PROVIDERS } from "../../shared/git/hosts";
import { CONFIG_PARTS } from "../deployments/config-drift";
import { pathId } from "../../shared/http/params";
import { PROJECT_STATUSES, STATUS_DOC } from "./status";
import { DEPLOYMENT_STATUSES, GIT_PROVIDERS, ROUTING_STATES, SLEEP_MODES, type ProjectOptions, type projects } from "../../shared/db/schema";

export { PROJECT_STATUSES, STATUS_DOC } from "./status";

export const ProjectIdParam = z.object({
  id: pathId("id", "Project id (`prj_…`)"),
});

/** No control characters and no lone surrogates (stored, they would silently become U+FFFD). */
export const noControl = /^[^\p{Cc}\p{Cs}]*$/u;

const ProjectName = z
  .string()
  .trim()
  .min(1)
  .max(100)
  .regex(noControl, "must not contain control characters")
  .openapi({ description: "1-100 characters; the free route's slug is derived from it at creation" });

/** A shell command line: one line, 1-1024 characters. */
export const Command = z.string().trim().min(1).max(1024).regex(noControl, "must be a single line without control characters");

/** A directory inside the source tree: relative, no `..`, `.` for the root. */
function isRelativePath(p: string): boolean {
  if (p.startsWith("/") || p.includes("\\") || !noControl.test(p)) return false;
  return p.split("/").every((part) => part !== "..");
}

export const RelativePath = z.string().trim().min(1).max(255).refine(isRelativePath, "must be a relative path inside the source (no leading '/', no '..')");

const GitName = z
  .string()
  .trim()
  .min(1)
  .max(100)
  .regex(/^(?!\.{1,2}$)[A-Za-z0-9._-]+$/, "may contain only letters, digits, '.', '_' and '-'");

/** `git check-ref-format --branch`, the parts a branch name can break. */
function isValidBranch(name: string): boolean {
  if (name.length === 0 || name.length > 255) return false;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: git refuses control characters in ref names, so this does too.
  if (/[\x00-\x20\x7f~^:?*[\\]/.test(name)) return false;
  if (name.includes("..") || name.includes("@{") || name.includes("//") || name === "@") return false;
  if (name.startsWith("/") || name.endsWith("/") || name.startsWith("-") || name.endsWith(".") || name.endsWith(".lock")) return false;
  return name.split("/").every((part) => part.length > 0 && !part.startsWith("."));
}

export const BranchName = z.string().min(1).max(255).refine(isValidBranch, "must be a valid git branch name");

export const EnvironmentName = z
  .string()
  .min(1)
  .max(32)
  .regex(/^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/, "must be 1-32 lower-case letters, digits and '-', not starting or ending with '-'");

export const Framework = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._+-]*$/, "may contain only letters, digits, '.', '_', '+' and '-'")
  .openapi({ description: "Framework id, e.g. `nextjs`; `auto` (the default) detects it at build time" });

export const GitProvider = z.enum(GIT_PROVIDERS).openapi({ description: "`upload` marks a folder-upload project" });

/** The create body's fields (only `name` is required), shared with ensure (which adds its own into one flat object). */
export const CREATE_PROJECT_FIELDS = {
  name: ProjectName,
  gitOwner: GitName.optional(),
  gitRepo: GitName.optional(),
  gitBranch: BranchName.optional().openapi({ description: "Deploy branch; omitted: the repository's default branch" }),
  framework: Framework.optional(),
  buildCommand: Command.optional(),
  gitProvider: GitProvider.optional().openapi({ description: "Defaults to `github` when gitOwner and gitRepo are given, else none" }),
};

export const CreateProjectBody = z.strictObject(CREATE_PROJECT_FIELDS).openapi("CreateProject");

/** PATCH body: any subset of the create body; null clears an optional field. */
export const UpdateProjectBody = z
  .strictObject({
    name: ProjectName.optional(),
    gitOwner: GitName.nullable().optional(),
    gitRepo: GitName.nullable().optional(),
    gitBranch: BranchName.nullable().optional(),
    framework: Framework.optional(),
    buildCommand: Command.nullable().optional(),
    gitProvider: GitProvider.nullable().optional(),
  })
  .openapi("UpdateProject");

const DomainSchema = z.object({ hostname: z.string(), primary: z.boolean(), createdAt: z.string() }).openapi("ProjectDomain");

export const FreeRouteSchema = z
  .object({
    hostname: z.string().openapi({ description: "`<slug>.<shared domain>`" }),
    state: z.enum(ROUTING_STATES).openapi({
      description:
        "`pending`: not synced yet, or synced under a shared domain that has since changed (retry re-syncs); `synced`: the route serves the project; `offline`: withdrawn while the project is disabled",
    }),
    lastAttemptAt: z.string().nullable(),
    syncedAt: z.string().nullable(),
  })
  .openapi("FreeRoute");

/**
 * needsRedeploy, as the project and environment views describe it: a deployment pins
 * its configuration when queued (functions/deployments/config-snapshot.ts).
 */
export const NEEDS_REDEPLOY_DOC = (what: string) =>
  `true when ${what} runs an older configuration than the live one: a deployment pins the environment's variables, the resources (CPU, memory, disk, port; not the sleep mode, which applies at once) and the options (commands, directories) when it is queued, and runs them until it is replaced, also when it is promoted again. A new deployment (redeploy) takes the live configuration and clears it. false when nothing is deployed, and for a deployment queued before deployments pinned their configuration (it runs the live one)`;
export const CHANGES_DOC = (where: string) =>
  `What differs from the current deployment's snapshot ${where}: \`variables\` (a variable added, changed or deleted, secrets included), \`resources\`, \`options\`; empty when needsRedeploy is false`;
export const RedeployChanges = z.array(z.enum(CONFIG_PARTS));

export const DeploymentSummary = z.object({ id: z.string(), status: z.enum(DEPLOYMENT_STATUSES), createdAt: z.string() }).openapi("DeploymentSummary");

export const LastPushSchema = z.object({ commit: z.string(), branch: z.string().nullable(), at: z.string() }).openapi("GitLastPush", {
  description:
    "The last push to the deploy branch that the push webhook accepted with auto-deploy on (the commit a deploy would take); pushes to other branches and tags are not recorded here",
});

const GIT_BRANCH_DOC =
  "The deploy branch: the one set by `git/link` or `branch` (the repository's default branch when link named none); null when the repository was named by PATCH without a branch and never linked";

/** The git fields of a project's read form (GET /api/projects/:id). */
export const ProjectGitSchema = z
  .object({
    linked: z.boolean().openapi({ description: "The project names a repository (provider, owner and repo)" }),
    branch: z.string().nullable().openapi({ description: GIT_BRANCH_DOC }),
    defaultBranch: z
      .string()
      .nullable()
      .openapi({ description: "The repository's default branch (its `HEAD`) as last seen on the host by `git/link` or `branch`" }),
    linkedAt: z
      .string()
      .nullable()
      .openapi({ description: "When `git/link` last checked and linked the repository; null when it was only named by PATCH (never checked on the host)" }),
    autoDeploy: z.boolean(),
    lastPush: LastPushSchema.nullable(),
  })
  .openapi("ProjectGit");

/** GET /api/projects/:id/git and the git write routes' answer. */
export const GitSourceSchema = z
  .object({
    linked: z.boolean().openapi({ description: "false: the project names no repository (every other field is null or its default)" }),
    provider: z.enum(HOST_PROVIDERS).nullable(),
    owner: z.string().nullable(),
    repo: z.string().nullable(),
    cloneUrl: z.string().nullable().openapi({
      description:
        "`<provider base URL>/<owner>/<repo>.git`, never with credentials; null when the provider has no base URL here (Gitea without GIT_GITEA_URL)",
    }),
    branch: z.string().nullable().openapi({ description: GIT_BRANCH_DOC }),
    defaultBranch: z.string().nullable().openapi({ description: "The repository's default branch as last seen on the host" }),
    autoDeploy: z.boolean().openapi({ description: "Deploy on push to the deploy branch (POST /auto-deploy)" }),
    webhookDomain: z.string().nullable().openapi({
      description: "The hostname set by POST /webhook-domain; null: the default (PUBLIC_URL on the self-hosted server, else the host this request came to)",
    }),
    webhookUrl: z.string().nullable().openapi({
      description:
        "Where the git host sends pushes: `https://<webhook domain>/api/git/hooks/<hookId>`; null until auto-deploy is first turned on (which creates the hook)",
    }),
    linkedAt: z.string().nullable().openapi({ description: "When `git/link` last linked the repository; null when it was only named by PATCH" }),
    lastPush: LastPushSchema.nullable(),
  })
  .openapi("GitSource");

export type GitSourceView = z.infer<typeof GitSourceSchema>;

/** Where a project's deployments take their source from (sourceKind in store.ts decides). */
export const SOURCE_KINDS = ["git", "upload", "local", "none"] as const;

export const ProjectSourceSchema = z
  .object({
    kind: z.enum(SOURCE_KINDS).openapi({
      description:
        "Where the next deployment takes its source from: `git` a named repository (it wins over the rest), `upload` folders uploaded with `wsp deploy` or the folder-upload routes (each deployment records its own upload), `local` a folder on the self-hosted machine (`localPath`), `none` nothing yet",
    }),
    repository: z
      .object({ provider: z.enum(HOST_PROVIDERS), owner: z.string(), repo: z.string(), branch: z.string().nullable().openapi({ description: GIT_BRANCH_DOC }) })
      .nullable()
      .openapi({ description: "The named repository when `kind` is `git`; null otherwise" }),
    localPath: z.string().nullable().openapi({ description: "The folder's real path when `kind` is `local` (POST /api/projects/import); null otherwise" }),
  })
  .openapi("ProjectSource");

export const ProjectSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    slug: z.string().openapi({ description: "Label of the free route, fixed at creation and unique across the deployment" }),
    status: z.enum(PROJECT_STATUSES).openapi({ description: STATUS_DOC }),
    statusReason: z.string().nullable().openapi({ description: "Why the status is `degraded` or `crashed` (which deployment, what to do); null otherwise" }),
    asleep: z.boolean().openapi({
      description:
        "The production app is stopped for being idle (sleep mode `auto_sleep`, self-hosted: after SLEEP_AFTER without a request); the next request to it wakes it",
    }),
    disabledAt: z.string().nullable(),
    framework: z.string(),
    buildCommand: z.string().nullable(),
    gitProvider: GitProvider.nullable(),
    gitOwner: z.string().nullable(),
    gitRepo: z.string().nullable(),
    gitBranch: z.string().nullable(),
    git: ProjectGitSchema,
    source: ProjectSourceSchema,
    routes: z.object({ free: FreeRouteSchema, domains: z.array(DomainSchema) }),
    latestDeployment: DeploymentSummary.nullable(),
    needsRedeploy: z.boolean().openapi({ description: NEEDS_REDEPLOY_DOC("any of its environments' current deployment") }),
    changes: RedeployChanges.openapi({ description: CHANGES_DOC("in any environment (see GET /api/projects/{id}/environments for which)") }),
    location: z.enum(["cloud", "self-hosted"]).openapi({ description: "Where the project lives (this instance's mode)" }),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .openapi("Project");

export type ProjectView = z.infer<typeof ProjectSchema>;

export const OPTION_KEYS = ["rootDirectory", "installCommand", "buildCommand", "startCommand", "outputDirectory", "runtimeVersion", "healthCheckPath"] as const;

export const OptionsSchema = z
  .object(Object.fromEntries(OPTION_KEYS.map((k) => [k, z.string().nullable()])) as Record<(typeof OPTION_KEYS)[number], z.ZodNullable<z.ZodString>>)
  .openapi("ProjectOptions", { description: "null: detected at build time" });

export const optionsView = (o: ProjectOptions) =>
  Object.fromEntries(OPTION_KEYS.map((k) => [k, o[k] ?? null])) as Record<(typeof OPTION_KEYS)[number], string | null>;

const LIMITS = {
  cpuCores: { min: 0.1, max: 4 },
  memoryMb: { min: 128, max: 16384 },
  diskGb: { min: 1, max: 100 },
  port: { min: 1, max: 65535 },
} as const;

export const CpuCores = z.number().min(LIMITS.cpuCores.min).max(LIMITS.cpuCores.max).openapi({ description: "0.1-4 cores (fractions allowed)" });
export const MemoryMb = z.number().int().min(LIMITS.memoryMb.min).max(LIMITS.memoryMb.max).openapi({ description: "128-16384 MB, whole megabytes" });
export const DiskGb = z.number().int().min(LIMITS.diskGb.min).max(LIMITS.diskGb.max).openapi({ description: "Persistent disk, 1-100 GB" });
export const Port = z.number().int().min(LIMITS.port.min).max(LIMITS.port.max).openapi({ description: "The port the app listens on, 1-65535" });
export const SleepMode = z.enum(SLEEP_MODES).openapi({
  description:
    "`auto_sleep`: the app is stopped after SLEEP_AFTER (default 15 min) without a request and started again by the next one, which waits until it answers; `always_on`: kept running. A change applies at once (switching to `always_on` wakes a sleeping app)",
});

const Allotment = z.object({ cpuCores: CpuCores, memoryMb: MemoryMb });

export const ResourcesSchema = z
  .object({
    production: Allotment.openapi({ description: "Allotment of the running app (defaults 1 core, 512 MB)" }),
    build: Allotment.openapi({ description: "Allotment of each build (defaults 2 cores, 2048 MB)" }),
    diskGb: DiskGb.openapi({ description: "Persistent disk in GB, 1-100 (default 10)" }),
    sleepMode: SleepMode,
    port: Port.openapi({ description: "Listen port, 1-65535 (default 3000)" }),
  })
  .openapi("ProjectResources");

type ResourceColumns = "productionCpuCores" | "productionMemoryMb" | "buildCpuCores" | "buildMemoryMb" | "diskGb" | "sleepMode" | "port";

export function resourcesView(row: Pick<typeof projects.$inferSelect, ResourceColumns>): z.infer<typeof ResourcesSchema> {
  return {
    production: { cpuCores: row.productionCpuCores, memoryMb: row.productionMemoryMb },
    build: { cpuCores: row.buildCpuCores, memoryMb: row.buildMemoryMb },
    diskGb: row.diskGb,
    sleepMode: row.sleepMode,
    port: row.port,
  };
}
