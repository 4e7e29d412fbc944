/** The scan's detection in words: "Detected static site", "Detected Next.js (Node.js, pnpm)", "Detected chi (Go)", "Detected Docker Compose, 2 services". */
const STACK_LABELS: Record<string, string> = {
  compose: "Docker Compose",
  docker: "a Dockerfile",
  node: "Node.js",
  static: "static site",
  python: "Python",
  go: "Go",
  ruby: "Ruby",
  php: "PHP",
  rust: "Rust",
};

const FRAMEWORK_LABELS: Record<string, string> = {
  nextjs: "Next.js",
  nuxt: "Nuxt",
  remix: "Remix",
  sveltekit: "SvelteKit",
  astro: "Astro",
  gatsby: "Gatsby",
  angular: "Angular",
  "create-react-app": "Create React App",
  vite: "Vite",
  nestjs: "NestJS",
  express: "Express",
  fastify: "Fastify",
  hono: "Hono",
  koa: "Koa",
  django: "Django",
  fastapi: "FastAPI",
  flask: "Flask",
  gin: "Gin",
  echo: "Echo",
  fiber: "Fiber",
  chi: "chi",
  rails: "Rails",
  sinatra: "Sinatra",
  rack: "Rack",
  laravel: "Laravel",
  symfony: "Symfony",
  axum: "axum",
  "actix-web": "Actix Web",
  rocket: "Rocket",
  warp: "warp",
};

export function detectedLine(scan: { stack: string; framework?: string | null; packageManager?: string | null; services?: unknown[] | null }): string {
  if (scan.stack === "unknown" || !(scan.stack in STACK_LABELS)) return "Detected no known stack (the build step will try again)";
  const stack = STACK_LABELS[scan.stack]!;
  const services = scan.services?.length ? `, ${scan.services.length} service${scan.services.length === 1 ? "" : "s"}` : "";
  const fw = scan.framework && scan.framework !== scan.stack && scan.framework !== "auto" ? (FRAMEWORK_LABELS[scan.framework] ?? scan.framework) : null;
  // The package manager where there is a choice (npm, pnpm, yarn, bun; pip, uv, poetry, pipenv), not where it goes without saying (go, cargo, bundler).
  const pm = scan.packageManager && (scan.stack === "node" || scan.stack === "python") ? [scan.packageManager] : [];
  const details = [...(fw ? [stack] : []), ...pm];
  return `Detected ${fw ?? stack}${details.length ? ` (${details.join(", ")})` : ""}${services}`;
}
