/**
 * `npm run bench:git`: the git client's `listRemote` against `git ls-remote`
 * on the same repository, in the same run, on the test git host (git
 * http-backend behind a loopback server, test/support/git-server.ts).
 *
 * Two repositories: the test template (4 branches, a tag) and one with
 * BENCH_BRANCHES (default 2,000) more branches. For each: BENCH_RUNS (default
 * 20) sequential runs of listRemote over protocol v2, over v0 (the `/v0/`
 * path), and `git ls-remote --symref --heads` (a child process, protocol v2,
 * including its start-up: what a runner shelling out to git would pay). Prints
 * the median and p90 of each and the ratio listRemote / git.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { listRemote } from "../shared/git/ls-remote";
import { createNodeGitFetch } from "../shared/git/node-fetch";
import { startGitServer } from "../test/support/git-server";
import { report } from "./common";

const run = promisify(execFile);
const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const BRANCHES = Number(process.env.BENCH_BRANCHES ?? 2000);

function stats(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { median: at(0.5), p90: at(0.9) };
}

async function time(fn: () => Promise<unknown>): Promise<number[]> {
  await fn(); // warm-up
  const samples: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const start = performance.now();
    await fn();
    samples.push(performance.now() - start);
  }
  return samples;
}

const fmt = (ms: number) => `${ms.toFixed(1)} ms`;

async function main() {
  const server = await startGitServer();
  const gitFetch = createNodeGitFetch({ allowPrivate: true });
  try {
    const small = await server.createRepo({ repo: "bench-small" });
    const large = await server.createRepo({ repo: "bench-large" });
    // Many branches at once through one update-ref transaction.
    const head = await server.revParse(large.owner, large.repo, "refs/heads/trunk");
    const lines = Array.from({ length: BRANCHES }, (_, i) => `create refs/heads/bench/branch-${String(i).padStart(5, "0")} ${head}\n`).join("");
    const child = execFile("git", ["update-ref", "--stdin"], { cwd: `${server.root}/repos/${large.owner}/${large.repo}.git` });
    child.stdin!.end(lines);
    await new Promise<void>((resolve, reject) => child.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`update-ref exited ${code}`)))));

    console.log(`git ls-remote vs listRemote, ${RUNS} runs each (median / p90)`);
    for (const repo of [small, large]) {
      const check = await listRemote(repo.url, { fetch: gitFetch });
      if (!check.ok) throw new Error(check.message);
      const v2 = stats(await time(() => listRemote(repo.url, { fetch: gitFetch })));
      const v0 = stats(await time(() => listRemote(repo.url.replace(server.url, `${server.url}/v0`), { fetch: gitFetch })));
      const git = stats(await time(() => run("git", ["ls-remote", "--symref", repo.url, "HEAD", "refs/heads/*"], { maxBuffer: 64 * 1024 * 1024 })));
      console.log(`\n${repo.repo}: ${check.branches.length} branches, default ${check.headBranch}`);
      console.log(`  listRemote v2 (4 requests)  ${fmt(v2.median)} / ${fmt(v2.p90)}`);
      console.log(`  listRemote v0 (2 requests)  ${fmt(v0.median)} / ${fmt(v0.p90)}`);
      console.log(`  git ls-remote (v2, process) ${fmt(git.median)} / ${fmt(git.p90)}`);
      console.log(`  ratio listRemote v2 / git   ${(v2.median / git.median).toFixed(2)}`);
      report({
        measure: `git listRemote (v2), ${check.branches.length} branches, median`,
        figure: fmt(v2.median),
        floor: `${fmt(git.median)} (git ls-remote)`,
        ratio: v2.median / git.median,
        target: "≤ 1.00x",
        met: v2.median <= git.median,
      });
    }
  } finally {
    await server.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
